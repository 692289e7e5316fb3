package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Host is one lab host: a network namespace with a management link on the lab
// bridge, a spare "data0" veth pair for host.network to configure, and an agent.
type Host struct {
	Name     string
	NS       string
	IP       string // management address
	StateDir string
	Agent    *Proc
	// AgentArgs are extra `plinth-agent run` flags from the host's services.
	AgentArgs []string
	hostLink  string // root-namespace end of the management veth
}

// Network sets up the lab bridge in the root namespace with gateway gw (CIDR, e.g.
// 10.211.7.1/24). Hosts get addresses in the same subnet.
func (l *Lab) Network(ctx context.Context, gw string) error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("lab: needs iproute2 (`ip`): %w", err)
	}
	br := l.prefix + "br"
	if len(br) > 15 {
		return fmt.Errorf("lab: prefix %q too long for link names", l.prefix)
	}
	l.mu.Lock()
	l.bridge = br
	l.mu.Unlock()
	for _, args := range [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", gw, "dev", br},
		{"link", "set", br, "up"},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return fmt.Errorf("lab: bridge: %w", err)
		}
	}
	l.mu.Lock()
	l.bridge = br
	l.mu.Unlock()
	return l.save()
}

// AddHost creates a host namespace with management address ip (CIDR) on the bridge.
func (l *Lab) AddHost(ctx context.Context, name, cidr string) (*Host, error) {
	ipAddr, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("lab: host %s: %w", name, err)
	}
	l.mu.Lock()
	idx := len(l.hosts)
	br := l.bridge
	l.mu.Unlock()
	h := &Host{
		Name: name, NS: l.prefix + "-" + name, IP: ipAddr.String(),
		StateDir: filepath.Join(l.Dir, "hosts", name), hostLink: fmt.Sprintf("%sh%d", l.prefix, idx),
	}
	l.mu.Lock()
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"netns", "add", h.NS},
		{"-n", h.NS, "link", "set", "lo", "up"},
		{"link", "add", h.hostLink, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"link", "set", h.hostLink, "master", br, "up"},
		{"-n", h.NS, "addr", "add", cidr, "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		// A spare pair inside the host for the host.network step to manage.
		{"-n", h.NS, "link", "add", "data0", "type", "veth", "peer", "name", "data0p"},
		{"-n", h.NS, "link", "set", "data0p", "up"},
	}
	for _, args := range steps {
		if _, err := run(ctx, "ip", args...); err != nil {
			return nil, fmt.Errorf("lab: host %s: %w", name, err)
		}
	}
	return h, os.MkdirAll(h.StateDir, 0o700)
}

// Hosts returns the lab's hosts.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Host(nil), l.hosts...)
}

// Host returns one host by name.
func (l *Lab) Host(name string) *Host {
	for _, h := range l.Hosts() {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// EnrolAgent creates a token for h and runs `plinth-agent join` inside its namespace.
func (l *Lab) EnrolAgent(ctx context.Context, h *Host, role string) error {
	tok, err := l.CLI(ctx, "node", "enroll", h.Name, "--role", role, "--ttl", "10m")
	if err != nil {
		return err
	}
	var joins []string
	for _, c := range l.Coordinators() {
		if !c.Witness {
			joins = append(joins, c.JoinAddr())
		}
	}
	out, err := l.inNS(ctx, h.NS, l.agentBin(), "join", "--name", h.Name, "--state-dir", h.StateDir,
		"--coordinator", strings.Join(joins, ","), "--token", strings.TrimSpace(tok))
	if err != nil {
		return fmt.Errorf("lab: enrol %s: %w: %s", h.Name, err, out)
	}
	return nil
}

// StartAgent (re)starts h's agent inside its namespace.
func (l *Lab) StartAgent(h *Host) error {
	args := append([]string{"run", "--state-dir", h.StateDir, "--gossip-addr", net.JoinHostPort(h.IP, "7450"),
		"--gossip-profile", "fast", "--facts-interval", "5s", "--log-level", "debug"}, h.AgentArgs...)
	p, err := startProc(l.Detach, "agent "+h.Name, filepath.Join(l.Dir, "logs", "agent-"+h.Name+".log"), h.NS, l.agentBin(), args...)
	if err != nil {
		return err
	}
	h.Agent = p
	return l.save()
}

// Exec runs a command inside h's namespace.
func (l *Lab) Exec(ctx context.Context, h *Host, name string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Partition drops all traffic in and out of h's management link (nftables inside
// its namespace) until Heal.
func (l *Lab) Partition(ctx context.Context, h *Host) error {
	script := `table inet plinthlab {
	chain in {
		type filter hook input priority 0;
		iifname "eth0" drop
	}
	chain out {
		type filter hook output priority 0;
		oifname "eth0" drop
	}
}
`
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lab: partition %s: %w: %s", h.Name, err, out)
	}
	return nil
}

// Heal removes a Partition.
func (l *Lab) Heal(ctx context.Context, h *Host) error {
	_, err := run(ctx, "ip", "netns", "exec", h.NS, "nft", "delete", "table", "inet", "plinthlab")
	return err
}

// Down stops every process and removes every namespace and link the lab made.
// It is safe to call more than once and after a partial Up.
func (l *Lab) Down(ctx context.Context) {
	for _, h := range l.Hosts() {
		if h.Agent != nil {
			h.Agent.Stop(3 * time.Second)
		}
	}
	l.stopServices(ctx)
	l.stopCoordinators()
	for _, h := range l.Hosts() {
		_, _ = run(ctx, "ip", "netns", "del", h.NS)
		_, _ = run(ctx, "ip", "link", "del", h.hostLink)
	}
	l.mu.Lock()
	br := l.bridge
	l.bridge = ""
	l.mu.Unlock()
	if br != "" {
		_, _ = run(ctx, "ip", "link", "del", br)
	}
}
