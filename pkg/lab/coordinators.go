package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Lab is one lab site: its directory, binaries and everything it started.
type Lab struct {
	Dir string
	// Bin holds plinth-coordinator (and runc-lab); agents come from the bundle.
	Bin string
	// Identity is the admin identity file written by the first coordinator.
	Identity string
	// Profile is the coordinators' timing profile ("fast" for labs and tests).
	Profile string
	// Detach keeps processes running after the process that started them exits.
	Detach bool
	// BundleDir is the unpacked site bundle every booted host installs from.
	BundleDir string
	// Rootfs is the cached root filesystem hosts boot from (nspawn.BuildRootfs).
	Rootfs string
	// RuncWrapper is a built cmd/runc-lab for the lab profile, or empty.
	RuncWrapper string

	mu       sync.Mutex
	cleanups []func(context.Context)
	coords   []*Coordinator
	hosts    []*Host
	bridge   string
	guard    string // nftables table keeping lab traffic on the bridge
	gateway  string // the bridge's address
	prefix   string
	owner    *owner // nil: the lab may outlive its maker
}

// New prepares a lab in dir using the binaries in bin. prefix names every network
// namespace and link the lab creates, so several labs can coexist.
func New(dir, bin, prefix string) *Lab {
	l := &Lab{Dir: dir, Bin: bin, Identity: filepath.Join(dir, "admin.json"), Profile: "fast", prefix: prefix}
	// Booted hosts run containers through the lab profile's runc wrapper (make build
	// puts it beside the other binaries).
	if p := filepath.Join(bin, "runc-lab"); fileExists(p) {
		l.RuncWrapper = p
	}
	return l
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Prefix starts the name of every network namespace, link and nftables table the
// lab makes.
func (l *Lab) Prefix() string { return l.prefix }

// Coordinator is one coordinator of the lab: a process the lab started (loopback
// clusters for tests and benchmarks), or the plinth-coordinator unit of a booted
// host (Host set).
type Coordinator struct {
	Name    string
	IP      string
	Port    int // API port; join, raft and gossip use the next three
	Witness bool
	NS      string
	DataDir string
	Proc    *Proc
	Host    *Host
	lab     *Lab
}

// Kill sends SIGKILL to the coordinator. A booted host's systemd restarts it.
func (c *Coordinator) Kill(ctx context.Context) error {
	if c.Host != nil {
		_, err := c.lab.Systemctl(ctx, c.Host, "kill", "--signal=KILL", "plinth-coordinator")
		return err
	}
	if c.Proc != nil {
		c.Proc.Kill()
	}
	return nil
}

func (c *Coordinator) alive() bool {
	if c.Host != nil {
		return c.Host.Machine != nil && c.Host.Machine.Running()
	}
	return c.Proc != nil && c.Proc.Alive()
}

// APIAddr is the mTLS API address.
func (c *Coordinator) APIAddr() string { return net.JoinHostPort(c.IP, strconv.Itoa(c.Port)) }

// JoinAddr is the enrolment address.
func (c *Coordinator) JoinAddr() string { return net.JoinHostPort(c.IP, strconv.Itoa(c.Port+1)) }

func (c *Coordinator) addrArgs() []string {
	p := func(n int) string { return net.JoinHostPort(c.IP, strconv.Itoa(c.Port+n)) }
	return []string{"--name", c.Name, "--data-dir", c.DataDir, "--api-addr", p(0), "--join-addr", p(1), "--raft-addr", p(2), "--gossip-addr", p(3)}
}

func (l *Lab) coordinatorBin() string { return filepath.Join(l.Bin, "plinth-coordinator") }

// InitCoordinator initialises and starts the first coordinator.
func (l *Lab) InitCoordinator(ctx context.Context, name, ns, ip string, port int, site string) (*Coordinator, error) {
	c := &Coordinator{Name: name, IP: ip, Port: port, NS: ns, DataDir: filepath.Join(l.Dir, "coordinators", name)}
	args := append([]string{"init", "--site", site, "--profile", l.Profile, "--admin-identity", l.Identity}, c.addrArgs()...)
	if out, err := run(ctx, l.coordinatorBin(), args...); err != nil {
		return nil, fmt.Errorf("lab: init %s: %w: %s", name, err, out)
	}
	l.mu.Lock()
	l.coords = append(l.coords, c)
	l.mu.Unlock()
	if err := l.StartCoordinator(c); err != nil {
		return nil, err
	}
	return c, l.WaitReady(ctx, c, 30*time.Second)
}

// JoinCoordinator enrols and starts another controller or a witness.
func (l *Lab) JoinCoordinator(ctx context.Context, name, ns, ip string, port int, witness bool) (*Coordinator, error) {
	role := "coordinator"
	if witness {
		role = "witness"
	}
	tok, err := l.CLI(ctx, "node", "enroll", name, "--role", role, "--ttl", "10m")
	if err != nil {
		return nil, err
	}
	c := &Coordinator{Name: name, IP: ip, Port: port, NS: ns, Witness: witness, DataDir: filepath.Join(l.Dir, "coordinators", name)}
	var joins []string
	for _, o := range l.Coordinators() {
		joins = append(joins, o.JoinAddr())
	}
	args := append([]string{"join", "--profile", l.Profile, "--token", strings.TrimSpace(tok), "--coordinator", strings.Join(joins, ",")}, c.addrArgs()...)
	if witness {
		args = append(args, "--witness")
	}
	if out, err := l.inNS(ctx, ns, l.coordinatorBin(), args...); err != nil {
		return nil, fmt.Errorf("lab: join %s: %w: %s", name, err, out)
	}
	l.mu.Lock()
	l.coords = append(l.coords, c)
	l.mu.Unlock()
	if err := l.StartCoordinator(c); err != nil {
		return nil, err
	}
	if err := l.WaitReady(ctx, c, 30*time.Second); err != nil {
		return nil, err
	}
	return c, l.writeIdentityAddrs()
}

func (l *Lab) inNS(ctx context.Context, ns, bin string, args ...string) (string, error) {
	if ns == "" {
		return run(ctx, bin, args...)
	}
	return run(ctx, "ip", append([]string{"netns", "exec", ns, bin}, args...)...)
}

// StartCoordinator (re)starts a coordinator's serve process (its unit on a booted
// host).
func (l *Lab) StartCoordinator(c *Coordinator) error {
	if c.Host != nil {
		_, err := l.Systemctl(context.Background(), c.Host, "start", "plinth-coordinator")
		return err
	}
	p, err := startProc(l.Detach, "coordinator "+c.Name, filepath.Join(l.Dir, "logs", "coordinator-"+c.Name+".log"), c.NS,
		l.coordinatorBin(), "serve", "--data-dir", c.DataDir, "--log-level", "debug")
	if err != nil {
		return err
	}
	c.Proc = p
	return l.save()
}

// Coordinators returns the lab's coordinators.
func (l *Lab) Coordinators() []*Coordinator {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Coordinator(nil), l.coords...)
}

// Coordinator returns one coordinator by name.
func (l *Lab) Coordinator(name string) *Coordinator {
	for _, c := range l.Coordinators() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// writeIdentityAddrs points the admin identity at every coordinator, for failover.
func (l *Lab) writeIdentityAddrs() error {
	f, err := pki.ReadIdentityFile(l.Identity)
	if err != nil {
		return err
	}
	f.Coordinators = nil
	for _, c := range l.Coordinators() {
		f.Coordinators = append(f.Coordinators, c.APIAddr())
	}
	return f.Write(l.Identity)
}

// CLI runs plinth-coordinator with the lab's admin identity and returns stdout.
func (l *Lab) CLI(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, l.coordinatorBin(), append([]string{"--identity", l.Identity}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("plinth-coordinator %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Client is an admin API client for the lab.
func (l *Lab) Client() (*client.Client, error) { return client.FromIdentityFile(l.Identity) }

// NodeClient is an admin client that talks to one coordinator only.
func (l *Lab) NodeClient(c *Coordinator) (*client.Client, error) {
	f, err := pki.ReadIdentityFile(l.Identity)
	if err != nil {
		return nil, err
	}
	tc, err := f.Bundle().ClientTLS("")
	if err != nil {
		return nil, err
	}
	return client.New([]string{c.APIAddr()}, tc), nil
}

// WaitReady waits until c answers and knows a leader.
func (l *Lab) WaitReady(ctx context.Context, c *Coordinator, timeout time.Duration) error {
	cl, err := l.NodeClient(c)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if c.Proc != nil && !c.Proc.Alive() {
			return fmt.Errorf("lab: coordinator %s exited: %v (log %s)", c.Name, c.Proc.Err(), c.Proc.LogPath)
		}
		var st wire.Status
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cl.Do(rctx, "GET", "/v1/status", nil, &st)
		cancel()
		if err == nil && st.Leader != "" {
			return nil
		}
		last = err
		if err == nil {
			last = errors.New("no leader yet")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("lab: coordinator %s not ready after %s: %v", c.Name, timeout, last)
}

// Leader asks the live coordinators who leads.
func (l *Lab) Leader(ctx context.Context) (string, error) {
	for _, c := range l.Coordinators() {
		if !c.alive() {
			continue
		}
		cl, err := l.NodeClient(c)
		if err != nil {
			return "", err
		}
		var st wire.Status
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cl.Do(rctx, "GET", "/v1/status", nil, &st)
		cancel()
		if err == nil && st.Leader != "" {
			return st.Leader, nil
		}
	}
	return "", errors.New("lab: no live coordinator knows a leader")
}

// stopCoordinators kills every coordinator process.
func (l *Lab) stopCoordinators() {
	for _, c := range l.Coordinators() {
		if c.Proc != nil {
			c.Proc.Stop(3 * time.Second)
		}
	}
}

// RemoveDir deletes the lab directory (after Down).
func (l *Lab) RemoveDir() error { return os.RemoveAll(l.Dir) }
