package kubeinstall

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// systemctlDouble answers `systemctl is-active` with state and counts the calls.
type systemctlDouble struct {
	mu    sync.Mutex
	state string
	calls []string
}

func (r *systemctlDouble) Run(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name+" "+strings.Join(args, " "))
	if r.state == "active" {
		return []byte("active\n"), nil
	}
	return []byte(r.state + "\n"), errors.New("exit status 3")
}

func (r *systemctlDouble) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// TestSystemdRunningReadsTheUnitsCgroup: a unit with processes in its cgroup is
// running without a systemctl process; one without (or without a cgroup, or named
// outside system.slice) is asked of systemctl, so Running never says "not running"
// from a file alone.
func TestSystemdRunningReadsTheUnitsCgroup(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	v1 := filepath.Join(root, "systemd", "system.slice")
	v2 := filepath.Join(root, "system.slice")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(v1, "etcd.service", "cgroup.procs"), "4242\n")
	write(filepath.Join(v1, "idle.service", "cgroup.procs"), "")
	write(filepath.Join(v2, "etcd.service", "cgroup.events"), "populated 1\nfrozen 0\n")
	write(filepath.Join(v2, "idle.service", "cgroup.events"), "populated 0\nfrozen 0\n")
	write(filepath.Join(v2, "idle.service", "cgroup.procs"), "4242\n") // events win in v2

	for _, tc := range []struct {
		name, layout, unit, state string
		want                      bool
		systemctl                 bool
	}{
		{"v1 with a process", "v1", "etcd.service", "inactive", true, false},
		{"v1 empty, systemd says inactive", "v1", "idle.service", "inactive", false, true},
		{"v1 empty, systemd says active (RemainAfterExit)", "v1", "idle.service", "active", true, true},
		{"v1 no cgroup", "v1", "keepalived.service", "failed", false, true},
		{"v2 populated", "v2", "etcd.service", "inactive", true, false},
		{"v2 not populated", "v2", "idle.service", "inactive", false, true},
		{"v2 no cgroup", "v2", "keepalived.service", "activating", false, true},
		{"no hierarchy", "none", "etcd.service", "active", true, true},
		{"a path is not a unit", "v1", "../system.slice/etcd.service", "inactive", false, true},
		{"a parent is not a unit", "v1", "..", "inactive", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := map[string][]string{
				"v1":   {v1, filepath.Join(root, "missing")},
				"v2":   {filepath.Join(root, "missing"), v2},
				"none": {filepath.Join(root, "missing")},
			}[tc.layout]
			r := &systemctlDouble{state: tc.state}
			got, err := Systemd{Run: r, sliceDirs: dirs}.Running(ctx, tc.unit)
			if err != nil || got != tc.want {
				t.Fatalf("Running(%s) = %v, %v; want %v", tc.unit, got, err, tc.want)
			}
			if (r.n() > 0) != tc.systemctl {
				t.Fatalf("systemctl calls %q; want a call: %v", r.calls, tc.systemctl)
			}
		})
	}
}

// TestSystemdRunningOnRealCgroups puts a real process into a unit-shaped cgroup in
// each hierarchy systemd may track services in (name=systemd, cgroup v2), where
// this machine has them mounted, and checks Running against what the kernel says as
// the process starts and exits.
func TestSystemdRunningOnRealCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	for _, h := range []struct{ name, mount string }{
		{"name=systemd", "/sys/fs/cgroup/systemd"},
		{"cgroup v2", "/sys/fs/cgroup/unified"},
		{"cgroup v2 at the root", "/sys/fs/cgroup"},
	} {
		t.Run(h.name, func(t *testing.T) {
			if !isCgroupMount(h.mount, h.name != "name=systemd") {
				t.Skipf("%s is not mounted at %s here", h.name, h.mount)
			}
			top := filepath.Join(h.mount, fmt.Sprintf("plinth-test-%d", os.Getpid()))
			slice := filepath.Join(top, "system.slice")
			unit := filepath.Join(slice, "plinth-test.service")
			sub := filepath.Join(unit, "payload") // v2: a process below the unit's own cgroup
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Skipf("cannot make a cgroup under %s: %v", h.mount, err)
			}
			t.Cleanup(func() {
				for _, d := range []string{sub, unit, slice, top} {
					_ = os.Remove(d)
				}
			})
			ctx := context.Background()
			r := &systemctlDouble{state: "inactive"}
			sd := Systemd{Run: r, sliceDirs: []string{slice}}
			if ok, err := sd.Running(ctx, "plinth-test.service"); ok || err != nil {
				t.Fatalf("an empty cgroup: Running = %v, %v", ok, err)
			}
			into := unit
			if h.name != "name=systemd" {
				into = sub
			}
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
			if err := os.WriteFile(filepath.Join(into, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				t.Fatalf("move the process into %s: %v", into, err)
			}
			calls := r.n()
			if ok, err := sd.Running(ctx, "plinth-test.service"); !ok || err != nil {
				t.Fatalf("a cgroup with a process: Running = %v, %v", ok, err)
			}
			if r.n() != calls {
				t.Fatalf("a running unit still asked systemctl: %q", r.calls)
			}
			_ = cmd.Process.Kill()
			<-done
			deadline := time.Now().Add(5 * time.Second)
			for {
				ok, err := sd.Running(ctx, "plinth-test.service")
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the cgroup still counts as running 5 s after its only process exited")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// isCgroupMount reports whether dir is a cgroup (v2 when want2) mount point.
func isCgroupMount(dir string, want2 bool) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != dir {
			continue
		}
		if want2 {
			return f[2] == "cgroup2"
		}
		return f[2] == "cgroup" && strings.Contains(l, "name=systemd")
	}
	return false
}
