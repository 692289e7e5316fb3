package kubeinstall

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Runner runs a host command; tests record or redirect them.
type Runner interface {
	Run(ctx context.Context, env []string, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands with os/exec; env adds to the agent's environment.
type ExecRunner struct{}

// Run runs name with args and returns its combined output; a failure carries the
// output's last lines, which is where kubeadm and systemctl say why.
func (ExecRunner) Run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tail(out.String(), 6))
	}
	return out.Bytes(), nil
}

// tail returns the last n non-empty lines of s, joined with " | ".
func tail(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Services manages the units Plinth installs (the etcd member).
type Services interface {
	// Active reports whether unit is active: started and ready.
	Active(ctx context.Context, unit string) (bool, error)
	// Running reports whether unit's processes run, ready or not yet: what a check
	// needs to know before it plans a start (a first etcd member that waits for its
	// peers runs, and restarting it would not help).
	Running(ctx context.Context, unit string) (bool, error)
	// Restart reloads unit files, enables unit and restarts it without waiting for
	// it to be ready (a first etcd member waits for its peers).
	Restart(ctx context.Context, unit string) error
}

// Systemd manages units with systemctl.
type Systemd struct {
	Run Runner
	// sliceDirs are where system.slice's units have their cgroups; nil for the host's
	// (see unitCgroupDirs).
	sliceDirs []string
}

// unitCgroupDirs are system.slice in systemd's own hierarchy: the name=systemd one
// of legacy and hybrid hosts (as on the labs' hosts), then the unified one (Debian
// 12's default). A host has one of them.
var unitCgroupDirs = []string{"/sys/fs/cgroup/systemd/system.slice", "/sys/fs/cgroup/system.slice"}

// Running implements Services. systemd keeps a service's processes in the unit's
// own cgroup, so one read answers without starting systemctl (13–15 ms of CPU a
// call, on every drift pass of a controller). A unit with no processes there, or
// outside system.slice, is asked of systemctl: Running is then Active. A unit being
// stopped runs until its processes exit; the next pass sees it stopped.
func (s Systemd) Running(ctx context.Context, unit string) (bool, error) {
	dirs := s.sliceDirs
	if dirs == nil {
		dirs = unitCgroupDirs
	}
	if !strings.ContainsAny(unit, "/\x00") && unit != "" && unit != "." && unit != ".." && cgroupPopulated(dirs, unit) {
		return true, nil
	}
	return s.Active(ctx, unit)
}

// cgroupPopulated reports whether unit's cgroup under the first of dirs that exists
// holds a process: cgroup v2 says so for the whole subtree in cgroup.events, v1
// lists the cgroup's own processes in cgroup.procs.
func cgroupPopulated(dirs []string, unit string) bool {
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		cg := filepath.Join(d, unit)
		if b, err := os.ReadFile(filepath.Join(cg, "cgroup.events")); err == nil {
			return bytes.Contains(b, []byte("populated 1\n"))
		}
		b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		return err == nil && len(bytes.TrimSpace(b)) > 0
	}
	return false
}

// Active implements Services.
func (s Systemd) Active(ctx context.Context, unit string) (bool, error) {
	out, err := s.Run.Run(ctx, nil, "systemctl", "is-active", unit)
	state := strings.TrimSpace(string(out))
	switch {
	case err == nil:
		return true, nil
	case state == "inactive" || state == "failed" || state == "activating" || state == "unknown":
		return false, nil
	}
	return false, fmt.Errorf("systemctl is-active %s: %w", unit, err)
}

// Restart implements Services.
func (s Systemd) Restart(ctx context.Context, unit string) error {
	for _, args := range [][]string{{"daemon-reload"}, {"enable", unit}, {"restart", "--no-block", unit}} {
		if _, err := s.Run.Run(ctx, nil, "systemctl", args...); err != nil {
			return err
		}
	}
	return nil
}
