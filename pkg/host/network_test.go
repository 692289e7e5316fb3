package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const tableMain = unix.RT_TABLE_MAIN

func mustRun(t *testing.T, d driver.Driver, in json.RawMessage) []string {
	t.Helper()
	res := driver.Run(context.Background(), d, in)
	if !res.OK() {
		t.Fatalf("run failed: %s (changes %q)", res.Error, res.Changes)
	}
	return res.Changes
}

func wantChanges(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("change %q missing from %q", w, got)
		}
	}
}

func readOwned(t *testing.T, dir string) ownedState {
	t.Helper()
	s, err := (&stateStore{path: filepath.Join(dir, ownedFile)}).load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNetworkApplyIsIdempotent(t *testing.T) {
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		in := mustJSON(t, hostspec.NetworkInputs{
			Links: []hostspec.LinkSpec{
				{Name: "v0", Up: true, MTU: 9000, Addresses: []string{"10.0.0.5/24", "fd00::5/64"}},
				{Name: "v1", Up: true},
			},
			Routes: []hostspec.RouteSpec{
				{Dst: "10.1.0.0/16", Gateway: "10.0.0.1", Metric: 10},
				{Dst: "10.2.0.0/16", Dev: "v0", Table: 100, MTU: 1400},
				{Dst: "fd01::/64", Gateway: "fd00::1"},
				{Dst: "default", Gateway: "10.0.0.1"},
			},
		})
		d := NewNetworkDriver(dir)
		got := mustRun(t, d, in)
		wantChanges(t, got,
			"link v0: mtu 1500 -> 9000", "link v0: set up", "link v1: set up",
			"address 10.0.0.5/24 on v0: add", "address fd00::5/64 on v0: add",
			"route 10.1.0.0/16 via 10.0.0.1 metric 10: add",
			"route 10.2.0.0/16 dev v0 table 100: add",
			"route fd01::/64 via fd00::1: add",
			"route default via 10.0.0.1: add")
		if len(got) != 9 {
			t.Errorf("got %d changes, want 9: %q", len(got), got)
		}

		l := link(t, "v0")
		if l.Attrs().MTU != 9000 || l.Attrs().Flags&unix.IFF_UP == 0 {
			t.Errorf("v0: mtu %d flags %v", l.Attrs().MTU, l.Attrs().Flags)
		}
		if a := addrs(t, "v0"); !a["10.0.0.5/24"] || !a["fd00::5/64"] {
			t.Errorf("v0 addresses %v", a)
		}
		if r, ok := hasRoute(t, "10.1.0.0/16", tableMain, 10); !ok || toAddr(r.Gw).String() != "10.0.0.1" {
			t.Errorf("route 10.1.0.0/16: %v %v", r, ok)
		}
		if r, ok := hasRoute(t, "10.2.0.0/16", 100, 0); !ok || r.LinkIndex != l.Attrs().Index || r.MTU != 1400 {
			t.Errorf("route 10.2.0.0/16 table 100: %v %v", r, ok)
		}
		if _, ok := hasRoute(t, "fd01::/64", tableMain, 1024); !ok {
			t.Error("route fd01::/64 missing")
		}
		if _, ok := hasRoute(t, "0.0.0.0/0", tableMain, 0); !ok {
			t.Error("default route missing")
		}
		if st := readOwned(t, dir); len(st.Addresses) != 2 || len(st.Routes) != 4 {
			t.Errorf("owned %+v", st)
		}

		if again := mustRun(t, d, in); len(again) != 0 {
			t.Errorf("second run changed %q", again)
		}
		if drift, err := driver.Check(context.Background(), d, in); err != nil || len(drift) != 0 {
			t.Errorf("check: %q %v", drift, err)
		}
	})
}

func TestNetworkRemovesOnlyOwned(t *testing.T) {
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		v0 := link(t, "v0")
		for _, f := range []func() error{
			func() error { return netlink.LinkSetUp(v0) },
			func() error { return netlink.LinkSetUp(link(t, "v1")) },
			func() error { a, _ := netlink.ParseAddr("10.0.0.9/24"); return netlink.AddrAdd(v0, a) },
			func() error {
				dst, _ := netlink.ParseIPNet("10.9.0.0/16")
				return netlink.RouteAdd(&netlink.Route{Dst: dst, LinkIndex: v0.Attrs().Index, Scope: netlink.SCOPE_LINK})
			},
		} {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		d := NewNetworkDriver(dir)
		got := mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{
			Links:  []hostspec.LinkSpec{{Name: "v0", Up: true, Addresses: []string{"10.0.0.9/24", "10.0.0.5/24"}}},
			Routes: []hostspec.RouteSpec{{Dst: "10.1.0.0/16", Gateway: "10.0.0.1"}},
		}))
		if want := []string{"address 10.0.0.5/24 on v0: add", "route 10.1.0.0/16 via 10.0.0.1: add"}; !slices.Equal(got, want) {
			t.Fatalf("changes %q, want %q", got, want)
		}

		// Drop everything: only what Plinth added goes.
		got = mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "v0", Up: true}}}))
		if want := []string{"address 10.0.0.5/24 on v0: remove", "route 10.1.0.0/16: remove"}; !slices.Equal(got, want) {
			t.Fatalf("changes %q, want %q", got, want)
		}
		if a := addrs(t, "v0"); a["10.0.0.5/24"] || !a["10.0.0.9/24"] {
			t.Errorf("v0 addresses %v", a)
		}
		if _, ok := hasRoute(t, "10.1.0.0/16", tableMain, 0); ok {
			t.Error("owned route 10.1.0.0/16 still there")
		}
		if _, ok := hasRoute(t, "10.9.0.0/16", tableMain, 0); !ok {
			t.Error("pre-existing route 10.9.0.0/16 removed")
		}
		if st := readOwned(t, dir); len(st.Addresses)+len(st.Routes) != 0 {
			t.Errorf("owned %+v", st)
		}
	})
}

func TestNetworkRepairsDrift(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		d := NewNetworkDriver(t.TempDir())
		in := mustJSON(t, hostspec.NetworkInputs{
			Links:  []hostspec.LinkSpec{{Name: "v0", Up: true, MTU: 9000, Addresses: []string{"10.0.0.5/24"}}, {Name: "v1", Up: true}},
			Routes: []hostspec.RouteSpec{{Dst: "10.1.0.0/16", Gateway: "10.0.0.1"}},
		})
		mustRun(t, d, in)

		v0 := link(t, "v0")
		if err := netlink.LinkSetMTU(v0, 1400); err != nil {
			t.Fatal(err)
		}
		dst, _ := netlink.ParseIPNet("10.1.0.0/16")
		if err := netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: []byte{10, 0, 0, 2}}); err != nil {
			t.Fatal(err)
		}
		want := []string{"link v0: mtu 1400 -> 9000", "route 10.1.0.0/16 via 10.0.0.1: replace (gateway 10.0.0.2 -> 10.0.0.1)"}
		drift, err := driver.Check(context.Background(), d, in)
		if err != nil || !slices.Equal(drift, want) {
			t.Fatalf("check: %q %v, want %q", drift, err, want)
		}
		if got := mustRun(t, d, in); !slices.Equal(got, want) {
			t.Errorf("run: %q, want %q", got, want)
		}
		if link(t, "v0").Attrs().MTU != 9000 {
			t.Error("mtu not repaired")
		}
	})
}

// Ownership is written while the changes before the first add run; when one of them
// fails, no add happens and the record is taken back, keeping what was owned before.
func TestNetworkFailureBeforeAddsLeavesNoOwnership(t *testing.T) {
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		d := NewNetworkDriver(dir)
		mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "v0", Addresses: []string{"10.0.0.5/24"}}}}))
		in := hostspec.NetworkInputs{
			Links:  []hostspec.LinkSpec{{Name: "v0", MTU: 60, Addresses: []string{"10.0.0.5/24", "10.0.0.6/24"}}}, // below the minimum
			Routes: []hostspec.RouteSpec{{Dst: "10.1.0.0/16", Gateway: "10.0.0.1"}},
		}
		res := driver.Run(context.Background(), d, mustJSON(t, in))
		if res.OK() || res.Retryable || !strings.Contains(res.Error, "set mtu 60 on v0") || len(res.Changes) != 0 {
			t.Fatalf("run %+v, want a permanent mtu failure", res)
		}
		if st := readOwned(t, dir); !slices.Equal(st.Addresses, []addrKey{{Link: "v0", CIDR: "10.0.0.5/24"}}) || len(st.Routes) != 0 {
			t.Errorf("owned after the failure %+v, want only 10.0.0.5/24", st)
		}
		if a := addrs(t, "v0"); a["10.0.0.6/24"] {
			t.Error("10.0.0.6/24 added after the failure")
		}
	})
}

func TestNetworkMissingLinkIsPermanent(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		d := NewNetworkDriver(t.TempDir())
		for _, spec := range []hostspec.LinkSpec{{Name: "nope0", Up: true}, {Name: "eth9", MAC: "02:00:00:00:00:99"}} {
			_, err := d.Diff(context.Background(), mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{spec}}))
			if !driver.IsPermanent(err) || !strings.Contains(err.Error(), linkWanted(spec)) {
				t.Errorf("%s: err %v, want a permanent error naming the link", linkWanted(spec), err)
			}
			res := driver.Run(context.Background(), d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{spec}}))
			if res.OK() || res.Retryable {
				t.Errorf("%s: run %+v, want a non-retryable failure", linkWanted(spec), res)
			}
		}
	})
}

func TestNetworkFindsLinkByMAC(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "02:00:00:00:00:01")
		d := NewNetworkDriver(t.TempDir())
		in := mustJSON(t, hostspec.NetworkInputs{
			Links:  []hostspec.LinkSpec{{Name: "eth1", MAC: "02:00:00:00:00:01", Up: true, MTU: 9000, Addresses: []string{"10.0.0.5/24"}}},
			Routes: []hostspec.RouteSpec{{Dst: "10.1.0.0/16", Dev: "eth1"}},
		})
		got := mustRun(t, d, in)
		wantChanges(t, got,
			"link v0 (wanted name eth1, matched by mac): mtu 1500 -> 9000",
			"address 10.0.0.5/24 on v0: add",
			"route 10.1.0.0/16 dev eth1: add")
		if _, err := netlink.LinkByName("eth1"); err == nil {
			t.Error("link was renamed")
		}
		if link(t, "v0").Attrs().MTU != 9000 || !addrs(t, "v0")["10.0.0.5/24"] {
			t.Error("v0 not configured")
		}
		if r, ok := hasRoute(t, "10.1.0.0/16", tableMain, 0); !ok || r.LinkIndex != link(t, "v0").Attrs().Index {
			t.Errorf("route %v %v", r, ok)
		}
		if again := mustRun(t, d, in); len(again) != 0 {
			t.Errorf("second run changed %q", again)
		}
	})
}

func TestNetworkConvergesAfterCrash(t *testing.T) {
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		d := NewNetworkDriver(dir)
		in := hostspec.NetworkInputs{
			Links:  []hostspec.LinkSpec{{Name: "v0", Up: true, Addresses: []string{"10.0.0.5/24", "10.0.0.6/24"}}, {Name: "v1", Up: true}},
			Routes: []hostspec.RouteSpec{{Dst: "10.1.0.0/16", Gateway: "10.0.0.1"}},
		}
		changes, err := d.Diff(context.Background(), mustJSON(t, in))
		if err != nil {
			t.Fatal(err)
		}
		// Crash after the links and the first address: ownership of every pending add
		// is already on disk.
		for _, c := range changes[:3] {
			if err := c.Apply(context.Background()); err != nil {
				t.Fatalf("%s: %v", c.Summary, err)
			}
		}
		if st := readOwned(t, dir); len(st.Addresses) != 2 || len(st.Routes) != 1 {
			t.Fatalf("owned after crash %+v", st)
		}
		got := mustRun(t, d, mustJSON(t, in))
		if want := []string{"address 10.0.0.6/24 on v0: add", "route 10.1.0.0/16 via 10.0.0.1: add"}; !slices.Equal(got, want) {
			t.Errorf("changes %q, want %q", got, want)
		}

		// Crash right after recording ownership of 10.0.0.7, before adding it, and the
		// inputs then drop it: the record is forgotten, nothing is deleted.
		if err := d.state.update(func(s *ownedState) {
			s.Addresses = append(s.Addresses, addrKey{Link: "v0", CIDR: "10.0.0.7/24"})
		}); err != nil {
			t.Fatal(err)
		}
		got = mustRun(t, d, mustJSON(t, in))
		if want := []string{"address 10.0.0.7/24 on v0: forget (already gone)"}; !slices.Equal(got, want) {
			t.Errorf("changes %q, want %q", got, want)
		}
		// An admin adding that address by hand later keeps it.
		a, _ := netlink.ParseAddr("10.0.0.7/24")
		if err := netlink.AddrAdd(link(t, "v0"), a); err != nil {
			t.Fatal(err)
		}
		if got := mustRun(t, d, mustJSON(t, in)); len(got) != 0 {
			t.Errorf("changes %q, want none", got)
		}
		if !addrs(t, "v0")["10.0.0.7/24"] {
			t.Error("admin's address removed")
		}
	})
}

func TestNetworkInvalidInputsArePermanent(t *testing.T) {
	d := NewNetworkDriver(t.TempDir())
	for name, in := range map[string]string{
		"bad cidr":        `{"links":[{"name":"v0","addresses":["10.0.0.300/24"]}]}`,
		"no prefix":       `{"links":[{"name":"v0","addresses":["10.0.0.3"]}]}`,
		"bad mac":         `{"links":[{"name":"v0","mac":"zz"}]}`,
		"no name nor mac": `{"links":[{"up":true}]}`,
		"twice":           `{"links":[{"name":"v0"},{"name":"v0"}]}`,
		"mtu":             `{"links":[{"name":"v0","mtu":-1}]}`,
		"unknown field":   `{"links":[{"name":"v0","mtus":9000}]}`,
		"host bits":       `{"routes":[{"dst":"10.1.0.1/16","gateway":"10.0.0.1"}]}`,
		"bad gateway":     `{"routes":[{"dst":"10.1.0.0/16","gateway":"10.0.0"}]}`,
		"family":          `{"routes":[{"dst":"10.1.0.0/16","gateway":"fd00::1"}]}`,
		"no gw nor dev":   `{"routes":[{"dst":"10.1.0.0/16"}]}`,
		"route twice":     `{"routes":[{"dst":"default","gateway":"10.0.0.1"},{"dst":"0.0.0.0/0","dev":"v0"}]}`,
		"not json":        `{"links":`,
	} {
		_, err := d.Diff(context.Background(), json.RawMessage(in))
		if !driver.IsPermanent(err) {
			t.Errorf("%s: err %v, want permanent", name, err)
		}
	}
	if _, err := NewNetworkDriver("").Diff(context.Background(), nil); !driver.IsPermanent(err) {
		t.Errorf("no state dir: err %v, want permanent", err)
	}
}

func TestStateIsWrittenAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := &stateStore{path: filepath.Join(dir, ownedFile)}
	for _, cidr := range []string{"10.0.0.6/24", "10.0.0.5/24", "10.0.0.5/24"} {
		if err := s.update(func(o *ownedState) { o.Addresses = append(o.Addresses, addrKey{"v0", cidr}) }); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	if want := []addrKey{{"v0", "10.0.0.5/24"}, {"v0", "10.0.0.6/24"}}; !slices.Equal(got.Addresses, want) || got.Version != 1 {
		t.Errorf("state %+v, want addresses %v", got, want)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("state dir holds %d entries, want just the state file", len(ents))
	}
	if err := os.WriteFile(s.path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.load(); !driver.IsPermanent(err) {
		t.Errorf("corrupt state: err %v, want permanent", err)
	}
}
