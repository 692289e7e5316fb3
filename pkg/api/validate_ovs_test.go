package api

import (
	"strings"
	"testing"
)

const ovsSiteYAML = `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata: {name: s}
spec:
  controllers: [c1]
  ovs:
    dpdk: true
    socketMemMB: [1024, 1024]
    socketLimitMB: [2048, 2048]
    hugepageDir: /dev/hugepages
    pmdCPUs: "2-3,18-19"
    pmdPerNUMA: 1
    lcoreCPUs: "0"
    pmdMaxSleepUs: 100
    dpdkExtra: --no-telemetry
    vhostSockDir: vhost
    bridges:
    - name: br-phy
      ports:
      - {name: dpdk0, pci: "0000:03:00.0", rxQueues: 2, mtu: 9000}
      - name: bond0
        bond:
          mode: balance-tcp
          lacp: active
          lacpTime: fast
          members:
          - {name: dpdk1, pci: "0000:04:00.0"}
          - {name: dpdk2, devargs: "net_null0,no-rx=1"}
    - name: br-int
      datapath: netdev
      ports:
      - {name: vlan100, type: internal, vlan: 100}
      - {name: trunk0, trunks: [10, 20]}
`

// ovsSite decodes ovsSiteYAML, which must be valid.
func ovsSite(t *testing.T) *Manifest {
	t.Helper()
	m, err := Decode("site.yaml", []byte(ovsSiteYAML))
	if err != nil {
		t.Fatal(err)
	}
	if errs := m.Validate("site.yaml"); len(errs) > 0 {
		t.Fatalf("valid OVS site rejected:\n%v", errs)
	}
	return m
}

func TestValidateOVS(t *testing.T) {
	o := func(m *Manifest) *OVSSpec { return m.Site.Spec.OVS }
	port := func(m *Manifest, b, p int) *OVSPort { return &o(m).Bridges[b].Ports[p] }
	const (
		ovs  = "site.spec.ovs"
		phy  = ovs + ".bridges[br-phy]"
		p0   = phy + ".ports[dpdk0]"
		bond = phy + ".ports[bond0].bond"
		intb = ovs + ".bridges[br-int]"
	)
	tests := []struct {
		name   string
		mutate func(*Manifest)
		path   string
		msg    string
	}{
		{"socket mem range", func(m *Manifest) { o(m).SocketMemMB[1] = -1 }, ovs + ".socketMemMB[1]", "-1 is out of range"},
		{"limit length", func(m *Manifest) { o(m).SocketLimitMB = []int{2048} }, ovs + ".socketLimitMB", "has 1 values but socketMemMB has 2"},
		{"limit below mem", func(m *Manifest) { o(m).SocketLimitMB[0] = 512 }, ovs + ".socketLimitMB[0]", "512 is below socketMemMB[0] (1024)"},
		{"hugepage dir relative", func(m *Manifest) { o(m).HugepageDir = "huge" }, ovs + ".hugepageDir", "must be a clean absolute path"},
		{"bad cpulist", func(m *Manifest) { o(m).PMDCPUs = "2-a" }, ovs + ".pmdCPUs", `"2-a" is not valid: want a Linux cpulist`},
		{"lcore overlaps pmd", func(m *Manifest) { o(m).LcoreCPUs = "3" }, ovs + ".lcoreCPUs", "CPU 3 is also in pmdCPUs"},
		{"pmdPerNUMA without cpus", func(m *Manifest) { o(m).PMDCPUs = "" }, ovs + ".pmdPerNUMA", "needs pmdCPUs"},
		{"maxsleep range", func(m *Manifest) { o(m).PMDMaxSleepUs = 20000 }, ovs + ".pmdMaxSleepUs", "20000 is out of range; valid values are 0..10000"},
		{"vhost dir absolute", func(m *Manifest) { o(m).VhostSockDir = "/run/vhost" }, ovs + ".vhostSockDir", "must be relative"},
		{"bridge name", func(m *Manifest) { o(m).Bridges[0].Name = "br/phy" }, ovs + `.bridges["br/phy"].name`, "not a valid bridge name"},
		{"datapath", func(m *Manifest) { o(m).Bridges[1].Datapath = "kernel" }, intb + ".datapath", `"kernel" is not valid; valid values are netdev, system`},
		{"duplicate name across bridges", func(m *Manifest) { port(m, 1, 1).Name = "dpdk1" }, intb + ".ports[dpdk1].name", `"dpdk1" is already used at ` + bond + ".members[dpdk1].name"},
		{"pci format", func(m *Manifest) { port(m, 0, 0).PCI = "03:00.0" }, p0 + ".pci", "not a PCI address"},
		{"pci and devargs", func(m *Manifest) { port(m, 0, 0).Devargs = "net_null0" }, p0 + ".devargs", "set pci or devargs, not both"},
		{"dpdk needs an address", func(m *Manifest) { port(m, 0, 0).PCI = ""; port(m, 0, 0).Type = "dpdk" }, p0 + ".pci", "required: the NIC's PCI address"},
		{"dpdk mtu", func(m *Manifest) { port(m, 0, 0).MTU = 9800 }, p0 + ".mtu", "9800 is above 9710"},
		{"rxq on system", func(m *Manifest) { port(m, 1, 1).RxQueues = 2 }, intb + ".ports[trunk0].rxQueues", "only applies to type dpdk"},
		{"dpdk without dpdk", func(m *Manifest) { o(m).DPDK = false }, p0 + ".type", "a DPDK interface needs ovs dpdk: true"},
		{"dpdk on system datapath", func(m *Manifest) { o(m).Bridges[0].Datapath = "system" }, p0 + ".type", `needs a netdev bridge; "br-phy" has datapath system`},
		{"vlan range", func(m *Manifest) { port(m, 1, 0).VLAN = 4095 }, intb + ".ports[vlan100].vlan", "4095 is out of range"},
		{"vlan and trunks", func(m *Manifest) { port(m, 1, 1).VLAN = 5 }, intb + ".ports[trunk0].trunks", "set vlan (an access port) or trunks, not both"},
		{"trunk twice", func(m *Manifest) { port(m, 1, 1).Trunks = []int{10, 10} }, intb + ".ports[trunk0].trunks[1]", "10 is listed twice"},
		{"bond mode", func(m *Manifest) { port(m, 0, 1).Bond.Mode = "802.3ad" }, bond + ".mode", `"802.3ad" is not valid; valid values are active-backup, balance-slb, balance-tcp`},
		{"balance-tcp needs lacp", func(m *Manifest) { port(m, 0, 1).Bond.LACP = "off"; port(m, 0, 1).Bond.LACPTime = "" }, bond + ".lacp", "balance-tcp needs LACP"},
		{"lacp time without lacp", func(m *Manifest) { port(m, 0, 1).Bond.Mode = ""; port(m, 0, 1).Bond.LACP = "" }, bond + ".lacpTime", "only applies with lacp"},
		{"bond of one", func(m *Manifest) { port(m, 0, 1).Bond.Members = port(m, 0, 1).Bond.Members[:1] }, bond + ".members", "at least 2 members, got 1"},
		{"bond port settings", func(m *Manifest) { port(m, 0, 1).MTU = 9000 }, phy + ".ports[bond0]", "sets type, pci, devargs, rxQueues and mtu on its members"},
		{"internal member", func(m *Manifest) { port(m, 0, 1).Bond.Members[0] = OVSInterface{Name: "x", Type: "internal"} }, bond + ".members[x].type", "a bond member must be dpdk or system"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ovsSite(t)
			tt.mutate(m)
			errs := m.Validate("site.yaml")
			if !findError(errs, tt.path, tt.msg) {
				t.Errorf("want %s: %s\ngot:\n%v", tt.path, tt.msg, errs)
			}
		})
	}
}

func TestDecodeOVSStrict(t *testing.T) {
	_, err := Decode("site.yaml", []byte(strings.Replace(ovsSiteYAML, "rxQueues: 2", "rxqueues: 2", 1)))
	if err == nil || !strings.Contains(err.Error(), `unknown field "rxqueues"`) {
		t.Fatalf("misspelt field: %v", err)
	}
}

func TestValidateHostOVS(t *testing.T) {
	m := ovsSite(t)
	off := false
	check := func(h *HostOVS, path, msg string) {
		t.Helper()
		v := &validator{}
		v.hostOVS("hosts[c0].spec.ovs", m.Site, &HostSpec{OVS: h})
		if !findError(v.errs, path, msg) {
			t.Errorf("want %s: %s\ngot:\n%v", path, msg, v.errs)
		}
	}
	check(&HostOVS{OVSSettings: OVSSettings{PMDCPUs: "x"}}, "hosts[c0].spec.ovs.pmdCPUs", "is not valid")
	check(&HostOVS{DPDK: &off}, "hosts[c0].spec.ovs.dpdk", `the site's bridge "br-phy" has DPDK port "dpdk0"`)
	v := &validator{}
	v.hostOVS("p", m.Site, &HostSpec{OVS: &HostOVS{DPDK: &off, Bridges: []OVSBridge{{Name: "br-phy", Ports: []OVSPort{
		{OVSInterface: OVSInterface{Name: "dpdk0"}},
		{OVSInterface: OVSInterface{Name: "bond0"}, Bond: &OVSBond{Members: []OVSInterface{{Name: "eth1"}, {Name: "eth2"}}}},
	}}}}})
	if len(v.errs) > 0 {
		t.Errorf("a host that replaces every DPDK port may turn DPDK off: %v", v.errs)
	}
	m.Site.Spec.OVS = nil
	check(&HostOVS{}, "hosts[c0].spec.ovs", "the site declares no ovs")
}
