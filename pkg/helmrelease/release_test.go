package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plinth-dev/plinth/internal/apiservertest"
)

// The child mode of the test binary: it applies a chart and is killed with
// SIGKILL by the test while Helm waits, leaving the release pending as a
// coordinator killed mid-apply would (helm/helm#11863).
const (
	childEnv      = "HELMRELEASE_TEST_CHILD"
	childKubeconf = "HELMRELEASE_TEST_KUBECONFIG"
	childChart    = "HELMRELEASE_TEST_CHART"
	childRelease  = "HELMRELEASE_TEST_RELEASE"
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
	d, err := New(kc, nil)
	if err == nil {
		var c *Chart
		if c, err = LoadChart(archive); err == nil {
			_, err = d.Apply(context.Background(), Request{Release: os.Getenv(childRelease), Namespace: "stuck", Chart: c,
				Wait: Wait{For: WaitAll, Timeout: 10 * time.Minute}})
		}
	}
	fmt.Fprintln(os.Stderr, "child apply returned:", err)
	return 1
}

type env struct {
	t  *testing.T
	d  *Driver
	cs kubernetes.Interface
	kc []byte
}

func newEnv(t *testing.T) *env {
	c := apiservertest.Start(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err := New(c.Kubeconfig, log)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, d: d, cs: cs, kc: c.Kubeconfig}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (e *env) apply(req Request) Result {
	e.t.Helper()
	start := time.Now()
	res, err := e.d.Apply(context.Background(), req)
	if err != nil {
		e.t.Fatalf("apply: %v", err)
	}
	e.t.Logf("figure: apply %s/%s → revision %d %s changed=%v in %v", req.Namespace, req.Release, res.Status.Revision, res.Status.State, res.Changed, time.Since(start).Round(time.Millisecond))
	return res
}

func (e *env) greeting(ns, name string) string {
	e.t.Helper()
	cm, err := e.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name+"-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "<none>"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return cm.Data["greeting"]
}

func states(h []Status) string {
	var s []string
	for _, r := range h {
		s = append(s, fmt.Sprintf("%d:%s", r.Revision, r.State))
	}
	return strings.Join(s, " ")
}

// TestLifecycleRealAPIServer: install, the same apply again (no revision), an
// upgrade with changed values, a chart that does not render (nothing changes),
// rollback, history and uninstall, against a real kube-apiserver and etcd.
func TestLifecycleRealAPIServer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c1 := mustChart(t, demoChart(t, "0.1.0", nil))
	req := Request{Release: "demo", Namespace: "apps", Chart: c1, Values: map[string]any{"greeting": "hello"}}

	if _, err := e.d.Status(ctx, "demo", "apps"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status before install: %v, want ErrNotFound", err)
	}
	r := e.apply(req)
	if !r.Changed || r.Status.Revision != 1 || r.Status.State != "deployed" || r.Status.Chart != "demo-0.1.0" {
		t.Fatalf("install: %+v", r)
	}
	if g := e.greeting("apps", "demo"); g != "hello" {
		t.Errorf("greeting %q after install", g)
	}
	if _, err := e.cs.CoreV1().Services("apps").Get(ctx, "demo", metav1.GetOptions{}); err != nil {
		t.Errorf("service: %v", err)
	}

	if r = e.apply(req); r.Changed || r.Status.Revision != 1 {
		t.Errorf("same chart and values made a revision: %+v", r)
	}

	req.Values = map[string]any{"greeting": "bonjour"}
	if r = e.apply(req); !r.Changed || r.Status.Revision != 2 || e.greeting("apps", "demo") != "bonjour" {
		t.Errorf("upgrade with new values: %+v, greeting %q", r, e.greeting("apps", "demo"))
	}
	// A new chart version with the same values is a change too.
	req.Chart = mustChart(t, demoChart(t, "0.2.0", nil))
	if r = e.apply(req); !r.Changed || r.Status.Revision != 3 || r.Status.Chart != "demo-0.2.0" {
		t.Errorf("upgrade to a new chart: %+v", r)
	}

	bad := req
	bad.Values = map[string]any{"greeting": nil}
	if _, err := e.d.Apply(ctx, bad); !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "apps/demo") {
		t.Errorf("chart that does not render: %v, want ErrRender naming apps/demo", err)
	}
	if s, _ := e.d.Status(ctx, "demo", "apps"); s.Revision != 3 || s.State != "deployed" {
		t.Errorf("a refused apply changed the release: %+v", s)
	}

	start := time.Now()
	s, err := e.d.Rollback(ctx, "demo", "apps", 1, Wait{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: rollback to revision 1 in %v", time.Since(start).Round(time.Millisecond))
	if s.Revision != 4 || s.State != "deployed" || e.greeting("apps", "demo") != "hello" {
		t.Errorf("rollback: %+v, greeting %q", s, e.greeting("apps", "demo"))
	}
	// The rolled-back revision carries revision 1's digests: applying revision 1's
	// chart and values again is no change.
	if r = e.apply(Request{Release: "demo", Namespace: "apps", Chart: c1, Values: map[string]any{"greeting": "hello"}}); r.Changed {
		t.Errorf("apply of the rolled-back inputs made a revision: %+v", r)
	}
	h, err := e.d.History(ctx, "demo", "apps")
	if err != nil {
		t.Fatal(err)
	}
	if got := states(h); got != "1:superseded 2:superseded 3:superseded 4:deployed" {
		t.Errorf("history %s", got)
	}

	if err := e.d.Uninstall(ctx, "demo", "apps", Wait{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Status(ctx, "demo", "apps"); !errors.Is(err, ErrNotFound) {
		t.Errorf("status after uninstall: %v", err)
	}
	if g := e.greeting("apps", "demo"); g != "<none>" {
		t.Errorf("configmap left after uninstall: %q", g)
	}
	if err := e.d.Uninstall(ctx, "demo", "apps", Wait{}); err != nil {
		t.Errorf("second uninstall: %v", err)
	}
	if h, err := e.d.History(ctx, "demo", "apps"); err != nil || len(h) != 0 {
		t.Errorf("history after uninstall: %v %v", states(h), err)
	}
}

// stuckChart adds a Deployment to the demo chart: with no controllers running it
// never becomes available, so a child applying it waits until killed.
func stuckChart(t *testing.T) []byte {
	return demoChart(t, "0.9.0", map[string]string{"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: c, image: "registry.invalid/none:1"}]}
`})
}

// killMidApply runs an apply of the stuck chart in a child process and kills it
// with SIGKILL once Helm has recorded the release as `want` and waits for the
// Deployment it made.
func (e *env) killMidApply(release, want string) {
	t := e.t
	dir := t.TempDir()
	kc, ch := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "chart.tgz")
	if err := errors.Join(os.WriteFile(kc, e.kc, 0o600), os.WriteFile(ch, stuckChart(t), 0o600)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", childKubeconf+"="+kc, childChart+"="+ch, childRelease+"="+release)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Pending, and the Deployment made: the child is in Helm's wait.
		s, err := e.d.Status(context.Background(), release, "stuck")
		if err == nil && s.State == want {
			if _, derr := e.cs.AppsV1().Deployments("stuck").Get(context.Background(), release, metav1.GetOptions{}); derr == nil {
				break
			}
		}
		select {
		case err := <-done:
			exited = true
			t.Fatalf("child exited before the release was %s (%v):\n%s", want, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("release %s not %s within 60s (last %+v, %v)", release, want, s, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	exited = true
	t.Logf("child killed with SIGKILL while release %s was %s", release, want)
}

// TestStuckReleasesRealAPIServer: releases left pending-upgrade and
// pending-install by a process killed mid-apply (a child of the test, SIGKILL
// while Helm waits) are unlocked and remediated by the next Apply per policy; a
// protected release that would have to be uninstalled is kept and said so.
func TestStuckReleasesRealAPIServer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	good := mustChart(t, demoChart(t, "0.1.0", nil))
	hooks := Wait{For: WaitHooks, Timeout: time.Minute}

	t.Run("pending-upgrade/rollback", func(t *testing.T) {
		e.t = t
		e.apply(Request{Release: "up", Namespace: "stuck", Chart: good})
		e.killMidApply("up", "pending-upgrade")
		// Helm alone refuses every later operation on this release.
		start := time.Now()
		r := e.apply(Request{Release: "up", Namespace: "stuck", Chart: good, Values: map[string]any{"greeting": "after"}, Remediation: RemediateRollback})
		t.Logf("figure: stuck pending-upgrade detected and recovered, then upgraded, in %v: %v", time.Since(start).Round(time.Millisecond), r.Recovered)
		if len(r.Recovered) != 2 || !strings.Contains(r.Recovered[0], "unlocked revision 2 from stale pending-upgrade") ||
			!strings.Contains(r.Recovered[1], "rolled back failed revision 2 to revision 1") {
			t.Errorf("recovered: %q", r.Recovered)
		}
		if r.Status.State != "deployed" || r.Status.Revision != 4 || e.greeting("stuck", "up") != "after" {
			t.Errorf("after recovery: %+v, greeting %q", r.Status, e.greeting("stuck", "up"))
		}
		if _, err := e.cs.AppsV1().Deployments("stuck").Get(ctx, "up", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the killed revision's Deployment is still there after the rollback: %v", err)
		}
		h, _ := e.d.History(ctx, "up", "stuck")
		if got := states(h); got != "1:superseded 2:failed 3:superseded 4:deployed" {
			t.Errorf("history %s", got)
		}
		if !strings.Contains(h[1].LastError, "unlocked from stale pending-upgrade") {
			t.Errorf("revision 2's last error: %q", h[1].LastError)
		}
	})

	t.Run("pending-upgrade/reinstall", func(t *testing.T) {
		e.t = t
		e.apply(Request{Release: "re", Namespace: "stuck", Chart: good})
		e.killMidApply("re", "pending-upgrade")
		start := time.Now()
		r := e.apply(Request{Release: "re", Namespace: "stuck", Chart: good, Remediation: RemediateReinstall, Wait: hooks})
		t.Logf("figure: stuck pending-upgrade reinstalled in %v: %v", time.Since(start).Round(time.Millisecond), r.Recovered)
		if len(r.Recovered) != 2 || !strings.Contains(r.Recovered[1], "uninstalled failed revision 2 to reinstall") {
			t.Errorf("recovered: %q", r.Recovered)
		}
		if r.Status.State != "deployed" || r.Status.Revision != 1 || e.greeting("stuck", "re") != "hello" {
			t.Errorf("after reinstall: %+v", r.Status)
		}
	})

	t.Run("pending-install/protected", func(t *testing.T) {
		e.t = t
		e.killMidApply("prot", "pending-install")
		req := Request{Release: "prot", Namespace: "stuck", Chart: good, Protected: true, Wait: hooks}
		_, err := e.d.Apply(ctx, req)
		if !errors.Is(err, ErrProtected) || !strings.Contains(err.Error(), "stuck/prot") {
			t.Fatalf("apply of a failed protected install: %v, want ErrProtected naming stuck/prot", err)
		}
		t.Logf("refused: %v", err)
		s, _ := e.d.Status(ctx, "prot", "stuck")
		if s.State != "failed" || s.Revision != 1 {
			t.Errorf("protected release not kept: %+v", s)
		}
		if _, err := e.cs.AppsV1().Deployments("stuck").Get(ctx, "prot", metav1.GetOptions{}); err != nil {
			t.Errorf("the protected release's objects are gone: %v", err)
		}
		// The repair the error names: uninstall, then apply again.
		if err := e.d.Uninstall(ctx, "prot", "stuck", hooks); err != nil {
			t.Fatal(err)
		}
		if r := e.apply(req); r.Status.State != "deployed" || r.Status.Revision != 1 {
			t.Errorf("after uninstall and apply: %+v", r.Status)
		}
	})

	t.Run("pending-install/reinstall", func(t *testing.T) {
		e.t = t
		e.killMidApply("inst", "pending-install")
		r := e.apply(Request{Release: "inst", Namespace: "stuck", Chart: good, Wait: hooks})
		// Nothing to roll back to: the default policy reinstalls.
		if len(r.Recovered) != 2 || !strings.Contains(r.Recovered[1], "uninstalled failed revision 1") || r.Status.State != "deployed" {
			t.Errorf("recovered %q, status %+v", r.Recovered, r.Status)
		}
	})
}
