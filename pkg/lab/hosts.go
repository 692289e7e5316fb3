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
	"time"

	"github.com/plinth-dev/plinth/pkg/nspawn"
)

// Host is one lab host: a Debian rootfs booted with systemd-nspawn (systemd as PID 1)
// in its own network namespace, with its management link eth0 on the lab bridge, a
// spare veth pair data0/data0p inside it, and data1, a second link to the lab bridge,
// for host.network to configure (the lab site puts its cluster-host network there).
// Plinth reaches it only as it would a real machine: the install script, then its
// own systemd units.
type Host struct {
	Name    string
	NS      string // ip netns name
	IP      string // management address
	Machine *nspawn.Host
	link    string // the machine's end of eth0's veth
}

// Paths inside every lab host where the lab's shared files appear (read-only).
const (
	// BundleMount holds the site bundle the install script installs from.
	BundleMount = "/mnt/plinth-bundle"
	// ShareMount holds files the lab hands every host (agent.yaml).
	ShareMount = "/mnt/plinth-lab"
	// InstallScript is the install script inside the bundle.
	installScript = BundleMount + "/install.sh"
)

// Network sets up the lab bridge in the root namespace with gateway gw (CIDR, e.g.
// 10.211.7.1/24), and a forward guard so nothing from the bridge is routed anywhere
// else. Hosts get addresses in the same subnet.
func (l *Lab) Network(ctx context.Context, gw string) error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("lab: needs iproute2 (`ip`): %w", err)
	}
	br := l.prefix + "br"
	if len(br) > 15 {
		return fmt.Errorf("lab: prefix %q too long for link names", l.prefix)
	}
	l.mu.Lock()
	l.bridge, l.guard = br, l.prefix+"guard"
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return err
	}
	if err := nspawn.CreateBridge(ctx, br, gw); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	guard := fmt.Sprintf(`table inet %s {
	chain forward {
		type filter hook forward priority 0; policy accept;
		iifname "%s" oifname != "%s" drop
		oifname "%s" iifname != "%s" drop
	}
}
`, l.guard, br, br, br, br)
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(guard)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lab: forward guard: %w: %s", err, out)
	}
	return nil
}

// AddHost creates a host's namespace with management address cidr on the bridge and
// boots it from the lab's rootfs, with the bundle and the lab's share mounted.
func (l *Lab) AddHost(ctx context.Context, name, cidr string, etcHosts []string) (*Host, error) {
	ipAddr, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("lab: host %s: %w", name, err)
	}
	l.mu.Lock()
	idx := len(l.hosts)
	br := l.bridge
	l.mu.Unlock()
	h := &Host{Name: name, NS: l.prefix + "-" + name, IP: ipAddr.String(), link: fmt.Sprintf("%sh%d", l.prefix, idx)}
	l.mu.Lock()
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return nil, err
	}
	// The default route points at the bridge, as a real host's points at its router:
	// Service addresses (kube-proxy's DNAT) need a route to exist. The forward guard
	// keeps anything from leaving the bridge.
	ns := nspawn.NetNS{Name: h.NS, Bridge: br, HostLink: h.link, Addr: cidr, Gateway: l.gateway}
	if err := nspawn.CreateNetNS(ctx, ns); err != nil {
		return nil, fmt.Errorf("lab: host %s: %w", name, err)
	}
	// host.network configures data0, whose peer stays up inside the host so it has
	// carrier (OVS takes data0p), and puts data1 into a bridge it creates: data1's
	// peer is on the lab bridge, so that network joins the hosts (cluster-host).
	for _, args := range [][]string{
		{"-n", h.NS, "link", "add", "data0", "type", "veth", "peer", "name", "data0p"},
		{"-n", h.NS, "link", "set", "data0p", "up"},
		{"link", "add", h.link + "c", "type", "veth", "peer", "name", "data1", "netns", h.NS},
		{"link", "set", h.link + "c", "master", br, "up"},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return nil, fmt.Errorf("lab: host %s: spare links: %w", name, err)
		}
	}
	gw := ""
	if l.gateway != "" {
		gw = l.gateway
	}
	cfg := nspawn.HostConfig{
		Name: name, MachineDir: filepath.Join(l.Dir, "hosts", name), Rootfs: l.Rootfs, NetNS: ns.Path(),
		Hosts: etcHosts, Profile: nspawn.LabProfile(), RuncWrapper: l.RuncWrapper, CgroupGroup: l.prefix,
		Binds: []nspawn.Bind{
			{Source: l.BundleDir, Target: BundleMount, ReadOnly: true},
			{Source: l.shareDir(), Target: ShareMount, ReadOnly: true},
		},
	}
	if gw != "" {
		cfg.Nameservers = []string{gw}
	}
	m, err := nspawn.Boot(ctx, cfg)
	if m != nil {
		h.Machine = m
		if serr := l.save(); serr != nil && err == nil {
			err = serr
		}
	}
	if err != nil {
		return h, fmt.Errorf("lab: boot host %s: %w (console: %s)", name, err, filepath.Join(cfg.MachineDir, "console.log"))
	}
	return h, nil
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

// Exec runs a command inside h (every namespace of its PID 1, its cgroups) and
// returns its standard output; a failure carries its standard error.
func (l *Lab) Exec(ctx context.Context, h *Host, name string, args ...string) (string, error) {
	if h.Machine == nil {
		return "", fmt.Errorf("lab: host %s is not booted", h.Name)
	}
	out, err := h.Machine.Exec(ctx, nil, append([]string{name}, args...)...)
	return string(out), err
}

// Systemctl runs systemctl inside h.
func (l *Lab) Systemctl(ctx context.Context, h *Host, args ...string) (string, error) {
	return l.Exec(ctx, h, "systemctl", args...)
}

// KillAgent kills h's agent with SIGKILL and keeps it stopped (systemd would restart
// it), as a host whose agent crashed for good; StartAgent brings it back.
func (l *Lab) KillAgent(ctx context.Context, h *Host) error {
	if _, err := l.Systemctl(ctx, h, "kill", "--signal=KILL", "plinth-agent"); err != nil {
		return err
	}
	_, err := l.Systemctl(ctx, h, "stop", "plinth-agent")
	return err
}

// StartAgent (re)starts h's agent unit.
func (l *Lab) StartAgent(ctx context.Context, h *Host) error {
	_, err := l.Systemctl(ctx, h, "start", "plinth-agent")
	return err
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

// Down powers off and removes every host, then every namespace, link and process the
// lab made. It is safe to call more than once and after a partial Up.
func (l *Lab) Down(ctx context.Context) {
	var errs []error
	for _, h := range l.Hosts() {
		if h.Machine != nil {
			if err := removeMachine(ctx, h.Machine); err != nil {
				errs = append(errs, err)
			}
		}
		deleteHostLinks(ctx, h.NS, h.link)
	}
	l.stopCoordinators()
	l.mu.Lock()
	br, guard := l.bridge, l.guard
	l.bridge, l.guard = "", ""
	l.mu.Unlock()
	removeNetwork(ctx, br, guard)
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "lab: down: %v\n", errors.Join(errs...))
	}
}

// deleteHostLinks removes a host's namespace and both of its links on the lab bridge:
// the kernel frees a deleted namespace's veths only later, asynchronously.
func deleteHostLinks(ctx context.Context, ns, link string) {
	_ = nspawn.DeleteNetNS(ctx, nspawn.NetNS{Name: ns, HostLink: link})
	_ = nspawn.DeleteLink(ctx, link+"c")
}

// removeMachine cuts a host's power and deletes it: its disk is thrown away, so a
// clean shutdown (tens of seconds with Ceph and containerd) would buy nothing.
func removeMachine(ctx context.Context, m *nspawn.Host) error {
	if err := m.PowerLoss(); err != nil {
		return err
	}
	return m.Remove(ctx)
}

func removeNetwork(ctx context.Context, bridge, guard string) {
	if guard != "" {
		_, _ = run(ctx, "nft", "delete", "table", "inet", guard)
	}
	if bridge != "" {
		_ = nspawn.DeleteLink(ctx, bridge)
	}
}

// waitUnit waits until unit is active inside h.
func (l *Lab) waitUnit(ctx context.Context, h *Host, unit string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, _ := l.Systemctl(ctx, h, "is-active", unit)
		if strings.TrimSpace(out) == "active" {
			return nil
		}
		if time.Now().After(deadline) {
			logs, _ := l.Exec(ctx, h, "journalctl", "-u", unit, "-n", "20", "--no-pager")
			return fmt.Errorf("lab: %s on %s is %q after %s:\n%s", unit, h.Name, strings.TrimSpace(out), timeout, logs)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// UnitPID is the main process of unit inside h, as a PID on this machine (for
// measuring it from outside): systemd's MainPID is in the host's PID namespace.
func (l *Lab) UnitPID(ctx context.Context, h *Host, unit string) (int, error) {
	out, err := l.Systemctl(ctx, h, "show", "--property=MainPID", "--value", unit)
	if err != nil {
		return 0, err
	}
	inner, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || inner == 0 {
		return 0, fmt.Errorf("lab: %s on %s has no main process (%q)", unit, h.Name, strings.TrimSpace(out))
	}
	pids, err := h.Machine.Pids()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, "NSpid:")); strings.HasPrefix(line, "NSpid:") && len(f) > 1 && f[len(f)-1] == strconv.Itoa(inner) {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("lab: %s on %s: pid %d not found among the host's processes", unit, h.Name, inner)
}
