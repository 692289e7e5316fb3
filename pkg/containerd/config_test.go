package containerd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// fakeHost is a containerd.config driver over temp files with a counted restart and
// a CRI that answers when up is true.
type fakeHost struct {
	d        *ConfigDriver
	paths    Paths
	restarts int
	up       bool
}

func newFakeHost(t *testing.T) *fakeHost {
	dir := t.TempDir()
	h := &fakeHost{paths: Paths{
		ConfigPath: filepath.Join(dir, "etc", "config.toml"),
		CertsDir:   filepath.Join(dir, "etc", "certs.d"),
		Root:       filepath.Join(dir, "root"),
		State:      filepath.Join(dir, "state"),
		Address:    filepath.Join(dir, "containerd.sock"),
	}}
	h.d = NewConfigDriver(filepath.Join(dir, "agent"), WithPaths(h.paths), WithRestart(func(context.Context) error {
		h.restarts++
		h.up = true
		return nil
	}), WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))))
	h.d.ping = func(context.Context) error {
		if !h.up {
			return errors.New("connection refused")
		}
		return nil
	}
	return h
}

func (h *fakeHost) run(t *testing.T, in containerdspec.ConfigInputs) []string {
	t.Helper()
	res := driver.Run(context.Background(), h.d, mustJSON(t, in))
	if !res.OK() {
		t.Fatalf("run: %s", res.Error)
	}
	return res.Changes
}

func baseInputs() containerdspec.ConfigInputs {
	return containerdspec.ConfigInputs{SandboxImage: "registry.k8s.io/pause:3.10.2", CgroupDriver: "systemd", Snapshotter: "overlayfs",
		Mirrors: []containerdspec.Mirror{
			{Registry: "docker.io", Endpoints: []string{"https://m1.local"}},
			{Registry: "registry.k8s.io", Endpoints: []string{"https://m2.local"}},
		}}
}

func TestConfigRestartsOnlyOnChange(t *testing.T) {
	h := newFakeHost(t)
	if got := h.run(t, baseInputs()); len(got) != 4 || h.restarts != 1 {
		t.Fatalf("first run: changes %q, restarts %d; want 3 files and 1 restart", got, h.restarts)
	}
	if got := h.run(t, baseInputs()); len(got) != 0 || h.restarts != 1 {
		t.Fatalf("second run: changes %q, restarts %d; want none", got, h.restarts)
	}
	in := baseInputs()
	in.SandboxImage = "registry.local/pause:3.10.2"
	if got := h.run(t, in); len(got) != 2 || !strings.HasPrefix(got[0], "update "+h.paths.ConfigPath) || h.restarts != 2 {
		t.Fatalf("new sandbox image: changes %q, restarts %d", got, h.restarts)
	}
}

func TestConfigRemovesOnlyOwnHostsFiles(t *testing.T) {
	h := newFakeHost(t)
	h.run(t, baseInputs())
	// An operator's own registry config, and a CA next to one of ours.
	theirs := filepath.Join(h.paths.CertsDir, "quay.io", "hosts.toml")
	ca := filepath.Join(h.paths.CertsDir, "docker.io", "ca.crt")
	for _, p := range []string{theirs, ca} {
		if err := writeFile(p, []byte("server = \"https://quay.io\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := baseInputs()
	in.Mirrors = nil
	got := h.run(t, in)
	if len(got) != 3 || h.restarts != 2 {
		t.Fatalf("changes %q, restarts %d; want two removals and a restart", got, h.restarts)
	}
	for _, p := range []string{theirs, ca} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.paths.CertsDir, "registry.k8s.io")); !os.IsNotExist(err) {
		t.Errorf("empty registry dir left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.paths.CertsDir, "docker.io", "hosts.toml")); !os.IsNotExist(err) {
		t.Errorf("our docker.io hosts.toml left behind: %v", err)
	}
}

// A crash after the files were written but before the restart must still restart.
func TestConfigRestartSurvivesCrash(t *testing.T) {
	h := newFakeHost(t)
	h.up = true
	changes, err := h.d.Diff(context.Background(), mustJSON(t, baseInputs()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes[:len(changes)-1] { // everything but the restart
		if err := c.Apply(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got := h.run(t, baseInputs())
	if len(got) != 1 || !strings.Contains(got[0], "restart still pending") || h.restarts != 1 {
		t.Fatalf("after crash: changes %q, restarts %d; want the pending restart", got, h.restarts)
	}
	if got := h.run(t, baseInputs()); len(got) != 0 {
		t.Fatalf("pending restart not cleared: %q", got)
	}
}

func TestConfigStartsSilentDaemon(t *testing.T) {
	h := newFakeHost(t)
	h.run(t, baseInputs())
	h.up = false // crashed, or stopped by hand
	drift, err := driver.Check(context.Background(), h.d, mustJSON(t, baseInputs()))
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "not answering") {
		t.Fatalf("drift = %q, %v; want a restart", drift, err)
	}
	h.run(t, baseInputs())
	if h.restarts != 2 || !h.up {
		t.Fatalf("restarts = %d, up = %v", h.restarts, h.up)
	}
}

func TestConfigRestartFailureIsRetryable(t *testing.T) {
	h := newFakeHost(t)
	h.d.restart = func(context.Context) error { return errors.New("unit containerd.service not found") }
	res := driver.Run(context.Background(), h.d, mustJSON(t, baseInputs()))
	if res.OK() || !res.Retryable || !strings.Contains(res.Error, "containerd.service not found") {
		t.Fatalf("result = %+v", res)
	}
	if ok, _ := h.d.pending(); !ok {
		t.Fatal("files written without a pending restart marker")
	}
}

func TestConfigInvalidInputsArePermanent(t *testing.T) {
	h := newFakeHost(t)
	for name, in := range map[string]containerdspec.ConfigInputs{
		"no sandbox image": {CgroupDriver: "systemd", Snapshotter: "overlayfs"},
		"bad cgroup":       {SandboxImage: "p:1", CgroupDriver: "v2", Snapshotter: "overlayfs"},
		"escaping mirror":  {SandboxImage: "p:1", CgroupDriver: "systemd", Snapshotter: "overlayfs", Mirrors: []containerdspec.Mirror{{Registry: "..", Endpoints: []string{"https://m"}}}},
		"no endpoints":     {SandboxImage: "p:1", CgroupDriver: "systemd", Snapshotter: "overlayfs", Mirrors: []containerdspec.Mirror{{Registry: "docker.io"}}},
	} {
		if _, err := h.d.Diff(context.Background(), mustJSON(t, in)); !driver.IsPermanent(err) {
			t.Errorf("%s: err = %v, want permanent", name, err)
		}
	}
	if _, err := NewConfigDriver("").Diff(context.Background(), mustJSON(t, baseInputs())); !driver.IsPermanent(err) {
		t.Errorf("no state dir: err = %v, want permanent", err)
	}
}
