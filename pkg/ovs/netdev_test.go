package ovs

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goovs "github.com/digitalocean/go-openvswitch/ovs"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runOK runs a step through driver.Run and fails the test unless it succeeds.
func runOK(t testing.TB, d driver.Driver, in any) driver.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := driver.Run(ctx, d, mustJSON(t, in))
	if !res.OK() {
		t.Fatalf("%s: %s (changes %q)", d.Kind(), res.Error, res.Changes)
	}
	return res
}

// inSync fails the test if Diff still finds changes.
func inSync(t testing.TB, d driver.Driver, in any) {
	t.Helper()
	left, err := driver.Check(context.Background(), d, mustJSON(t, in))
	if err != nil || len(left) > 0 {
		t.Fatalf("%s not in sync: %v %q", d.Kind(), err, left)
	}
}

// vsctl reads through go-openvswitch's ovs-vsctl wrapper, pointed at the harness.
func (e *ovsEnv) goovs() *goovs.Client {
	return goovs.New(goovs.Exec(func(cmd string, args ...string) ([]byte, error) {
		out, err := e.run(cmd, args...)
		return []byte(out), err
	}))
}

func sys(name string) ovsspec.Interface {
	return ovsspec.Interface{Name: name, Type: ovsspec.TypeSystem}
}

// TestIntegrationNetdevBridges drives the bridges driver against a plain userspace
// (netdev) ovs-vswitchd: no DPDK, no hugepages, a second or two.
func TestIntegrationNetdevBridges(t *testing.T) {
	e := startOVS(t, false)
	_, br := New(e.options()...)
	for _, l := range []string{"up0", "m0", "m1", "m2"} {
		e.ip("-n", e.ns, "link", "add", l, "type", "veth", "peer", "name", l+"p")
		e.ip("-n", e.ns, "link", "set", l, "up")
		e.ip("-n", e.ns, "link", "set", l+"p", "up")
	}
	in := ovsspec.BridgesInputs{Bridges: []ovsspec.Bridge{
		{Name: "br-int", Datapath: "netdev", Ports: []ovsspec.Port{
			{Name: "int0", Interfaces: []ovsspec.Interface{{Name: "int0", Type: ovsspec.TypeInternal}}, Tag: 10},
			{Name: "up0", Interfaces: []ovsspec.Interface{sys("up0")}, Trunks: []int{10, 20}},
		}},
		{Name: "br-ex", Datapath: "netdev", Ports: []ovsspec.Port{
			{Name: "bond0", Interfaces: []ovsspec.Interface{sys("m0"), sys("m1")}, BondMode: "active-backup"},
		}},
	}}
	// Every change of a step goes in one transaction: ovs-vswitchd reconfigures once.
	nextCfg := func() string { return e.vsctl("get", "Open_vSwitch", ".", "next_cfg") }
	oneTxn := func(t *testing.T, before string) {
		t.Helper()
		b, _ := strconv.Atoi(before)
		if a, _ := strconv.Atoi(nextCfg()); a != b+1 {
			t.Errorf("next_cfg %d -> %d: want one transaction", b, a)
		}
	}
	before := nextCfg()
	res := runOK(t, br, in)
	t.Logf("applied: %q", res.Changes)
	if len(res.Changes) != 2 || !strings.HasPrefix(res.Changes[0], "add bridge br-int (netdev) with ports int0 [internal, tag 10], up0") {
		t.Errorf("changes %q", res.Changes)
	}
	oneTxn(t, before)
	inSync(t, br, in)
	ports, err := e.goovs().VSwitch.ListPorts("br-int")
	if err != nil || !slices.Equal(ports, []string{"int0", "up0"}) {
		t.Errorf("br-int ports %v %v", ports, err)
	}
	if got := e.vsctl("get", "port", "bond0", "bond_mode"); got != "active-backup" {
		t.Errorf("bond0 bond_mode %s", got)
	}
	if got := e.vsctl("get", "bridge", "br-int", "datapath_type", "external_ids:plinth-owner"); got != "netdev\nplinth" {
		t.Errorf("br-int: %q", got)
	}
	if !strings.Contains(res.Outputs["bridge/br-ex"], "m0 ofport") {
		t.Errorf("outputs %v", res.Outputs)
	}

	t.Run("drift is seen and repaired", func(t *testing.T) {
		e.vsctl("set", "port", "int0", "tag=11")
		left, _ := driver.Check(context.Background(), br, mustJSON(t, in))
		if len(left) != 1 || left[0] != "update port int0 on bridge br-int: tag 11 → 10" {
			t.Fatalf("drift %q", left)
		}
		runOK(t, br, in)
		if got := e.vsctl("get", "port", "int0", "tag"); got != "10" {
			t.Errorf("tag %s", got)
		}
	})

	t.Run("bond membership and port settings change", func(t *testing.T) {
		in2 := clone(t, in)
		in2.Bridges[1].Ports[0].Interfaces = []ovsspec.Interface{sys("m0"), sys("m2")}
		in2.Bridges[1].Ports[0].BondMode = "balance-slb"
		in2.Bridges[0].Ports[1].Trunks = []int{30}
		before := nextCfg()
		res := runOK(t, br, in2)
		oneTxn(t, before)
		want := []string{"update port up0 on bridge br-int: trunks [10 20] → [30]",
			"re-create port bond0 on bridge br-ex: interfaces m0,m1 → m0,m2"}
		if !slices.Equal(res.Changes, want) {
			t.Errorf("changes %q", res.Changes)
		}
		inSync(t, br, in2)
		if got := e.vsctl("get", "port", "bond0", "bond_mode"); got != "balance-slb" {
			t.Errorf("bond0 bond_mode %s", got)
		}
		runOK(t, br, in)
	})

	t.Run("a port Plinth did not create survives", func(t *testing.T) {
		e.vsctl("add-port", "br-int", "neutron0", "--", "set", "interface", "neutron0", "type=internal")
		inSync(t, br, in)
		in2 := clone(t, in)
		in2.Bridges = in2.Bridges[1:] // br-int leaves the manifest
		res := runOK(t, br, in2)
		if len(res.Changes) != 1 || !strings.Contains(res.Changes[0], "release bridge br-int: keep it for ports Plinth did not create (neutron0); remove Plinth's ports int0, up0") {
			t.Errorf("changes %q", res.Changes)
		}
		ports, _ := e.goovs().VSwitch.ListPorts("br-int")
		if !slices.Equal(ports, []string{"neutron0"}) {
			t.Errorf("br-int ports %v", ports)
		}
		e.vsctl("del-br", "br-int")
		res = runOK(t, br, in) // br-int comes back, owned again
		inSync(t, br, in)
	})

	t.Run("owned ports and bridges are removed", func(t *testing.T) {
		in2 := clone(t, in)
		in2.Bridges[0].Ports = in2.Bridges[0].Ports[:1]
		in2.Bridges = in2.Bridges[:1]
		res := runOK(t, br, in2)
		if !slices.Equal(res.Changes, []string{"remove bridge br-ex", "remove port up0 from bridge br-int"}) {
			t.Errorf("changes %q", res.Changes)
		}
		if out := e.vsctl("list-br"); out != "br-int" {
			t.Errorf("bridges %q", out)
		}
		runOK(t, br, in)
	})

	t.Run("an existing bridge is adopted", func(t *testing.T) {
		e.vsctl("add-br", "br-adopt", "--", "set", "bridge", "br-adopt", "datapath_type=netdev")
		in2 := clone(t, in)
		in2.Bridges = append(in2.Bridges, ovsspec.Bridge{Name: "br-adopt", Datapath: "netdev"})
		res := runOK(t, br, in2)
		if !slices.Equal(res.Changes, []string{"bridge br-adopt: adopt (created outside Plinth)"}) {
			t.Errorf("changes %q", res.Changes)
		}
		runOK(t, br, in)
		if out := e.vsctl("list-br"); strings.Contains(out, "br-adopt") {
			t.Errorf("adopted bridge not removed: %q", out)
		}
	})

	t.Run("an interface OVS rejects is reported and removed", func(t *testing.T) {
		in2 := clone(t, in)
		in2.Bridges[0].Ports = append(in2.Bridges[0].Ports, ovsspec.Port{Name: "nosuch0", Interfaces: []ovsspec.Interface{sys("nosuch0")}})
		res := driver.Run(context.Background(), br, mustJSON(t, in2))
		if res.OK() || !strings.Contains(res.Error, "port nosuch0: interface nosuch0: could not open network device nosuch0 (No such device)") ||
			!strings.Contains(res.Error, "removed so ovs-vswitchd stops retrying") {
			t.Fatalf("result %+v", res)
		}
		if ports, _ := e.goovs().VSwitch.ListPorts("br-int"); slices.Contains(ports, "nosuch0") {
			t.Errorf("failed port left behind: %v", ports)
		}
		inSync(t, br, in)
	})

	t.Run("a link that stays down is named once the link wait is up", func(t *testing.T) {
		e.ip("-n", e.ns, "link", "add", "dn0", "type", "veth", "peer", "name", "dn0p")
		e.ip("-n", e.ns, "link", "set", "dn0", "up") // its peer stays down: no carrier
		defer e.ip("-n", e.ns, "link", "del", "dn0")
		_, quick := New(e.options(WithTimeouts(15*time.Second, 30*time.Second, 1500*time.Millisecond))...)
		in2 := clone(t, in)
		in2.Bridges[0].Ports = append(in2.Bridges[0].Ports, ovsspec.Port{Name: "dn0", Interfaces: []ovsspec.Interface{sys("dn0")}})
		res := driver.Run(context.Background(), quick, mustJSON(t, in2))
		if res.OK() || !strings.Contains(res.Error, "ovs: link down: dn0") {
			t.Fatalf("result %+v", res)
		}
		// Its link comes up: the step then succeeds, though it has nothing to apply
		// and the database may not show the link up yet.
		e.ip("-n", e.ns, "link", "set", "dn0p", "up")
		runOK(t, quick, in2)
		// Down again with the port in place: the outputs name it after the wait.
		e.ip("-n", e.ns, "link", "set", "dn0p", "down")
		e.vsctl("--timeout=10", "wait-until", "Interface", "dn0", "link_state=down")
		res = driver.Run(context.Background(), quick, mustJSON(t, in2))
		if res.OK() || !strings.Contains(res.Error, "outputs: ovs: link down: dn0") || len(res.Changes) > 0 {
			t.Fatalf("result %+v", res)
		}
		e.ip("-n", e.ns, "link", "set", "dn0p", "up")
		runOK(t, quick, in2)
		runOK(t, br, in)
	})

	t.Run("control socket commands and their errors", func(t *testing.T) {
		var o options
		for _, opt := range e.options() {
			opt(&o)
		}
		if _, err := o.appctl(context.Background(), "no-such/command"); err == nil || !strings.Contains(err.Error(), "ovs-vswitchd no-such/command: ") ||
			!strings.Contains(err.Error(), "not a valid command") {
			t.Errorf("unknown command: %v", err)
		}
		out, err := o.appctl(context.Background(), "dpif/show")
		if err != nil || !strings.Contains(string(out), "br-int:") {
			t.Errorf("dpif/show: %q, %v", out, err)
		}
		o.runDir = t.TempDir()
		if _, err := o.appctl(context.Background(), "dpif/show"); err == nil || !strings.Contains(err.Error(), "is ovs-vswitchd running?") {
			t.Errorf("no pidfile: %v", err)
		}
	})

	t.Run("a system datapath without the kernel module fails clearly", func(t *testing.T) {
		if strings.Contains(e.vsctl("--columns=datapaths", "list", "Open_vSwitch"), "system") {
			t.Skip("this kernel has the openvswitch module")
		}
		in2 := clone(t, in)
		in2.Bridges = append(in2.Bridges, ovsspec.Bridge{Name: "br-sys", Datapath: "system"})
		res := driver.Run(context.Background(), br, mustJSON(t, in2))
		if res.OK() || res.Retryable || !strings.Contains(res.Error, `bridge br-sys: ovs-vswitchd could not create it with datapath "system" (no openvswitch kernel module?`) {
			t.Fatalf("result %+v", res)
		}
		if out := e.vsctl("list-br"); strings.Contains(out, "br-sys") {
			t.Errorf("failed bridge left behind: %q", out)
		}
	})
}

// TestIntegrationDPDKUnsupported: a plain ovs-vswitchd cannot do DPDK; the driver
// says what to install instead of restarting it in a loop.
func TestIntegrationDPDKUnsupported(t *testing.T) {
	e := startOVS(t, false)
	restarts := 0
	dp, _ := New(e.options(WithRestart(Restarter{Desc: "count", Fn: func(context.Context) error { restarts++; return nil }}))...)
	res := driver.Run(context.Background(), dp, mustJSON(t, ovsspec.DPDKInputs{Enabled: true, PMDMaxSleepUs: 100}))
	if res.OK() || res.Retryable || !strings.Contains(res.Error, "this ovs-vswitchd has no DPDK support: install openvswitch-switch-dpdk") || restarts != 0 {
		t.Fatalf("%+v (restarts %d)", res, restarts)
	}
	// DPDK off on the same vswitchd is fine, and takes back the keys Plinth set.
	res = runOK(t, dp, ovsspec.DPDKInputs{})
	if got := e.vsctl("get", "Open_vSwitch", ".", "other_config"); got != `{dpdk-init="false"}` {
		t.Errorf("other_config %s (changes %q)", got, res.Changes)
	}
}

func clone(t testing.TB, in ovsspec.BridgesInputs) ovsspec.BridgesInputs {
	var out ovsspec.BridgesInputs
	if err := json.Unmarshal(mustJSON(t, in), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
