// Package helm measures pkg/helmrelease installing 20 small charts against the
// helm CLI installing the same charts one by one, on the same real kube-apiserver
// in the same run, and prints the ratio. The CLI is built from the Go module proxy
// by scripts/bench-helm.sh (PLINTH_HELM_CLI names it); without it only the SDK
// side runs. Figures, never assertions.
package helm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/apiservertest"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
)

const charts = 20

// chart is a small chart of objects ready without nodes: a ConfigMap, a Secret
// and a ClusterIP Service.
func chart(b *testing.B, i int) []byte {
	name := fmt.Sprintf("c%02d", i)
	files := []struct{ path, body string }{
		{"Chart.yaml", "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n"},
		{"values.yaml", "greeting: hello\n"},
		{"templates/all.yaml", `apiVersion: v1
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
`},
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name + "/" + f.path, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			b.Fatal(err)
		}
	}
	if err := firstErr(tw.Close(), zw.Close()); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func BenchmarkInstall20(b *testing.B) {
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
	var loaded []*helmrelease.Chart
	var paths []string
	for i := range charts {
		a := chart(b, i)
		ch, err := helmrelease.LoadChart(a)
		if err != nil {
			b.Fatal(err)
		}
		loaded = append(loaded, ch)
		p := filepath.Join(dir, fmt.Sprintf("c%02d.tgz", i))
		if err := os.WriteFile(p, a, 0o600); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	cli := os.Getenv("PLINTH_HELM_CLI")
	ctx := context.Background()
	var sdk, cliTime, noop time.Duration
	b.ResetTimer()
	for n := range b.N {
		ns := fmt.Sprintf("sdk-%d", n)
		start := time.Now()
		for i, ch := range loaded {
			if _, err := d.Apply(ctx, helmrelease.Request{Release: fmt.Sprintf("c%02d", i), Namespace: ns, Chart: ch}); err != nil {
				b.Fatal(err)
			}
		}
		sdk += time.Since(start)
		start = time.Now()
		for i, ch := range loaded {
			if r, err := d.Apply(ctx, helmrelease.Request{Release: fmt.Sprintf("c%02d", i), Namespace: ns, Chart: ch}); err != nil || r.Changed {
				b.Fatalf("re-apply: %v %+v", err, r)
			}
		}
		noop += time.Since(start)
		if cli == "" {
			continue
		}
		ns = fmt.Sprintf("cli-%d", n)
		start = time.Now()
		for i, p := range paths {
			cmd := exec.Command(cli, "install", fmt.Sprintf("c%02d", i), p, "--namespace", ns, "--create-namespace",
				"--wait=watcher", "--timeout", "5m", "--kubeconfig", kc)
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir+"/cache", "HELM_CONFIG_HOME="+dir+"/config", "HELM_DATA_HOME="+dir+"/data")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("helm install: %v\n%s", err, out)
			}
		}
		cliTime += time.Since(start)
	}
	b.StopTimer()
	per := func(d time.Duration) time.Duration { return (d / time.Duration(b.N)).Round(time.Millisecond) }
	fmt.Printf("install of %d charts, one by one, waiting for every resource:\n", charts)
	fmt.Printf("  pkg/helmrelease: %v  (re-apply, no change: %v)\n", per(sdk), per(noop))
	b.ReportMetric(float64(per(sdk).Milliseconds()), "sdk-ms/20")
	if cli == "" {
		fmt.Println("  helm CLI: skipped (PLINTH_HELM_CLI unset; scripts/bench-helm.sh builds it)")
		return
	}
	fmt.Printf("  helm CLI %s: %v\n  ratio CLI/SDK: %.2f\n", cli, per(cliTime), float64(cliTime)/float64(sdk))
	b.ReportMetric(float64(per(cliTime).Milliseconds()), "cli-ms/20")
}
