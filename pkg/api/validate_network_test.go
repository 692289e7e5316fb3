package api

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidateHostNetwork covers the rules for bonds, bridges, VLANs, macvlans, vxlans,
// pools, policy rules, sysctls and hugepages, on compute-0 of the example site.
func TestValidateHostNetwork(t *testing.T) {
	type manifest = *Manifest
	c0 := func(m manifest) *HostSpec { return &host(m, "compute-0").Spec }
	add := func(m manifest, ifs ...Interface) { c0(m).Interfaces = append(c0(m).Interfaces, ifs...) }
	mgmt := func(m manifest) *Network { return &m.Site.Spec.Networks[1] }
	node := func(n int) *int { return &n }
	const (
		h0   = "hosts[compute-0].spec"
		if0  = h0 + ".interfaces[0]"
		if1  = h0 + ".interfaces[1]"
		if2  = h0 + ".interfaces[2]"
		if3  = h0 + ".interfaces[3]"
		nets = "site.spec.networks"
	)
	eno3 := Interface{Name: "eno3"}
	tests := []struct {
		name   string
		mutate func(m manifest)
		path   string
		msg    string
	}{
		// Types and their options.
		{"type invalid", func(m manifest) { c0(m).Interfaces[1].Type = "team" }, if1 + ".type", `"team" is not valid; valid values are ethernet, bond, bridge, vlan, macvlan, vxlan`},
		{"members on ethernet", func(m manifest) { c0(m).Interfaces[1].Members = []string{"eno1"} }, if1 + ".members", "only a bond or a bridge has members"},
		{"bond without members", func(m manifest) { add(m, Interface{Name: "bond0", Type: "bond"}) }, if2 + ".members", "required: the interfaces to bond"},
		{"parent on bridge", func(m manifest) { add(m, eno3, Interface{Name: "br0", Type: "bridge", Parent: "eno3"}) }, if3 + ".parent", "only a vlan, macvlan or vxlan has a parent"},
		{"vlan needs parent", func(m manifest) { add(m, Interface{Name: "v5", Type: "vlan", VLAN: 5}) }, if2 + ".parent", "required: the interface a vlan sits on"},
		{"vlan id out of range", func(m manifest) { add(m, Interface{Name: "eno1.5", Type: "vlan", Parent: "eno1", VLAN: 5000}) }, if2 + ".vlan", "5000 is out of range; valid VLAN IDs are 1..4094"},
		{"vlan id on ethernet", func(m manifest) { c0(m).Interfaces[1].VLAN = 7 }, if1 + ".vlan", `only a vlan interface has a vlan id; add an interface of type vlan with parent "eno2"`},
		{"vlan id from nowhere", func(m manifest) { add(m, Interface{Name: "eno1.x", Type: "vlan", Parent: "eno1"}) }, if2 + ".vlan", "required: the 802.1q ID"},
		{"vlan id differs from network", func(m manifest) {
			add(m, Interface{Name: "eno1.9", Type: "vlan", Parent: "eno1", VLAN: 9, Networks: []string{"oam"}})
			m.Site.Spec.Networks[0].VLAN = 10
		}, if2 + ".vlan", `9 differs from vlan 10 of network "oam" that this interface carries`},
		{"vlan twice on a parent", func(m manifest) {
			add(m, Interface{Name: "a", Type: "vlan", Parent: "eno1", VLAN: 9}, Interface{Name: "b", Type: "vlan", Parent: "eno1", VLAN: 9})
		}, if3 + ".vlan", `vlan 9 on "eno1" is already interfaces[2]`},
		{"bond options on ethernet", func(m manifest) { c0(m).Interfaces[1].Bond = &BondOptions{} }, if1 + ".bond", "only a bond has bond options"},
		{"bond mode invalid", func(m manifest) {
			add(m, eno3, Interface{Name: "bond0", Type: "bond", Members: []string{"eno3"}, Bond: &BondOptions{Mode: "balance-rr"}})
		}, if3 + ".bond.mode", `"balance-rr" is not valid; valid values are 802.3ad, active-backup, balance-xor`},
		{"lacp rate off 802.3ad", func(m manifest) {
			add(m, eno3, Interface{Name: "bond0", Type: "bond", Members: []string{"eno3"}, Bond: &BondOptions{Mode: "active-backup", LACPRate: "fast"}})
		}, if3 + ".bond.lacpRate", "only mode 802.3ad uses lacpRate; this bond is active-backup"},
		{"hash policy invalid", func(m manifest) {
			add(m, eno3, Interface{Name: "bond0", Type: "bond", Members: []string{"eno3"}, Bond: &BondOptions{HashPolicy: "layer4"}})
		}, if3 + ".bond.hashPolicy", `"layer4" is not valid; valid values are layer2, layer2+3, layer3+4`},
		{"macvlan mode invalid", func(m manifest) {
			add(m, Interface{Name: "mv0", Type: "macvlan", Parent: "eno1", Macvlan: &MacvlanOptions{Mode: "source"}})
		}, if2 + ".macvlan.mode", `"source" is not valid; valid values are bridge, vepa, private, passthru`},
		{"vxlan without options", func(m manifest) { add(m, Interface{Name: "vx0", Type: "vxlan"}) }, if2 + ".vxlan", "required: the tunnel's options"},
		{"vxlan vni out of range", func(m manifest) { add(m, Interface{Name: "vx0", Type: "vxlan", VXLAN: &VXLANOptions{VNI: 1 << 24}}) }, if2 + ".vxlan.vni", "16777216 is out of range; valid VNIs are 1..16777215"},
		{"vxlan families", func(m manifest) {
			add(m, Interface{Name: "vx0", Type: "vxlan", VXLAN: &VXLANOptions{VNI: 5, Local: "10.0.0.21", Remote: "fd00::1"}})
		}, if2 + ".vxlan.remote", "fd00::1 is IPv6 but local 10.0.0.21 is IPv4"},

		// References between interfaces.
		{"member unknown", func(m manifest) { add(m, Interface{Name: "bond0", Type: "bond", Members: []string{"eno9"}}) }, if2 + ".members[0]",
			`no interface named "eno9" on this host; declare it under interfaces`},
		{"member twice", func(m manifest) {
			add(m, eno3, Interface{Name: "br0", Type: "bridge", Members: []string{"eno3"}}, Interface{Name: "br1", Type: "bridge", Members: []string{"eno3"}})
		}, h0 + ".interfaces[4].members[0]", `"eno3" is already a member of "br0"`},
		{"bond of a bridge", func(m manifest) {
			add(m, Interface{Name: "br0", Type: "bridge"}, Interface{Name: "bond0", Type: "bond", Members: []string{"br0"}})
		}, if3 + ".members[0]", `"br0" is a bridge; a bond's members must be ethernet interfaces`},
		{"member with addresses", func(m manifest) { add(m, Interface{Name: "br0", Type: "bridge", Members: []string{"eno2"}}) }, if1 + ".addresses",
			`"eno2" is a member of "br0"; put its addresses on "br0"`},
		{"parent unknown", func(m manifest) { add(m, Interface{Name: "mv0", Type: "macvlan", Parent: "eno7"}) }, if2 + ".parent", `no interface named "eno7"`},
		{"parent is a bond member", func(m manifest) {
			add(m, eno3, Interface{Name: "bond0", Type: "bond", Members: []string{"eno3"}}, Interface{Name: "mv0", Type: "macvlan", Parent: "eno3"})
		}, h0 + ".interfaces[4].parent", `"eno3" is a member of bond "bond0"; use the bond as the parent`},
		{"cycle", func(m manifest) {
			add(m, Interface{Name: "a", Type: "macvlan", Parent: "b"}, Interface{Name: "b", Type: "macvlan", Parent: "a"})
		}, if2, "interfaces form a cycle through their parents and members: a -> b -> a"},

		// MTUs.
		{"mtu above a member's", func(m manifest) {
			add(m, Interface{Name: "eno3", MTU: 1500}, Interface{Name: "br0", Type: "bridge", Members: []string{"eno3"}, MTU: 9000})
		}, if3 + ".mtu", `9000 is above the mtu of member "eno3" (1500); raise "eno3"'s mtu or lower this one`},
		{"mtu above the parent's", func(m manifest) {
			add(m, Interface{Name: "eno1.7", Type: "vlan", Parent: "eno1", VLAN: 7, MTU: 9000})
		}, if2 + ".mtu", `9000 is above the mtu of parent "eno1" (1500)`},
		{"bond member mtu", func(m manifest) {
			add(m, Interface{Name: "eno3", MTU: 1500}, Interface{Name: "bond0", Type: "bond", Members: []string{"eno3"}, MTU: 9000})
		}, if2 + ".mtu", `1500 differs from the mtu of bond "bond0" (9000); a bond sets its members' mtu`},
		{"mtu below a network's", func(m manifest) { c0(m).Interfaces[1].MTU = 1500 }, if1 + ".mtu",
			`1500 is below the mtu of network "cluster" (9000) that this interface carries`},

		// Networks on interfaces and pools.
		{"network carried twice", func(m manifest) { add(m, Interface{Name: "eno3", Networks: []string{"mgmt"}}) }, if2 + ".networks[0]",
			`network "mgmt" is already carried by interfaces[0]; a host carries a mgmt network on one interface`},
		{"allocate without pool", func(m manifest) { c0(m).Interfaces[1].Allocate = true }, if1 + ".allocate",
			"none of the networks this interface carries has a pool"},
		{"pool outside cidr", func(m manifest) { mgmt(m).Pool = &AddressPool{Start: "10.0.1.10", End: "10.0.0.20"} }, nets + "[mgmt].pool.start",
			"10.0.1.10 is outside the network's cidr 10.0.0.0/24"},
		{"pool reversed", func(m manifest) { mgmt(m).Pool = &AddressPool{Start: "10.0.0.20", End: "10.0.0.10"} }, nets + "[mgmt].pool.end",
			"10.0.0.10 is below start 10.0.0.20"},
		{"pool end missing", func(m manifest) { mgmt(m).Pool = &AddressPool{Start: "10.0.0.20"} }, nets + "[mgmt].pool.end", "required"},
		{"pool too small", func(m manifest) {
			m.Site.Spec.Networks = append(m.Site.Spec.Networks, Network{Name: "stor", Role: "other", CIDR: "10.0.5.0/24",
				Pool: &AddressPool{Start: "10.0.5.9", End: "10.0.5.12"}})
			for i := range m.Hosts {
				m.Hosts[i].Spec.Interfaces = append(m.Hosts[i].Spec.Interfaces, Interface{Name: "eno3", Networks: []string{"stor"}, Allocate: true})
			}
			// A static address inside the pool is never handed out.
			c0(m).Interfaces[2].Allocate, c0(m).Interfaces[2].Addresses = false, []string{"10.0.5.10/24"}
		}, nets + "[stor].pool", "3 free addresses for 5 interfaces that allocate from it (ctl-0/eno3, ctl-1/eno3, wit-0/eno3, compute-1/eno3, compute-2/eno3); widen the pool"},

		// Policy rules.
		{"rule priority missing", func(m manifest) { c0(m).Rules = []Rule{{Table: 10}} }, h0 + ".rules[0].priority", "required: the rule's priority, 1..32765"},
		{"rule priority reserved", func(m manifest) { c0(m).Rules = []Rule{{Priority: 32766, Table: 10}} }, h0 + ".rules[0].priority", "32766 is out of range"},
		{"rule table missing", func(m manifest) { c0(m).Rules = []Rule{{Priority: 100}} }, h0 + ".rules[0].table", "required: the routing table"},
		{"rule from invalid", func(m manifest) { c0(m).Rules = []Rule{{Priority: 100, Table: 10, From: "10.0.1.1/24"}} }, h0 + ".rules[0].from", "use 10.0.1.0/24"},
		{"rule families", func(m manifest) {
			c0(m).Rules = []Rule{{Priority: 100, Table: 10, From: "10.0.1.0/24", To: "fd00::/8"}}
		}, h0 + ".rules[0].to",
			"fd00::/8 is IPv6 but from (10.0.1.0/24) is IPv4"},
		{"rule iif invalid", func(m manifest) { c0(m).Rules = []Rule{{Priority: 100, Table: 10, IIF: "a/b"}} }, h0 + ".rules[0].iif", `"a/b" is not a valid interface name`},
		{"rule twice", func(m manifest) { c0(m).Rules = []Rule{{Priority: 100, Table: 10}, {Priority: 100, Table: 10}} }, h0 + ".rules[1]", "the same rule as rules[0]"},

		// Kernel settings.
		{"sysctl name", func(m manifest) { c0(m).Sysctls = map[string]string{"net.ipv4/../../x": "1"} }, h0 + `.sysctls["net.ipv4/../../x"]`, "is not a sysctl name"},
		{"sysctl tree", func(m manifest) { c0(m).Sysctls = map[string]string{"proc.x": "1"} }, h0 + `.sysctls["proc.x"]`, "starting with one of abi, crypto"},
		{"sysctl value", func(m manifest) { c0(m).Sysctls = map[string]string{"net.ipv4.ip_forward": " "} }, h0 + `.sysctls["net.ipv4.ip_forward"]`, "required: the value"},
		{"sysctl newline", func(m manifest) { c0(m).Sysctls = map[string]string{"vm.swappiness": "1\n2"} }, h0 + `.sysctls["vm.swappiness"]`, "must be one line"},
		{"hugepage size", func(m manifest) { c0(m).Hugepages = []Hugepages{{Size: "4Mi", Count: 1}} }, h0 + ".hugepages[0].size", `"4Mi" is not a supported page size`},
		{"hugepage count", func(m manifest) { c0(m).Hugepages = []Hugepages{{Size: "2Mi", Count: -1}} }, h0 + ".hugepages[0].count", "-1 is below 0"},
		{"hugepage node", func(m manifest) { c0(m).Hugepages = []Hugepages{{Size: "1Gi", Count: 1, Node: node(-2)}} }, h0 + ".hugepages[0].node", "-2 is out of range"},
		{"hugepages twice", func(m manifest) { c0(m).Hugepages = []Hugepages{{Size: "2Mi", Count: 1}, {Size: "2048kB", Count: 2}} }, h0 + ".hugepages[1]",
			"the same size and node as hugepages[0]"},
		{"hugepages mixed", func(m manifest) {
			c0(m).Hugepages = []Hugepages{{Size: "2Mi", Count: 1, Node: node(0)}, {Size: "2Mi", Count: 2}}
		}, h0 + ".hugepages[1].node", "2Mi pages are reserved both per node and system-wide (hugepages[0])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := example(t)
			tt.mutate(m)
			errs := networkErrors(m.Validate("site.yaml"))
			if !findError(errs, tt.path, tt.msg) {
				t.Fatalf("want %s: ...%s...; got:\n%v", tt.path, tt.msg, errs)
			}
			if len(errs) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			m.Default()
			if got := networkErrors(m.Validate("site.yaml")); len(got) != len(errs) {
				t.Errorf("after Default: %d errors, before %d:\n%v", len(got), len(errs), got)
			}
		})
	}
}

// A host using every feature validates clean, and Default fills the type options.
func TestValidateHostNetworkFull(t *testing.T) {
	m := example(t)
	m.Site.Spec.Networks = append(m.Site.Spec.Networks,
		Network{Name: "stor", Role: "other", CIDR: "10.0.5.0/24", VLAN: 205, Pool: &AddressPool{Start: "10.0.5.10", End: "10.0.5.200"}},
		Network{Name: "tun", Role: "other", CIDR: "10.0.6.0/24", MTU: 1450})
	for i := range m.Hosts {
		h := &m.Hosts[i].Spec
		n := 30 + i
		h.Interfaces = append(h.Interfaces,
			Interface{Name: "eno3", MTU: 9000},
			Interface{Name: "eno4"},
			Interface{Name: "bond0", Type: "bond", Members: []string{"eno3", "eno4"}, MTU: 9000, Bond: &BondOptions{LACPRate: "fast", HashPolicy: "layer3+4"}},
			Interface{Name: "bond0.205", Type: "vlan", Parent: "bond0", Networks: []string{"stor"}, Allocate: true},
			Interface{Name: "br-ex", Type: "bridge", MTU: 1500},
			Interface{Name: "mv0", Type: "macvlan", Parent: "eno1", MAC: fmt.Sprintf("02:00:00:00:00:%02x", n)},
			Interface{Name: "vx0", Type: "vxlan", Parent: "bond0", Networks: []string{"tun"}, Addresses: []string{fmt.Sprintf("10.0.6.%d/24", n)},
				VXLAN: &VXLANOptions{VNI: 42, Remote: "239.1.1.1"}},
		)
		h.Rules = []Rule{{Priority: 1000, From: "10.0.5.0/24", Table: 205}, {Priority: 1001, IIF: "br-ex", FWMark: 7, Table: 10}}
		h.Sysctls = map[string]string{"net.ipv4.conf.bond0/205.rp_filter": "2", "vm.nr_overcommit_hugepages": "0"}
		h.Hugepages = []Hugepages{{Size: "1Gi", Count: 4, Node: new(int)}, {Size: "2Mi", Count: 512}}
	}
	if errs := networkErrors(m.Validate("site.yaml")); len(errs) > 0 {
		t.Fatalf("errors:\n%v", errs)
	}
	m.Default()
	if errs := networkErrors(m.Validate("site.yaml")); len(errs) > 0 {
		t.Fatalf("errors after Default:\n%v", errs)
	}
	ifs := host(m, "compute-0").Spec.Interfaces
	if b := ifs[4].Bond; ifs[2].Type != "ethernet" || b.Mode != "802.3ad" || b.LACPRate != "fast" || b.MIIMon != 100 {
		t.Errorf("defaults: type %q bond %+v", ifs[2].Type, b)
	}
	if ifs[7].Macvlan.Mode != "bridge" || ifs[8].VXLAN.Port != 4789 {
		t.Errorf("defaults: macvlan %+v vxlan %+v", ifs[7].Macvlan, ifs[8].VXLAN)
	}
	if p, ok := SysctlPath("net.ipv4.conf.bond0/205.rp_filter"); !ok || p != "net/ipv4/conf/bond0.205/rp_filter" {
		t.Errorf("SysctlPath = %q %v", p, ok)
	}
}

// networkErrors keeps the errors about hosts and site networks: other areas'
// rules on the shared example are not this test's business.
func networkErrors(errs ErrorList) ErrorList {
	var out ErrorList
	for _, e := range errs {
		if strings.HasPrefix(e.Path, "hosts[") || strings.HasPrefix(e.Path, "site.spec.networks") {
			out = append(out, e)
		}
	}
	return out
}

// The network fields decode strictly from YAML, with paths on unknown fields.
func TestDecodeHostNetwork(t *testing.T) {
	const doc = `apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: h1}
spec:
  roles: [worker]
  managementAddress: 10.0.0.5
  interfaces:
  - {name: eno1}
  - {name: bond0, type: bond, members: [eno1], bond: {mode: active-backup, miimon: 50}}
  - {name: vx0, type: vxlan, vxlan: {vni: 7, remote: 10.0.0.9}}
  rules:
  - {priority: 10, fwmark: 3, table: 7}
  sysctls: {net.ipv4.ip_forward: "1"}
  hugepages:
  - {size: 1Gi, count: 2, node: 1}
`
	m, err := Decode("h.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Hosts[0].Spec
	if s.Interfaces[1].Bond.MIIMon != 50 || s.Interfaces[2].VXLAN.VNI != 7 || s.Rules[0].FWMark != 3 ||
		s.Sysctls["net.ipv4.ip_forward"] != "1" || *s.Hugepages[0].Node != 1 {
		t.Errorf("decoded %+v", s)
	}
	if errs := m.Validate(""); len(errs) > 0 {
		t.Errorf("errors:\n%v", errs)
	}
	_, err = Decode("h.yaml", []byte(strings.Replace(doc, "miimon: 50", "miimon: 50, lacp: fast", 1)))
	if err == nil || !strings.Contains(err.Error(), "hosts[h1].spec.interfaces[1].bond.lacp") {
		t.Errorf("unknown field: %v", err)
	}
}
