// Package lab runs a whole Plinth site on one machine: coordinators as real processes,
// hosts as network namespaces joined by veth pairs to a bridge, one real agent per
// host inside its namespace. It is both the README's demo and the harness for
// multi-process tests (kill -9, partitions, restarts).
//
// It owns every process, namespace and file it creates and removes them all in Down.
// It must never touch network namespaces, links or processes it did not create.
package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Proc is one process the lab started.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	err     error
}

// startProc starts bin with args, in network namespace ns when set, logging to logPath.
func startProc(detach bool, name, logPath, ns, bin string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, so Kill reaches ip-netns-exec's child too; unless detached
	// (the demo), die with the process that started the lab.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("lab: start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Done is closed when the process exits.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the process group and waits for the exit.
func (p *Proc) Kill() {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, and SIGKILL after timeout.
func (p *Proc) Stop(timeout time.Duration) {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
	}
}

// Err is the exit error once the process ended.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// run runs a command to completion and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("%s %v: %s", name, args, out)
		}
		return string(out), fmt.Errorf("%s %v: %w", name, args, err)
	}
	return string(out), nil
}
