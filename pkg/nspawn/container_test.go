package nspawn

import (
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
}
