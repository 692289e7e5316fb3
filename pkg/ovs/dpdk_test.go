package ovs

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

func dpdkPort(name, devargs string) ovsspec.Port {
	return ovsspec.Port{Name: name, Interfaces: []ovsspec.Interface{dpdkIface(name, devargs)}}
}

func dpdkIface(name, devargs string) ovsspec.Interface {
	return ovsspec.Interface{Name: name, Type: ovsspec.TypeDPDK, Devargs: devargs}
}

// TestIntegrationDPDK configures a real DPDK ovs-vswitchd (--in-memory --no-pci, one
// PMD on CPU 1 that sleeps when idle) with vdev ports: net_null and net_af_packet on
// veths into namespaces, then pings through it, fails a LACP bond member over, checks
// VLAN access ports, a rejected device, and a restart for new DPDK memory settings.
func TestIntegrationDPDK(t *testing.T) {
	start := time.Now()
	e := startOVS(t, true)
	huge := e.hugepages(300)
	dp, br := New(e.options()...)
	ctx := context.Background()

	dpdkIn := ovsspec.DPDKInputs{
		Enabled: true, SocketMemMB: []int{512}, SocketLimitMB: []int{512}, HugepageDir: huge,
		LcoreCPUs: "0", PMDCPUs: "1", PMDMaxSleepUs: 10000, Extra: "--in-memory --no-pci --no-telemetry",
	}
	res := runOK(t, dp, dpdkIn)
	t.Logf("ovs.dpdk: %q -> %v", res.Changes, res.Outputs)
	if len(res.Changes) != 2 || !strings.Contains(res.Changes[0], "dpdk-socket-mem=512") || !strings.HasPrefix(res.Changes[1], "initialise DPDK") {
		t.Errorf("changes %q", res.Changes)
	}
	if got := e.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized", "other_config:pmd-cpu-mask", "other_config:dpdk-lcore-mask"); got != "true\n\"0x2\"\n\"0x1\"" {
		t.Errorf("Open_vSwitch: %q", got)
	}
	inSync(t, dp, dpdkIn)

	// Namespaces: X and W hang off br-phy directly; Y sits behind a LACP bond of
	// DPDK ports (br-phy) facing a bond of system ports (br-peer); V and Q are VLAN
	// access ports next to an internal port with an address in the OVS namespace.
	x := e.peerNS("x", "xb", "10.99.0.1/24")
	e.peerNS("w", "wb", "10.99.0.3/24")
	e.peerNS("y", "yb", "10.99.0.2/24")
	v := e.peerNS("v", "vb", "10.100.0.2/24")
	q := e.peerNS("q", "qb", "10.100.0.3/24")
	for _, l := range []string{"a1", "a2"} {
		e.ip("-n", e.ns, "link", "add", l, "type", "veth", "peer", "name", "b"+l[1:])
		e.ip("-n", e.ns, "link", "set", l, "up")
		e.ip("-n", e.ns, "link", "set", "b"+l[1:], "up")
	}
	bridges := ovsspec.BridgesInputs{Bridges: []ovsspec.Bridge{
		{Name: "br-phy", Datapath: "netdev", Ports: []ovsspec.Port{
			dpdkPort("n0", "net_null0,no-rx=1"),
			dpdkPort("px", "net_af_packet0,iface=xb"),
			dpdkPort("pw", "net_af_packet1,iface=wb"),
			{Name: "bond0", Interfaces: []ovsspec.Interface{dpdkIface("pa1", "net_af_packet2,iface=a1"), dpdkIface("pa2", "net_af_packet3,iface=a2")},
				BondMode: "balance-tcp", LACP: "active", LACPTime: "fast"},
			{Name: "pv", Interfaces: []ovsspec.Interface{dpdkIface("pv", "net_af_packet4,iface=vb")}, Tag: 100},
			{Name: "pq", Interfaces: []ovsspec.Interface{dpdkIface("pq", "net_af_packet5,iface=qb")}, Tag: 200},
			{Name: "vlan100", Interfaces: []ovsspec.Interface{{Name: "vlan100", Type: ovsspec.TypeInternal}}, Tag: 100},
		}},
		{Name: "br-peer", Datapath: "netdev", Ports: []ovsspec.Port{
			{Name: "bond1", Interfaces: []ovsspec.Interface{sys("b1"), sys("b2")}, BondMode: "balance-tcp", LACP: "active", LACPTime: "fast"},
			dpdkPort("py", "net_af_packet6,iface=yb"),
		}},
	}}
	res = runOK(t, br, bridges)
	t.Logf("ovs.bridges: %q -> %v", res.Changes, res.Outputs)
	if res.Outputs["pmd_cores"] != "1" {
		t.Errorf("PMD cores %q, want 1", res.Outputs["pmd_cores"])
	}
	inSync(t, br, bridges)
	for _, p := range []string{"n0", "px", "pa1", "py"} {
		if got := e.vsctl("get", "interface", p, "link_state", "error"); got != "up\n[]" {
			t.Errorf("%s: %q", p, got)
		}
	}

	t.Run("ping through two af_packet DPDK ports", func(t *testing.T) {
		poll.Until(t, 10*time.Second, "x reaches w", func() error { return ping(x, "10.99.0.3") })
	})

	t.Run("LACP bond fails over", func(t *testing.T) {
		poll.Until(t, 15*time.Second, "bond0 negotiated and y reachable", func() error {
			if out, _ := e.run("ovs-appctl", "bond/show", "bond0"); !strings.Contains(out, "lacp_status: negotiated") {
				return fmt.Errorf("bond0: %s", out)
			}
			return ping(x, "10.99.0.2")
		})
		e.ip("-n", e.ns, "link", "set", "a1", "down")
		poll.Until(t, 15*time.Second, "pa1 disabled", func() error {
			out, _ := e.run("ovs-appctl", "bond/show", "bond0")
			if !strings.Contains(out, "member pa1: disabled") {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
		poll.Until(t, 10*time.Second, "y reachable over pa2", func() error { return ping(x, "10.99.0.2") })
		e.ip("-n", e.ns, "link", "set", "a1", "up")
	})

	t.Run("VLAN access ports", func(t *testing.T) {
		e.ip("-n", e.ns, "addr", "add", "10.100.0.1/24", "dev", "vlan100")
		e.ip("-n", e.ns, "link", "set", "vlan100", "up")
		poll.Until(t, 10*time.Second, "v (tag 100) reaches the tag-100 internal port", func() error { return ping(v, "10.100.0.1") })
		if err := ping(q, "10.100.0.1"); err == nil {
			t.Error("q (tag 200) reached a tag-100 port")
		}
		if got := e.vsctl("get", "port", "pv", "tag"); got != "100" {
			t.Errorf("pv tag %s", got)
		}
	})

	t.Run("a device DPDK rejects is reported and removed", func(t *testing.T) {
		bad := clone(t, bridges)
		bad.Bridges[0].Ports = append(bad.Bridges[0].Ports, dpdkPort("bad0", "net_bogus0"))
		res := driver.Run(ctx, br, mustJSON(t, bad))
		if res.OK() || !strings.Contains(res.Error, "port bad0: interface bad0: Error attaching device 'net_bogus0' to DPDK (removed so ovs-vswitchd stops retrying)") {
			t.Fatalf("result %+v", res)
		}
		if out := e.vsctl("list-ports", "br-phy"); strings.Contains(out, "bad0") {
			t.Errorf("bad0 left behind: %s", out)
		}
		inSync(t, br, bridges)
	})

	t.Run("new DPDK memory settings restart ovs-vswitchd", func(t *testing.T) {
		pid := e.vs.Process.Pid
		in := dpdkIn
		in.SocketMemMB, in.SocketLimitMB = []int{256}, []int{384}
		res := runOK(t, dp, in)
		want := "restart ovs-vswitchd (test harness restart): DPDK reads dpdk-socket-mem, dpdk-socket-limit only at start"
		if len(res.Changes) != 2 || res.Changes[1] != want {
			t.Errorf("changes %q", res.Changes)
		}
		if e.vs.Process.Pid == pid {
			t.Error("ovs-vswitchd was not restarted")
		}
		if got := e.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized", "other_config:dpdk-socket-mem"); got != "true\n\"256\"" {
			t.Errorf("after restart: %q", got)
		}
		inSync(t, dp, in)
		runOK(t, br, bridges) // the ports come back by themselves; verify says so
		poll.Until(t, 10*time.Second, "x reaches w again", func() error { return ping(x, "10.99.0.3") })
		pid = e.vs.Process.Pid
		res = runOK(t, dp, func() ovsspec.DPDKInputs { in.PMDMaxSleepUs = 5000; return in }())
		if len(res.Changes) != 1 || e.vs.Process.Pid != pid {
			t.Errorf("pmd-maxsleep needs no restart: %q", res.Changes)
		}
	})

	t.Run("the PMD thread sleeps", func(t *testing.T) {
		ticks := func() int {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.vs.Process.Pid))
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
			var u, s int
			fmt.Sscan(f[11], &u)
			fmt.Sscan(f[12], &s)
			return u + s
		}
		a := ticks()
		time.Sleep(time.Second)
		if used := ticks() - a; used > 50 { // clock ticks (1/100 s): half a core
			t.Errorf("ovs-vswitchd used %d ticks in 1 s: the PMD spins", used)
		}
	})

	t.Run("bridges and settings Plinth made are removed", func(t *testing.T) {
		res := runOK(t, br, ovsspec.BridgesInputs{})
		if !slices.Equal(res.Changes, []string{"remove bridge br-peer", "remove bridge br-phy"}) {
			t.Errorf("changes %q", res.Changes)
		}
	})
	t.Logf("DPDK suite body took %s", time.Since(start).Round(100*time.Millisecond))
}
