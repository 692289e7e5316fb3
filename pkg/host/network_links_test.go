package host

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// virtualInputs is a bridge over v1, a macvlan and a vxlan on v0, each with an
// address, a route through the bridge and two policy rules.
func virtualInputs() hostspec.NetworkInputs {
	return hostspec.NetworkInputs{
		Links: []hostspec.LinkSpec{
			{Name: "v0", Up: true, MTU: 9000, Addresses: []string{"10.0.0.5/24"}},
			{Name: "v1", Up: true, MTU: 9000, Master: "br0"},
			{Name: "br0", Kind: hostspec.LinkBridge, Up: true, MTU: 9000, Addresses: []string{"10.1.0.5/24", "fd01::5/64"}},
			{Name: "mv0", Kind: hostspec.LinkMacvlan, Parent: "v0", Macvlan: "bridge", MAC: "02:00:00:00:0a:01", Up: true, Addresses: []string{"10.2.0.5/24"}},
			{Name: "vx0", Kind: hostspec.LinkVXLAN, Parent: "v0", VXLAN: &hostspec.VXLANSpec{VNI: 42, Local: "10.0.0.5", Remote: "10.0.0.6", Port: 4789}, Up: true, MTU: 8950},
		},
		Routes: []hostspec.RouteSpec{{Dst: "10.3.0.0/16", Gateway: "10.1.0.1", Table: 100}},
		Rules: []hostspec.RuleSpec{
			{Priority: 1000, From: "10.1.0.0/24", Table: 100},
			{Priority: 1001, IIF: "br0", FWMark: 7, Table: 100},
		},
	}
}

func TestNetworkCreatesBridgeMacvlanVXLANAndRules(t *testing.T) {
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		d := NewNetworkDriver(dir)
		in := mustJSON(t, virtualInputs())
		got := mustRun(t, d, in)
		wantChanges(t, got,
			"link br0: create bridge", "link mv0: create macvlan bridge on v0", "link vx0: create vxlan 42 remote 10.0.0.6 dev v0",
			"link v1: master none -> br0",
			"link v0: mtu 1500 -> 9000", "link v1: mtu 1500 -> 9000", "link br0: set mtu 9000", "link vx0: set mtu 8950",
			"link br0: set up", "link mv0: set up", "link vx0: set up",
			"address 10.1.0.5/24 on br0: add", "address fd01::5/64 on br0: add", "address 10.2.0.5/24 on mv0: add",
			"route 10.3.0.0/16 via 10.1.0.1 table 100: add",
			"rule 1000 from 10.1.0.0/24 lookup 100: add", "rule 1001 iif br0 fwmark 7 lookup 100: add")
		// Lower links are created before the links on them, and before members join.
		if i, j := slices.Index(got, "link vx0: create vxlan 42 remote 10.0.0.6 dev v0"), slices.Index(got, "link v1: master none -> br0"); i > j {
			t.Errorf("create after member: %q", got)
		}

		br, v1, mv, vx := link(t, "br0"), link(t, "v1"), link(t, "mv0"), link(t, "vx0")
		if br.Type() != "bridge" || br.Attrs().MTU != 9000 || br.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("br0 %s mtu %d flags %v", br.Type(), br.Attrs().MTU, br.Attrs().Flags)
		}
		if v1.Attrs().MasterIndex != br.Attrs().Index {
			t.Errorf("v1 master %d, want br0 (%d)", v1.Attrs().MasterIndex, br.Attrs().Index)
		}
		if m, ok := mv.(*netlink.Macvlan); !ok || m.Mode != netlink.MACVLAN_MODE_BRIDGE || m.ParentIndex != link(t, "v0").Attrs().Index ||
			m.HardwareAddr.String() != "02:00:00:00:0a:01" {
			t.Errorf("mv0 %+v", mv)
		}
		if x, ok := vx.(*netlink.Vxlan); !ok || x.VxlanId != 42 || x.Port != 4789 || toAddr(x.Group).String() != "10.0.0.6" ||
			toAddr(x.SrcAddr).String() != "10.0.0.5" || x.VtepDevIndex != link(t, "v0").Attrs().Index || x.MTU != 8950 {
			t.Errorf("vx0 %+v", vx)
		}
		if a := addrs(t, "br0"); !a["10.1.0.5/24"] || !a["fd01::5/64"] {
			t.Errorf("br0 addresses %v", a)
		}
		if !addrs(t, "mv0")["10.2.0.5/24"] {
			t.Error("mv0 address missing")
		}
		if r, ok := hasRoute(t, "10.3.0.0/16", 100, 0); !ok || r.LinkIndex != br.Attrs().Index {
			t.Errorf("route %+v %v", r, ok)
		}
		rules := ruleKeys(t)
		for _, k := range []ruleKey{
			{Family: unix.AF_INET, Priority: 1000, From: "10.1.0.0/24", Table: 100},
			{Family: unix.AF_INET, Priority: 1001, IIF: "br0", Mark: 7, Table: 100},
		} {
			if !rules[k] {
				t.Errorf("rule %+v missing from %v", k, rules)
			}
		}
		st := readOwned(t, dir)
		if len(st.Links) != 3 || len(st.Members) != 1 || len(st.Rules) != 2 {
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

func TestNetworkRemovesCreatedLinksOnly(t *testing.T) {
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		addVeth(t, "v2", "v3", "")
		// Someone else's bridge with one of our links in it stays as it is.
		other := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "brx"}}
		if err := netlink.LinkAdd(other); err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetMaster(link(t, "v2"), other); err != nil {
			t.Fatal(err)
		}
		d := NewNetworkDriver(dir)
		in := virtualInputs()
		in.Links = append(in.Links, hostspec.LinkSpec{Name: "v2", Up: true})
		mustRun(t, d, mustJSON(t, in))

		got := mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "v0", Up: true}, {Name: "v1", Up: true}, {Name: "v2", Up: true}}}))
		want := []string{
			"link v1: leave br0",
			"address 10.0.0.5/24 on v0: remove", "address 10.1.0.5/24 on br0: remove", "address 10.2.0.5/24 on mv0: remove", "address fd01::5/64 on br0: remove",
			"rule 1000 from 10.1.0.0/24 lookup 100: remove", "rule 1001 iif br0 fwmark 7 lookup 100: remove",
			"link mv0: delete macvlan (no longer declared)", "link vx0: delete vxlan (no longer declared)", "link br0: delete bridge (no longer declared)",
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("change %q missing from %q", w, got)
			}
		}
		for _, name := range []string{"br0", "mv0", "vx0"} {
			if _, err := netlink.LinkByName(name); err == nil {
				t.Errorf("%s still exists", name)
			}
		}
		if link(t, "v1").Attrs().MasterIndex != 0 {
			t.Error("v1 still has a master")
		}
		if link(t, "v2").Attrs().MasterIndex != link(t, "brx").Attrs().Index {
			t.Error("v2 was taken out of someone else's bridge")
		}
		if len(ruleKeys(t)) != 3 {
			t.Errorf("rules %v, want only the kernel's three", ruleKeys(t))
		}
		if st := readOwned(t, dir); len(st.Links)+len(st.Members)+len(st.Rules)+len(st.Addresses)+len(st.Routes) != 0 {
			t.Errorf("owned %+v", st)
		}
	})
}

func TestNetworkRepairsLinkDrift(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		d := NewNetworkDriver(t.TempDir())
		in := mustJSON(t, virtualInputs())
		mustRun(t, d, in)

		// By hand: lower the bridge MTU, take v1 out, drop an address and a rule,
		// delete the vxlan.
		br := link(t, "br0")
		a, _ := netlink.ParseAddr("10.2.0.5/24")
		for _, err := range []error{
			netlink.LinkSetMTU(br, 1400),
			netlink.LinkSetNoMaster(link(t, "v1")),
			netlink.AddrDel(link(t, "mv0"), a),
			netlink.RuleDel(ruleOf(ruleKey{Family: unix.AF_INET, Priority: 1000, From: "10.1.0.0/24", Table: 100})),
			netlink.LinkDel(link(t, "vx0")),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		drift, err := driver.Check(context.Background(), d, in)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"link vx0: create vxlan 42 remote 10.0.0.6 dev v0", "link v1: master none -> br0", "link br0: mtu 1400 -> 9000",
			"link vx0: set mtu 8950", "link vx0: set up", "address 10.2.0.5/24 on mv0: add", "rule 1000 from 10.1.0.0/24 lookup 100: add",
		}
		if !slices.Equal(drift, want) {
			t.Errorf("drift %q\nwant  %q", drift, want)
		}
		if got := mustRun(t, d, in); !slices.Equal(got, want) {
			t.Errorf("repair %q", got)
		}
		if link(t, "br0").Attrs().MTU != 9000 || link(t, "v1").Attrs().MasterIndex != link(t, "br0").Attrs().Index {
			t.Error("bridge not repaired")
		}
	})
}

func TestNetworkRecreatesOwnedLinkOnly(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		addVeth(t, "v2", "v3", "")
		dir := t.TempDir()
		d := NewNetworkDriver(dir)
		mv := func(parent, mode string) json.RawMessage {
			return mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{
				{Name: "v0", Up: true}, {Name: "v2", Up: true},
				{Name: "mv0", Kind: hostspec.LinkMacvlan, Parent: parent, Macvlan: mode, Up: true, Addresses: []string{"10.2.0.5/24"}},
			}})
		}
		mustRun(t, d, mv("v0", "bridge"))

		// The mode changes in place; the parent only by re-creating the link.
		if got := mustRun(t, d, mv("v0", "private")); !slices.Equal(got, []string{"link mv0: change mode bridge -> private"}) {
			t.Errorf("mode change %q", got)
		}
		got := mustRun(t, d, mv("v2", "private"))
		want := []string{"link mv0: re-create as macvlan private on v2 (parent v0 -> v2 cannot change in place)", "link mv0: set up", "address 10.2.0.5/24 on mv0: add"}
		if !slices.Equal(got, want) {
			t.Errorf("re-create %q, want %q", got, want)
		}
		if m := link(t, "mv0").(*netlink.Macvlan); m.ParentIndex != link(t, "v2").Attrs().Index || !addrs(t, "mv0")["10.2.0.5/24"] {
			t.Errorf("mv0 %+v", m)
		}
		if st := readOwned(t, dir); !slices.Equal(st.Links, []linkKey{{"mv0", "macvlan"}}) {
			t.Errorf("owned links %+v", st.Links)
		}
		// Another kind under the same name: re-created, and owned as the new kind.
		got = mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "mv0", Kind: hostspec.LinkBridge, Up: true}}}))
		if len(got) < 2 || got[0] != "link mv0: re-create as bridge (kind macvlan -> bridge cannot change in place)" {
			t.Errorf("kind change %q", got)
		}
		if st := readOwned(t, dir); !slices.Equal(st.Links, []linkKey{{"mv0", "bridge"}}) {
			t.Errorf("owned links after kind change %+v", st.Links)
		}
		// Declared as a link that exists, it is configured and not deleted.
		if got := mustRun(t, d, mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{{Name: "mv0", Up: true}}})); len(got) != 0 {
			t.Errorf("changes %q", got)
		}

		// A link of that name Plinth did not create is never replaced.
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "mv1"}}); err != nil {
			t.Fatal(err)
		}
		_, err := d.Diff(context.Background(), mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{
			{Name: "v0", Up: true}, {Name: "mv1", Kind: hostspec.LinkMacvlan, Parent: "v0", Macvlan: "bridge"},
		}}))
		if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "link mv1 exists as a bridge that differs (kind bridge -> macvlan), and Plinth did not create it") {
			t.Errorf("err %v", err)
		}
	})
}

// The kernel here may lack bonding and 802.1q: the plan is checked either way, and
// the apply runs for real where the kernel allows.
func TestNetworkBondAndVLAN(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		addVeth(t, "v2", "v3", "")
		d := NewNetworkDriver(t.TempDir())
		in := mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{
			{Name: "v0", Up: true, Master: "bond0"},
			{Name: "v2", Up: true, Master: "bond0"},
			{Name: "bond0", Kind: hostspec.LinkBond, Bond: &hostspec.BondSpec{Mode: "802.3ad", LACPRate: "fast", HashPolicy: "layer3+4", MIIMon: 100}, Up: true, MTU: 9000},
			{Name: "bond0.100", Kind: hostspec.LinkVLAN, Parent: "bond0", VLANID: 100, Up: true, MTU: 9000, Addresses: []string{"10.100.0.5/24"}},
		}})
		changes, err := d.Diff(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"link bond0: create bond 802.3ad (lacp fast, hash layer3+4)", "link bond0.100: create vlan 100 on bond0",
			"link v0: master none -> bond0", "link v2: master none -> bond0",
			"link bond0: set mtu 9000", "link bond0.100: set mtu 9000",
			"link v0: set up", "link v2: set up", "link bond0: set up", "link bond0.100: set up",
			"address 10.100.0.5/24 on bond0.100: add",
		}
		if got := summaries(changes); !slices.Equal(got, want) {
			t.Errorf("plan %q\nwant %q", got, want)
		}
		res := driver.Run(context.Background(), d, in)
		if !res.OK() && strings.Contains(res.Error, "no bond support") {
			if res.Retryable {
				t.Error("a missing kernel feature must not be retried")
			}
			t.Skipf("this kernel has no bonding: %s", res.Error)
		}
		if !res.OK() {
			t.Fatalf("run: %s", res.Error)
		}
		if b, ok := link(t, "bond0").(*netlink.Bond); !ok || b.Mode != netlink.BOND_MODE_802_3AD || b.LacpRate != netlink.BOND_LACP_RATE_FAST {
			t.Errorf("bond0 %+v", b)
		}
		if v, ok := link(t, "bond0.100").(*netlink.Vlan); !ok || v.VlanId != 100 {
			t.Errorf("bond0.100 %+v", v)
		}
		if again := mustRun(t, d, in); len(again) != 0 {
			t.Errorf("second run changed %q", again)
		}
	})
}

func TestNetworkVLANOnVeth(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "")
		d := NewNetworkDriver(t.TempDir())
		in := mustJSON(t, hostspec.NetworkInputs{Links: []hostspec.LinkSpec{
			{Name: "v0", Up: true},
			{Name: "v0.7", Kind: hostspec.LinkVLAN, Parent: "v0", VLANID: 7, Up: true, Addresses: []string{"10.7.0.5/24"}},
		}})
		res := driver.Run(context.Background(), d, in)
		if !res.OK() && strings.Contains(res.Error, "no vlan support") {
			t.Skipf("this kernel has no 802.1q: %s", res.Error)
		}
		if !res.OK() {
			t.Fatalf("run: %s", res.Error)
		}
		if v, ok := link(t, "v0.7").(*netlink.Vlan); !ok || v.VlanId != 7 || !addrs(t, "v0.7")["10.7.0.5/24"] {
			t.Errorf("v0.7 %+v", v)
		}
	})
}

func TestNetworkLinkInputsArePermanent(t *testing.T) {
	d := NewNetworkDriver(t.TempDir())
	for name, in := range map[string]string{
		"unknown kind":      `{"links":[{"name":"x","kind":"team"}]}`,
		"vlan without id":   `{"links":[{"name":"x","kind":"vlan","parent":"v0"}]}`,
		"vlan id range":     `{"links":[{"name":"x","kind":"vlan","parent":"v0","vlanId":4095}]}`,
		"macvlan no parent": `{"links":[{"name":"x","kind":"macvlan","macvlanMode":"bridge"}]}`,
		"macvlan mode":      `{"links":[{"name":"x","kind":"macvlan","parent":"v0","macvlanMode":"source"}]}`,
		"bond mode":         `{"links":[{"name":"x","kind":"bond","bond":{"mode":"balance-rr"}}]}`,
		"bond options":      `{"links":[{"name":"x","bond":{"mode":"802.3ad"}}]}`,
		"vni":               `{"links":[{"name":"x","kind":"vxlan","vxlan":{"vni":0}}]}`,
		"cycle":             `{"links":[{"name":"a","kind":"macvlan","parent":"b","macvlanMode":"bridge"},{"name":"b","kind":"macvlan","parent":"a","macvlanMode":"bridge"}]}`,
		"own master":        `{"links":[{"name":"a","master":"a"}]}`,
		"rule priority":     `{"rules":[{"priority":0,"table":10}]}`,
		"rule families":     `{"rules":[{"priority":5,"table":10,"from":"10.0.0.0/8","to":"fd00::/8"}]}`,
		"rule twice":        `{"rules":[{"priority":5,"table":10},{"priority":5,"table":10}]}`,
	} {
		if _, err := d.Diff(context.Background(), []byte(in)); !driver.IsPermanent(err) {
			t.Errorf("%s: err %v, want permanent", name, err)
		}
	}
}

func summaries(cs []driver.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Summary
	}
	return out
}

// ruleKeys lists the namespace's policy rules.
func ruleKeys(t testing.TB) map[ruleKey]bool {
	t.Helper()
	rs, err := netlink.RuleList(netlink.FAMILY_V4)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		t.Fatal(err)
	}
	out := map[ruleKey]bool{}
	for _, r := range rs {
		out[ruleKeyOf(r)] = true
	}
	return out
}
