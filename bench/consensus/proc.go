package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one etcd member process. (Plinth's coordinators are run by pkg/lab, which
// has the same kill semantics: SIGKILL to the process group.)
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(logPath, bin string, args ...string) (*proc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group so a kill reaches only it; SIGKILL if this benchmark dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill is kill -9 and waits for the exit.
func (p *proc) kill() {
	if p == nil || !p.alive() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop asks politely (SIGTERM), then kills.
func (p *proc) stop() {
	if p == nil || !p.alive() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		p.kill()
	}
}

// freeBase finds n consecutive free TCP and UDP ports on 127.0.0.1 (the Plinth
// coordinators also gossip over UDP), like test/e2e does.
func freeBase(n int) (int, error) {
	for range 500 {
		// Below the kernel's ephemeral range (32768+): a restarted process must get its
		// port back, and an outgoing connection may hold any free ephemeral port.
		base := 20000 + rand.IntN(12000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			addr := fmt.Sprintf("127.0.0.1:%d", p)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				ok = false
				break
			}
			l.Close()
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d free consecutive ports on 127.0.0.1", n)
}
