package nspawn

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A booted host runs a container with its containerd and runc through the lab
// profile's runc wrapper (a plain rootfs holding one static program: no image
// registry is reachable here).
func TestHostRunsContainerThroughRuncWrapper(t *testing.T) {
	needRoot(t)
	l := newTestLab(t, "10.253.8")
	h := l.boot("h1", 11)
	src := filepath.Join(l.dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello from a container \" + os.Getenv(\"HOSTNAME\") + \"\\n\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(h.plainDir("/var/lib/containerd"), "plinth-test", "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(rootfs, "hello"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v: %s", err, out)
	}
	out := run(t, h, "ctr", "run", "--rm", "--runc-binary", RuncWrapperPath, "--env", "HOSTNAME=c1",
		"--rootfs", "/var/lib/containerd/plinth-test/rootfs", "plinth-test", "/hello")
	if !strings.Contains(out, "hello from a container c1") {
		t.Errorf("container output %q", out)
	}

	// the clamp itself: a bundle asking for a negative oom_score_adj, as kubelet's do
	bundle := filepath.Dir(rootfs)
	run(t, h, "sh", "-c", "cd /var/lib/containerd/plinth-test && runc spec")
	cfgPath := filepath.Join(bundle, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"], proc["args"], proc["oomScoreAdj"] = false, []string{"/hello"}, -500
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Exec(context.Background(), nil, "runc", "run", "--bundle", "/var/lib/containerd/plinth-test", "plinth-plain"); err != nil {
		t.Logf("plain runc with oomScoreAdj -500 (expected to fail here): %v", err)
	} else {
		t.Logf("plain runc with oomScoreAdj -500 ran: %s", out)
	}
	out = run(t, h, RuncWrapperPath, "run", "--bundle", "/var/lib/containerd/plinth-test", "plinth-wrapped")
	if !strings.Contains(out, "hello from a container") {
		t.Errorf("wrapped runc output %q", out)
	}
	if b, _ := os.ReadFile(cfgPath); !strings.Contains(string(b), `"oomScoreAdj":0`) {
		t.Errorf("config not clamped: %s", b)
	}
}
