package host

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
)

// coordinator puts a TCP listener, standing in for a coordinator, at 10.9.0.2:7440 in
// its own namespace, wired to up0 in host by a veth pair.
func coordinator(t *testing.T, host *testNS) *testNS {
	t.Helper()
	cn := newNS(t)
	host.run(t, func() {
		addVeth(t, "up0", "cp0", "")
		if err := netlink.LinkSetNsFd(link(t, "cp0"), int(cn.h)); err != nil {
			t.Fatal(err)
		}
	})
	var ln net.Listener
	cn.run(t, func() {
		a, _ := netlink.ParseAddr("10.9.0.2/24")
		for _, err := range []error{netlink.AddrAdd(link(t, "cp0"), a), netlink.LinkSetUp(link(t, "cp0")), netlink.LinkSetUp(link(t, "lo"))} {
			if err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if ln, err = net.Listen("tcp", "10.9.0.2:7440"); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return cn
}

func nft(t *testing.T, ns *testNS, ruleset string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s", ns.name, err, out)
	}
}

// A new management address that the coordinator side drops (nftables) cuts the host
// off: the change is rolled back, the old address is back and owned, and the step
// fails for good.
func TestNetworkRollsBackWhenCoordinatorUnreachable(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (nftables)")
	}
	hn := newNS(t)
	cn := coordinator(t, hn)
	dir := t.TempDir()
	probe := TCPProbe(func() ([]string, error) { return []string{"10.9.0.2:7440"}, nil })
	d := NewNetworkDriver(dir, WithReachability(probe), WithRollbackTimeout(time.Second))
	at := func(addr string) []byte {
		return mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "up0", Up: true, Addresses: []string{addr}}}})
	}
	hn.run(t, func() {
		// up0 is down: unreachable before, so this first run goes unguarded.
		mustRun(t, d, at("10.9.0.1/24"))
		if err := probe(context.Background()); err != nil {
			t.Fatalf("coordinator not reachable after setup: %v", err)
		}
		// Reachable before and after: a guarded change commits.
		if got := mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "up0", Up: true, MTU: 1400, Addresses: []string{"10.9.0.1/24"}}}})); len(got) != 1 {
			t.Fatalf("changes %q", got)
		}

		nft(t, cn, "table inet guard {\n chain input {\n  type filter hook input priority 0;\n  ip saddr 10.9.0.5 drop\n }\n}\n")
		start := time.Now()
		res := driver.Run(context.Background(), d, at("10.9.0.5/24"))
		if res.OK() || res.Retryable || !strings.Contains(res.Error, "no coordinator reachable within 1s after 2 changes") ||
			!strings.Contains(res.Error, "rolled back 2 changes (a coordinator is reachable again)") {
			t.Fatalf("run %+v", res)
		}
		t.Logf("rolled back after %s: %s", time.Since(start).Round(100*time.Millisecond), res.Error)
		a := addrs(t, "up0")
		if !a["10.9.0.1/24"] || a["10.9.0.5/24"] || link(t, "up0").Attrs().MTU != 1400 {
			t.Errorf("up0 after rollback: %v mtu %d", a, link(t, "up0").Attrs().MTU)
		}
		if st := readOwned(t, dir); !slices.Equal(st.Addresses, []addrKey{{Link: "up0", CIDR: "10.9.0.1/24"}}) {
			t.Errorf("owned after rollback %+v", st.Addresses)
		}
		if err := probe(context.Background()); err != nil {
			t.Errorf("not reachable after rollback: %v", err)
		}
	})
}

// Every kind of change is undone, newest first, when the probe fails after them.
func TestGuardUndoesEveryKind(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		dir := t.TempDir()
		mustRun(t, NewNetworkDriver(dir), mustJSON(t, hostspec.NetworkInputs{
			Links:  []hostspec.LinkSpec{{Name: "v0", Up: true, Addresses: []string{"10.0.0.5/24"}}, {Name: "v1", Up: true}},
			Routes: []hostspec.RouteSpec{{Dst: "10.8.0.0/16", Gateway: "10.0.0.1"}},
			Rules:  []hostspec.RuleSpec{{Priority: 900, Table: 9}},
		}))
		before := readOwned(t, dir)
		var calls atomic.Int32
		probe := func(context.Context) error {
			if calls.Add(1) == 1 {
				return nil // reachable before
			}
			return errors.New("unreachable")
		}
		d := NewNetworkDriver(dir, WithReachability(probe), WithRollbackTimeout(10*time.Millisecond))
		in := virtualInputs()
		in.Routes = append(in.Routes, hostspec.RouteSpec{Dst: "10.8.0.0/16", Gateway: "10.0.0.2"})
		res := driver.Run(context.Background(), d, mustJSON(t, in))
		if res.OK() || !strings.Contains(res.Error, "still no coordinator reachable: unreachable") {
			t.Fatalf("run %+v", res)
		}
		for _, name := range []string{"br0", "mv0", "vx0"} {
			if _, err := netlink.LinkByName(name); err == nil {
				t.Errorf("%s not removed by the rollback", name)
			}
		}
		if l := link(t, "v0"); l.Attrs().MTU != 1500 || !addrs(t, "v0")["10.0.0.5/24"] {
			t.Errorf("v0 mtu %d addrs %v", l.Attrs().MTU, addrs(t, "v0"))
		}
		if link(t, "v1").Attrs().MasterIndex != 0 {
			t.Error("v1 still in a bridge")
		}
		if r, ok := hasRoute(t, "10.8.0.0/16", tableMain, 0); !ok || toAddr(r.Gw).String() != "10.0.0.1" {
			t.Errorf("route not restored: %+v %v", r, ok)
		}
		rules := ruleKeys(t)
		if len(rules) != 4 || !rules[ruleKey{Family: 2, Priority: 900, Table: 9}] {
			t.Errorf("rules %v", rules)
		}
		if after := readOwned(t, dir); !reflect.DeepEqual(after, before) {
			t.Errorf("owned after rollback %+v\nbefore %+v", after, before)
		}
	})
}

// Replacing a link's only address makes the kernel flush the routes through it: the
// guarded transaction puts them back before it asks whether a coordinator answers.
func TestGuardSettlesWhatTheKernelUndid(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		dir := t.TempDir()
		at := func(addr string) []byte {
			return mustJSON(t, hostspec.NetworkInputs{
				Links:  []hostspec.LinkSpec{{Name: "v0", Up: true, Addresses: []string{addr}}, {Name: "v1", Up: true}},
				Routes: []hostspec.RouteSpec{{Dst: "10.8.0.0/16", Gateway: "10.0.0.1"}},
			})
		}
		mustRun(t, NewNetworkDriver(dir), at("10.0.0.5/24"))
		var probes atomic.Int32
		probe := func(context.Context) error {
			probes.Add(1)
			if _, ok := hasRoute(t, "10.8.0.0/16", tableMain, 0); !ok {
				return errors.New("no route to the coordinator")
			}
			return nil
		}
		d := NewNetworkDriver(dir, WithReachability(probe), WithRollbackTimeout(10*time.Millisecond))
		res := driver.Run(context.Background(), d, at("10.0.0.6/24"))
		if !res.OK() {
			t.Fatalf("run %+v", res)
		}
		if _, ok := hasRoute(t, "10.8.0.0/16", tableMain, 0); !ok || !addrs(t, "v0")["10.0.0.6/24"] || addrs(t, "v0")["10.0.0.5/24"] {
			t.Errorf("route %v addrs %v", ok, addrs(t, "v0"))
		}
		if probes.Load() != 2 {
			t.Errorf("%d probes, want one before and one after", probes.Load())
		}
	})
}
