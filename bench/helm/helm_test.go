// Package helm measures pkg/helmrelease against the helm CLI on the same real
// kube-apiserver (internal/apiservertest) in the same run, and prints figures,
// never assertions:
//   - BenchmarkInstall20: 20 small charts installed by one Driver one by one, the
//     same again (no change), 20 in parallel, and the helm CLI installing the same
//     archives one by one (`helm install` each); ratios printed;
//   - BenchmarkStuckRecovery: a release left pending-upgrade by a process killed
//     with SIGKILL mid-upgrade (helm/helm#11863): what the CLI answers, the time to
//     detect it, and the time for Apply to unlock, roll back and upgrade it.
//
// The CLI is built from the Go module proxy by scripts/bench-helm.sh
// (PLINTH_HELM_CLI names it); without it only the SDK side runs.
package helm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plinth-dev/plinth/internal/apiservertest"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/apprunner"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
	"github.com/plinth-dev/plinth/pkg/state"
)

const charts = 20

// The child mode of the benchmark binary: it upgrades a release to a chart that
// never becomes ready and is killed with SIGKILL by the benchmark while Helm
// waits, leaving the release pending-upgrade as a coordinator killed mid-apply
// would.
const (
	childEnv      = "BENCH_HELM_CHILD"
	childKubeconf = "BENCH_HELM_KUBECONFIG"
	childChart    = "BENCH_HELM_CHART"
	childRelease  = "BENCH_HELM_RELEASE"
	stuckNS       = "stuck"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

func runChild() int {
	kc, err1 := os.ReadFile(os.Getenv(childKubeconf))
	archive, err2 := os.ReadFile(os.Getenv(childChart))
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, err := helmrelease.New(kc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		var c *helmrelease.Chart
		if c, err = helmrelease.LoadChart(archive); err == nil {
			_, err = d.Apply(context.Background(), helmrelease.Request{Release: os.Getenv(childRelease), Namespace: stuckNS, Chart: c,
				Wait: helmrelease.Wait{For: helmrelease.WaitAll, Timeout: 10 * time.Minute}})
		}
	}
	fmt.Fprintln(os.Stderr, "child apply returned:", err)
	return 1
}

// archive packs a small chart of objects ready without nodes (a ConfigMap, a
// Secret and a ClusterIP Service) and any extra templates.
func archive(b *testing.B, name, version string, extra map[string]string) []byte {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n",
		"values.yaml": "greeting: hello\n",
		"templates/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data: {greeting: {{ .Values.greeting | quote }}}
---
apiVersion: v1
kind: Secret
metadata: {name: {{ .Release.Name }}}
stringData: {token: bench}
---
apiVersion: v1
kind: Service
metadata: {name: {{ .Release.Name }}}
spec: {ports: [{port: 80}], selector: {app: {{ .Release.Name }}}}
`,
	}
	for p, body := range extra {
		files[p] = body
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, p := range paths {
		body := files[p]
		if err := tw.WriteHeader(&tar.Header{Name: name + "/" + p, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			b.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// stuckDeployment never becomes available: the harness runs no controllers.
const stuckDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: c, image: "registry.invalid/none:1"}]}
`

type env struct {
	b   *testing.B
	kcb []byte // kubeconfig
	d   *helmrelease.Driver
	cs  kubernetes.Interface
	kc  string // kubeconfig file
	dir string
	cli string // the helm CLI, "" when not built
}

func newEnv(b *testing.B) *env {
	c := apiservertest.Start(b)
	dir := b.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, c.Kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	d, err := helmrelease.New(c.Kubeconfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		b.Fatal(err)
	}
	return &env{b: b, kcb: c.Kubeconfig, d: d, cs: cs, kc: kc, dir: dir, cli: os.Getenv("PLINTH_HELM_CLI")}
}

// helm runs the CLI against the harness, with its own (empty) Helm home.
func (e *env) helm(args ...string) ([]byte, error) {
	cmd := exec.Command(e.cli, append(args, "--kubeconfig", e.kc)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+e.dir+"/cache", "HELM_CONFIG_HOME="+e.dir+"/config", "HELM_DATA_HOME="+e.dir+"/data")
	return cmd.CombinedOutput()
}

func per(d time.Duration, n int) time.Duration { return (d / time.Duration(n)).Round(time.Millisecond) }

func BenchmarkInstall20(b *testing.B) {
	e := newEnv(b)
	var loaded []*helmrelease.Chart
	var paths []string
	for i := range charts {
		name := fmt.Sprintf("c%02d", i)
		a := archive(b, name, "0.1.0", nil)
		ch, err := helmrelease.LoadChart(a)
		if err != nil {
			b.Fatal(err)
		}
		loaded = append(loaded, ch)
		p := filepath.Join(e.dir, name+".tgz")
		if err := os.WriteFile(p, a, 0o600); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	ctx := context.Background()
	req := func(i int, ns string) helmrelease.Request {
		return helmrelease.Request{Release: fmt.Sprintf("c%02d", i), Namespace: ns, Chart: loaded[i]}
	}
	var sdk, noop, hooks, par, app, cliTime time.Duration
	b.ResetTimer()
	for n := range b.N {
		ns := fmt.Sprintf("sdk-%d", n)
		start := time.Now()
		for i := range loaded {
			if _, err := e.d.Apply(ctx, req(i, ns)); err != nil {
				b.Fatal(err)
			}
		}
		sdk += time.Since(start)

		start = time.Now()
		for i := range loaded {
			if r, err := e.d.Apply(ctx, req(i, ns)); err != nil || r.Changed {
				b.Fatalf("re-apply: %v %+v", err, r)
			}
		}
		noop += time.Since(start)

		// Waiting for hooks only: what the wait for readiness costs.
		ns = fmt.Sprintf("hooks-%d", n)
		start = time.Now()
		for i := range loaded {
			r := req(i, ns)
			r.Wait.For = helmrelease.WaitHooks
			if _, err := e.d.Apply(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		hooks += time.Since(start)

		// All 20 at once through the one Driver, as a parallel chart group would.
		ns = fmt.Sprintf("par-%d", n)
		start = time.Now()
		errs := make([]error, len(loaded))
		var wg sync.WaitGroup
		for i := range loaded {
			wg.Go(func() { _, errs[i] = e.d.Apply(ctx, req(i, ns)) })
		}
		wg.Wait()
		par += time.Since(start)
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}

		// The same 20 as one Application (one parallel group) through the leader's
		// runner: request → every chart deployed, its progress recorded in the state.
		app += e.appApply(ctx, paths, fmt.Sprintf("app-%d", n))

		if e.cli == "" {
			continue
		}
		ns = fmt.Sprintf("cli-%d", n)
		start = time.Now()
		for i, p := range paths {
			if out, err := e.helm("install", fmt.Sprintf("c%02d", i), p, "--namespace", ns, "--create-namespace",
				"--wait=watcher", "--timeout", "5m"); err != nil {
				b.Fatalf("helm install: %v\n%s", err, out)
			}
		}
		cliTime += time.Since(start)
	}
	b.StopTimer()
	fmt.Printf("install of %d small charts (ConfigMap, Secret, Service each), waiting for every resource, mean of %d round(s):\n", charts, b.N)
	fmt.Printf("  pkg/helmrelease, one by one:   %v (%v per chart)\n", per(sdk, b.N), per(sdk, b.N*charts))
	fmt.Printf("  pkg/helmrelease, re-apply:     %v (no change, no revision)\n", per(noop, b.N))
	fmt.Printf("  pkg/helmrelease, hooks only:   %v (one by one, no wait for readiness)\n", per(hooks, b.N))
	fmt.Printf("  pkg/helmrelease, 20 parallel:  %v\n", per(par, b.N))
	fmt.Printf("  app apply (pkg/apprunner):     %v (one parallel group: request -> applied, progress in the state)\n", per(app, b.N))
	b.ReportMetric(float64(per(sdk, b.N).Milliseconds()), "sdk-ms/20")
	b.ReportMetric(float64(per(par, b.N).Milliseconds()), "sdk-par-ms/20")
	if e.cli == "" {
		fmt.Println("  helm CLI: skipped (PLINTH_HELM_CLI unset; scripts/bench-helm.sh builds it)")
		return
	}
	fmt.Printf("  helm CLI, one by one:          %v (%v per chart; %s)\n", per(cliTime, b.N), per(cliTime, b.N*charts), e.cli)
	fmt.Printf("  ratio CLI / SDK one by one:    %.2f\n", float64(cliTime)/float64(sdk))
	fmt.Printf("  ratio CLI / SDK parallel:      %.2f\n", float64(cliTime)/float64(par))
	fmt.Printf("  ratio CLI / app apply:         %.2f\n", float64(cliTime)/float64(app))
	b.ReportMetric(float64(per(cliTime, b.N).Milliseconds()), "cli-ms/20")
}

// appApply uploads the archives as one Application (a single parallel group) into
// a real state.Store, applies it with apprunner's runner and returns the time from
// the apply request until the application is applied.
func (e *env) appApply(ctx context.Context, paths []string, name string) time.Duration {
	b := e.b
	store := state.New(nil)
	var mu sync.Mutex
	var idx uint64
	propose := func(_ context.Context, typ string, body any) error {
		mu.Lock()
		defer mu.Unlock()
		data, err := state.Encode(typ, time.Now(), body)
		if err != nil {
			return err
		}
		idx++
		if err, ok := store.ApplyCommand(idx, data).(error); ok {
			return err
		}
		return nil
	}
	group := api.ChartGroup{Name: "all"}
	var archives []state.Archive
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		base := filepath.Base(p)
		archives = append(archives, state.Archive{Name: base, Data: data})
		c := strings.TrimSuffix(base, ".tgz")
		group.Charts = append(group.Charts, api.Chart{Name: c, Release: c, Namespace: name, Source: api.ChartSource{Archive: base}})
	}
	app := api.Application{TypeMeta: api.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindApplication},
		Metadata: api.ObjectMeta{Name: name}, Spec: api.ApplicationSpec{Groups: []api.ChartGroup{group}}}
	m := api.Manifest{Applications: []api.Application{app}}
	m.Default()
	if err := propose(ctx, state.CmdAppUpload, state.AppUpload{Application: m.Applications[0], Archives: archives}); err != nil {
		b.Fatal(err)
	}
	r := apprunner.New(apprunner.Config{Store: store, Propose: propose,
		Kubeconfig: func() ([]byte, error) { return e.kcb, nil },
		Unseal:     func(_ string, c []byte) ([]byte, error) { return c, nil },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)), Parallel: charts})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	if err := propose(ctx, state.CmdAppRequest, state.AppRequest{Name: name, Action: state.AppActionApply}); err != nil {
		b.Fatal(err)
	}
	for {
		var rec state.AppRecord
		store.Read(func(v state.View) { rec, _ = v.App(name) })
		switch rec.Status.State {
		case api.AppApplied:
			return time.Since(start)
		case api.AppApplyFailed:
			b.Fatalf("app apply failed: %+v", rec.Status.Conditions)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killMidUpgrade upgrades the release to the stuck chart in a child process and
// kills it with SIGKILL once Helm has recorded pending-upgrade and made the
// Deployment it waits for.
func (e *env) killMidUpgrade(release string, stuck []byte) {
	b := e.b
	kc, ch := e.kc, filepath.Join(e.dir, "stuck.tgz")
	if err := os.WriteFile(ch, stuck, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", childKubeconf+"="+kc, childChart+"="+ch, childRelease+"="+release)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := e.d.Status(ctx, release, stuckNS)
		if err == nil && s.State == "pending-upgrade" {
			if _, derr := e.cs.AppsV1().Deployments(stuckNS).Get(ctx, release, metav1.GetOptions{}); derr == nil {
				break
			}
		}
		select {
		case err := <-done:
			b.Fatalf("child exited before the release was pending-upgrade (%v):\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			b.Fatalf("release %s not pending-upgrade within 60s (last %+v, %v)", release, s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	<-done
}

func BenchmarkStuckRecovery(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	good, err := helmrelease.LoadChart(archive(b, "st", "0.1.0", nil))
	if err != nil {
		b.Fatal(err)
	}
	stuck := archive(b, "st", "0.2.0", map[string]string{"templates/deployment.yaml": stuckDeployment})
	var detect, recover, cliTime time.Duration
	var cliSaid string
	var recovered []string
	b.ResetTimer()
	for n := range b.N {
		b.StopTimer()
		release := fmt.Sprintf("st%d", n)
		if _, err := e.d.Apply(ctx, helmrelease.Request{Release: release, Namespace: stuckNS, Chart: good}); err != nil {
			b.Fatal(err)
		}
		e.killMidUpgrade(release, stuck)
		b.StartTimer()

		// Detect: one read of the release's latest revision.
		start := time.Now()
		s, err := e.d.Status(ctx, release, stuckNS)
		detect += time.Since(start)
		if err != nil || s.State != "pending-upgrade" {
			b.Fatalf("status after the kill: %+v %v", s, err)
		}

		// What the helm CLI alone answers (helm/helm#11863).
		if e.cli != "" {
			b.StopTimer()
			p := filepath.Join(e.dir, "good.tgz")
			if err := os.WriteFile(p, archive(b, "st", "0.1.0", nil), 0o600); err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			out, err := e.helm("upgrade", release, p, "--namespace", stuckNS, "--wait=watcher", "--timeout", "1m")
			cliTime += time.Since(start)
			if err == nil {
				cliSaid = "succeeded"
			} else {
				cliSaid = strings.TrimSpace(string(out))
			}
			b.StartTimer()
		}

		// Recover: unlock, roll back to revision 1, upgrade to the new values.
		start = time.Now()
		r, err := e.d.Apply(ctx, helmrelease.Request{Release: release, Namespace: stuckNS, Chart: good,
			Values: map[string]any{"greeting": "after"}, Remediation: helmrelease.RemediateRollback})
		recover += time.Since(start)
		if err != nil || r.Status.State != "deployed" {
			b.Fatalf("recovery: %+v %v", r, err)
		}
		recovered = r.Recovered
	}
	b.StopTimer()
	fmt.Printf("a release left pending-upgrade by a process killed with SIGKILL mid-upgrade, mean of %d round(s):\n", b.N)
	if e.cli != "" {
		fmt.Printf("  helm CLI upgrade:              %v, %s\n", per(cliTime, b.N), cliSaid)
	}
	fmt.Printf("  detect (read latest revision): %v\n", per(detect, b.N))
	fmt.Printf("  recover and upgrade (Apply):   %v: %s\n", per(recover, b.N), strings.Join(recovered, ", "))
	b.ReportMetric(float64(per(recover, b.N).Milliseconds()), "recover-ms")
}
