package kubeinstall

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
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
	// Active reports whether unit is running.
	Active(ctx context.Context, unit string) (bool, error)
	// Restart reloads unit files, enables unit and restarts it without waiting for
	// it to be ready (a first etcd member waits for its peers).
	Restart(ctx context.Context, unit string) error
}

// Systemd manages units with systemctl.
type Systemd struct{ Run Runner }

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
