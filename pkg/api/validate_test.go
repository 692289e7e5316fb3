package api

import (
	"fmt"
	"strings"
	"testing"
)

// host returns the example host with the given name.
func host(m *Manifest, name string) *Host {
	for i := range m.Hosts {
		if m.Hosts[i].Metadata.Name == name {
			return &m.Hosts[i]
		}
	}
	panic("test bug: no host " + name)
}

func TestValidateRules(t *testing.T) {
	type manifest = *Manifest
	c0 := func(m manifest) *HostSpec { return &host(m, "compute-0").Spec }
	k8s := func(m manifest) *KubernetesSpec { return m.Site.Spec.Kubernetes }
	net := func(m manifest, i int) *Network { return &m.Site.Spec.Networks[i] }
	addNet := func(m manifest, n Network) { m.Site.Spec.Networks = append(m.Site.Spec.Networks, n) }
	const (
		nets   = "site.spec.networks"
		kube   = "site.spec.kubernetes"
		h0     = "hosts[compute-0].spec"
		if1    = h0 + ".interfaces[1]"
		route1 = h0 + ".routes[1]"
	)
	tests := []struct {
		name   string
		mutate func(m manifest)
		doc    int
		path   string
		msg    string
		others int // further errors the mutation causes
	}{
		// Site metadata and controllers.
		{"site name invalid", func(m manifest) { m.Site.Metadata.Name = "Lab_1" }, 1, "site.metadata.name", `"Lab_1" is not a valid name: use lowercase`, 0},
		{"site name missing", func(m manifest) { m.Site.Metadata.Name = "" }, 1, "site.metadata.name", "required", 0},
		{"no controllers", func(m manifest) { m.Site.Spec.Controllers = nil }, 1, "site.spec.controllers", "required: name 1 or 2 controller hosts", 0},
		{"three controllers", func(m manifest) {
			m.Site.Spec.Controllers = append(m.Site.Spec.Controllers, "wit-0")
			m.Site.Spec.Witness = ""
		}, 1, "site.spec.controllers", "3 controllers listed; a site has 1 or 2", 0},
		{"controller twice", func(m manifest) { m.Site.Spec.Controllers[1] = "ctl-0" }, 1, "site.spec.controllers[1]", `"ctl-0" is listed twice`, 0},
		{"controller unknown", func(m manifest) { m.Site.Spec.Controllers[1] = "ctl-9" }, 1, "site.spec.controllers[1]", `no Host named "ctl-9"; valid controller hosts are ctl-0, ctl-1, wit-0`, 0},
		{"controller without role", func(m manifest) { m.Site.Spec.Controllers[1] = "compute-0" }, 1, "site.spec.controllers[1]", `Host "compute-0" does not have role controller`, 0},
		{"controller name invalid", func(m manifest) { m.Site.Spec.Controllers[0] = "Ctl 0" }, 1, "site.spec.controllers[0]", "not a valid name", 0},
		{"witness is controller", func(m manifest) { m.Site.Spec.Witness = "ctl-1" }, 1, "site.spec.witness", `"ctl-1" is also a controller; the witness must be a third host`, 0},
		{"witness unknown", func(m manifest) { m.Site.Spec.Witness = "wit-9" }, 1, "site.spec.witness", `no Host named "wit-9"`, 0},

		// Networks.
		{"network name invalid", func(m manifest) { addNet(m, Network{Name: "Extra", Role: "other", CIDR: "10.9.0.0/24"}) },
			1, nets + `["Extra"].name`, `"Extra" is not a valid name`, 0},
		{"network name duplicate", func(m manifest) { addNet(m, Network{Name: "mgmt", Role: "other", CIDR: "10.9.0.0/24"}) },
			1, nets + "[mgmt].name", `duplicate network name "mgmt"`, 0},
		{"network role invalid", func(m manifest) { net(m, 1).Role = "storage" }, 1, nets + "[mgmt].role",
			`"storage" is not valid; valid values are oam, mgmt, cluster-host, data, other`, 0},
		{"network role missing", func(m manifest) { net(m, 1).Role = "" }, 1, nets + "[mgmt].role", "required: valid values are oam, mgmt", 0},
		{"network cidr missing", func(m manifest) { net(m, 0).CIDR = "" }, 1, nets + "[oam].cidr", "required", 0},
		{"network cidr invalid", func(m manifest) { net(m, 0).CIDR = "192.168.10/24"; net(m, 0).Gateway = "" }, 1, nets + "[oam].cidr",
			`"192.168.10/24" is not a valid CIDR (want e.g. 10.0.0.0/24`, 0},
		{"network cidr not canonical", func(m manifest) { net(m, 0).CIDR = "192.168.10.1/24" }, 1, nets + "[oam].cidr",
			"192.168.10.1/24 has host bits set; use 192.168.10.0/24", 0},
		{"networks overlap", func(m manifest) { addNet(m, Network{Name: "extra", Role: "other", CIDR: "10.0.0.128/25"}) },
			1, nets + "[extra].cidr", `10.0.0.128/25 overlaps network "mgmt" (10.0.0.0/24)`, 0},
		{"gateway outside", func(m manifest) { net(m, 0).Gateway = "192.168.11.1" }, 1, nets + "[oam].gateway",
			"192.168.11.1 is outside the network's cidr 192.168.10.0/24", 0},
		{"gateway invalid", func(m manifest) { net(m, 0).Gateway = "gw" }, 1, nets + "[oam].gateway", `"gw" is not a valid IP address`, 0},
		{"vlan too high", func(m manifest) { net(m, 1).VLAN = 4095 }, 1, nets + "[mgmt].vlan", "4095 is out of range; valid VLAN IDs are 1..4094", 0},
		{"vlan negative", func(m manifest) { net(m, 1).VLAN = -1 }, 1, nets + "[mgmt].vlan", "-1 is out of range", 0},
		{"network mtu high", func(m manifest) { net(m, 1).MTU = 70000 }, 1, nets + "[mgmt].mtu", "70000 is above 65535", 0},
		{"network mtu low", func(m manifest) { net(m, 1).MTU = 40 }, 1, nets + "[mgmt].mtu", "40 is below 68", 0},

		// Policy.
		{"drift invalid", func(m manifest) { m.Site.Spec.Policy.Drift = "fix" }, 1, "site.spec.policy.drift", `"fix" is not valid; valid values are report, repair`, 0},
		{"driftCheckSeconds negative", func(m manifest) { m.Site.Spec.Policy.DriftCheckSeconds = -1 }, 1, "site.spec.policy.driftCheckSeconds", "-1 must be positive", 0},
		{"maxAttempts negative", func(m manifest) { m.Site.Spec.Policy.MaxAttempts = -1 }, 1, "site.spec.policy.maxAttempts", "must be positive", 0},
		{"retryBaseSeconds negative", func(m manifest) { m.Site.Spec.Policy.RetryBaseSeconds = -1 }, 1, "site.spec.policy.retryBaseSeconds", "must be positive", 0},
		{"retryMaxSeconds negative", func(m manifest) { m.Site.Spec.Policy.RetryMaxSeconds = -1 }, 1, "site.spec.policy.retryMaxSeconds", "must be positive", 0},
		{"retry base above max", func(m manifest) { m.Site.Spec.Policy.RetryBaseSeconds = 600 }, 1, "site.spec.policy.retryBaseSeconds", "600 is above retryMaxSeconds (300)", 0},

		// Kubernetes.
		{"version invalid", func(m manifest) { k8s(m).Version = "1.30" }, 1, kube + ".version", `"1.30" is not a valid version; use the form v1.37.2`, 0},
		{"podSubnet invalid", func(m manifest) { k8s(m).PodSubnet = "pods" }, 1, kube + ".podSubnet", `"pods" is not a valid CIDR`, 0},
		{"serviceSubnet not canonical", func(m manifest) { k8s(m).ServiceSubnet = "10.96.0.1/12" }, 1, kube + ".serviceSubnet", "has host bits set; use 10.96.0.0/12", 0},
		{"pod and service overlap", func(m manifest) { k8s(m).PodSubnet = "10.96.0.0/16" }, 1, kube + ".serviceSubnet", "10.96.0.0/12 overlaps podSubnet (10.96.0.0/16)", 0},
		{"podSubnet overlaps network", func(m manifest) { k8s(m).PodSubnet = "10.0.0.0/16" }, 1, kube + ".podSubnet", `10.0.0.0/16 overlaps network "mgmt" (10.0.0.0/24)`, 1},
		{"default serviceSubnet overlaps network", func(m manifest) { addNet(m, Network{Name: "extra", Role: "other", CIDR: "10.100.0.0/16"}) },
			1, kube + ".serviceSubnet", `10.96.0.0/12 overlaps network "extra" (10.100.0.0/16) (the default; set serviceSubnet to a free range)`, 0},
		{"vip invalid", func(m manifest) { k8s(m).ControlPlaneVIP = "vip" }, 1, kube + ".controlPlaneVIP", `"vip" is not a valid IP address`, 0},
		{"vip outside", func(m manifest) { k8s(m).ControlPlaneVIP = "192.168.10.5" }, 1, kube + ".controlPlaneVIP",
			"192.168.10.5 is not inside any mgmt or cluster-host network (mgmt 10.0.0.0/24, cluster 10.0.1.0/24)", 0},
		{"vip is a host's address", func(m manifest) { k8s(m).ControlPlaneVIP = "10.0.1.21" }, 1, kube + ".controlPlaneVIP",
			"10.0.1.21 is host compute-0's address (hosts[compute-0].spec.interfaces[eno2].addresses[0]); the VIP must be an address no host has", 0},
		{"vip is a management address", func(m manifest) { k8s(m).ControlPlaneVIP = "10.0.0.12" }, 1, kube + ".controlPlaneVIP",
			"10.0.0.12 is host ctl-1's address (hosts[ctl-1].spec.managementAddress)", 0},
		{"vip inside a pool", func(m manifest) {
			for i := range m.Site.Spec.Networks {
				if m.Site.Spec.Networks[i].Name == "cluster" {
					net(m, i).Pool = &AddressPool{Start: "10.0.1.5", End: "10.0.1.9"}
				}
			}
			k8s(m).ControlPlaneVIP = "10.0.1.7"
		},
			1, kube + ".controlPlaneVIP", `10.0.1.7 is inside the address pool of network "cluster" (10.0.1.5-10.0.1.9), so a host could be given it`, 0},
		{"vip without networks", func(m manifest) {
			m.Site.Spec.Networks = nil
			m.Hosts = nil
		}, 1, kube + ".controlPlaneVIP", "10.0.1.10 must be inside a mgmt or cluster-host network, and the site declares none", 0},

		// Ceph.
		{"pool duplicate", func(m manifest) { m.Site.Spec.Ceph.Pools[1].Name = "volumes" }, 1, "site.spec.ceph.pools[volumes].name", `duplicate pool name "volumes"`, 0},
		{"pool name missing", func(m manifest) { m.Site.Spec.Ceph.Pools[1].Name = "" }, 1, "site.spec.ceph.pools[1].name", "required", 0},
		{"pool size", func(m manifest) { m.Site.Spec.Ceph.Pools[0].Size = 11 }, 1, "site.spec.ceph.pools[volumes].size", "11 is out of range; valid sizes are 1..10", 0},

		// Host metadata, roles, management address.
		{"host name invalid", func(m manifest) { host(m, "compute-0").Metadata.Name = "Compute_0" }, 5, `hosts["Compute_0"].metadata.name`, "not a valid name", 0},
		{"host name missing", func(m manifest) { host(m, "compute-0").Metadata.Name = "" }, 5, "hosts[3].metadata.name", "required", 0},
		{"host name duplicate", func(m manifest) { host(m, "compute-2").Metadata.Name = "compute-1" }, 7, "hosts[compute-1].metadata.name",
			`duplicate host name "compute-1"; host names must be unique (first in document 6)`, 0},
		{"roles missing", func(m manifest) { c0(m).Roles = nil }, 5, h0 + ".roles", "required: at least one of controller, worker, storage", 0},
		{"role invalid", func(m manifest) { c0(m).Roles[1] = "compute" }, 5, h0 + ".roles[1]", `"compute" is not a valid role; valid roles are controller, worker, storage`, 0},
		{"node label key", func(m manifest) { c0(m).Labels = map[string]string{"rack/r1/x": "a"} }, 5, h0 + `.labels["rack/r1/x"]`, "not a valid label key", 0},
		{"node label value", func(m manifest) { c0(m).Labels = map[string]string{"rack": strings.Repeat("r", 64)} }, 5, h0 + ".labels[rack]", "not a valid label value", 0},
		{"node label value space", func(m manifest) { c0(m).Labels = map[string]string{"zone": "a b"} }, 5, h0 + ".labels[zone]", `"a b" is not a valid label value`, 0},
		{"metadata labels", func(m manifest) { host(m, "compute-0").Metadata.Labels = map[string]string{"-x": "1"} }, 5, `hosts[compute-0].metadata.labels["-x"]`, "not a valid label key", 0},
		{"too many labels", func(m manifest) {
			c0(m).Labels = map[string]string{}
			for i := range MaxLabels + 1 {
				c0(m).Labels[fmt.Sprintf("l%d", i)] = "x"
			}
		}, 5, h0 + ".labels", "65 Kubernetes node labels; at most 64 are allowed", 0},
		{"role duplicate", func(m manifest) { c0(m).Roles[1] = "worker" }, 5, h0 + ".roles[1]", `"worker" is listed twice`, 0},
		{"managementAddress missing", func(m manifest) { c0(m).ManagementAddress = "" }, 5, h0 + ".managementAddress", "required", 0},
		{"managementAddress invalid", func(m manifest) { c0(m).ManagementAddress = "10.0.0.300" }, 5, h0 + ".managementAddress", `"10.0.0.300" is not a valid IP address`, 0},
		{"managementAddress duplicate", func(m manifest) { c0(m).ManagementAddress = "10.0.0.11" }, 5, h0 + ".managementAddress",
			`10.0.0.11 is already the managementAddress of host "ctl-0"`, 0},

		// Interfaces.
		{"interface name missing", func(m manifest) { c0(m).Interfaces[1].Name = "" }, 5, if1 + ".name", "required", 0},
		{"interface name too long", func(m manifest) { c0(m).Interfaces[1].Name = "enp0s31f6-uplink0" }, 5, if1 + ".name", "at most 15 characters", 0},
		{"interface name duplicate", func(m manifest) { c0(m).Interfaces[1].Name = "eno1" }, 5, if1 + ".name", `duplicate interface name "eno1" (also interfaces[0])`, 0},
		{"mac invalid", func(m manifest) { c0(m).Interfaces[1].MAC = "52:54:00:zz" }, 5, if1 + ".mac", `"52:54:00:zz" is not a valid MAC address`, 0},
		{"interface mtu high", func(m manifest) { c0(m).Interfaces[1].MTU = 70000 }, 5, if1 + ".mtu", "70000 is above 65535", 0},
		{"interface mtu low", func(m manifest) { c0(m).Interfaces[1].MTU = 40 }, 5, if1 + ".mtu", "40 is below 68", 0},
		{"interface state", func(m manifest) { c0(m).Interfaces[1].State = "on" }, 5, if1 + ".state", `"on" is not valid; valid values are up, down`, 0},
		{"address invalid", func(m manifest) { c0(m).Interfaces[1].Addresses[0] = "10.0.1.21" }, 5, if1 + ".addresses[0]",
			`"10.0.1.21" is not a valid address in CIDR notation (want e.g. 10.0.0.5/24)`, 0},
		{"address duplicate", func(m manifest) { c0(m).Interfaces[1].Addresses[0] = "10.0.0.21/16" }, 5, if1 + ".addresses[0]",
			"10.0.0.21 is already assigned to interfaces[0]", 0},
		{"network unknown", func(m manifest) { c0(m).Interfaces[1].Networks[1] = "storage" }, 5, if1 + ".networks[1]",
			`no network named "storage" in the site; valid networks are oam, mgmt, cluster, data`, 0},
		{"network empty", func(m manifest) { c0(m).Interfaces[1].Networks[1] = "" }, 5, if1 + ".networks[1]", "required", 0},

		// Routes.
		{"route to missing", func(m manifest) { c0(m).Routes[1].To = "" }, 5, route1 + ".to", `required: "default" or a CIDR`, 0},
		{"route to invalid", func(m manifest) { c0(m).Routes[1].To = "anywhere" }, 5, route1 + ".to", `"anywhere" is not valid; use "default" or a CIDR`, 0},
		{"route to not canonical", func(m manifest) { c0(m).Routes[1].To = "172.16.0.1/12" }, 5, route1 + ".to", "use 172.16.0.0/12", 0},
		{"route via invalid", func(m manifest) { c0(m).Routes[1].Via = "10.0.1" }, 5, route1 + ".via", `"10.0.1" is not a valid IP address`, 0},
		{"route via family", func(m manifest) { c0(m).Routes[1].Via = "fd00:10::1" }, 5, route1 + ".via",
			"fd00:10::1 is IPv6 but to (172.16.0.0/12) is IPv4; the gateway must be of the same family", 0},
		{"route needs via or dev", func(m manifest) { c0(m).Routes[1].Via = "" }, 5, route1, "a route needs via or dev", 0},
		{"route metric negative", func(m manifest) { c0(m).Routes[1].Metric = -1 }, 5, route1 + ".metric", "-1 is below 0", 0},
		{"route mtu", func(m manifest) { c0(m).Routes[1].MTU = 70000 }, 5, route1 + ".mtu", "70000 is above 65535", 0},
		{"route table negative", func(m manifest) { c0(m).Routes[1].Table = -1 }, 5, route1 + ".table", "-1 is out of range; valid tables are 0..2147483647", 0},
		{"route table too high", func(m manifest) { c0(m).Routes[1].Table = 1 << 31 }, 5, route1 + ".table", "2147483648 is out of range", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := example(t)
			tt.mutate(m)
			errs := m.Validate("site.yaml")
			if !findError(errs, tt.path, tt.msg) {
				t.Fatalf("want %s: ...%s...; got:\n%v", tt.path, tt.msg, errs)
			}
			if len(errs) != 1+tt.others {
				t.Errorf("got %d errors, want %d:\n%v", len(errs), 1+tt.others, errs)
			}
			for _, e := range errs {
				if e.File != "site.yaml" || (e.Path == tt.path && e.Doc != tt.doc) {
					t.Errorf("error %q: want file site.yaml, document %d", e.Error(), tt.doc)
				}
			}
			// Defaulting must not hide or create problems.
			m.Default()
			if got := m.Validate("site.yaml"); len(got) != len(errs) {
				t.Errorf("after Default: %d errors, before %d:\n%v", len(got), len(errs), got)
			}
		})
	}
}

func TestValidateMultipleErrors(t *testing.T) {
	m := example(t)
	m.Site.Spec.Networks[1].MTU = 70000
	host(m, "ctl-1").Spec.Roles = nil
	host(m, "compute-0").Spec.Interfaces[1].MTU = 70000
	host(m, "compute-2").Spec.Routes[0].To = "nowhere"
	got := m.Validate("site.yaml").Error()
	want := strings.Join([]string{
		"site.yaml: document 1: site.spec.networks[mgmt].mtu: 70000 is above 65535",
		`site.yaml: document 1: site.spec.controllers[1]: Host "ctl-1" does not have role controller`,
		"site.yaml: document 3: hosts[ctl-1].spec.roles: required: at least one of controller, worker, storage",
		"site.yaml: document 5: hosts[compute-0].spec.interfaces[1].mtu: 70000 is above 65535",
		`site.yaml: document 7: hosts[compute-2].spec.routes[0].to: "nowhere" is not valid; use "default" or a CIDR such as 10.1.0.0/16`,
	}, "\n")
	// Order within the site is by check, so compare as sets of lines.
	if !sameLines(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func sameLines(a, b string) bool {
	as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(as) != len(bs) {
		return false
	}
	seen := map[string]int{}
	for _, l := range as {
		seen[l]++
	}
	for _, l := range bs {
		if seen[l]--; seen[l] < 0 {
			return false
		}
	}
	return true
}

// Cross-references are resolved only against what is present, so partial manifests
// (only a site, only hosts) validate on their own.
func TestValidatePartial(t *testing.T) {
	m := example(t)
	hostsOnly := &Manifest{Hosts: m.Hosts}
	if errs := hostsOnly.Validate(""); len(errs) > 0 {
		t.Errorf("hosts only:\n%v", errs)
	}
	siteOnly := &Manifest{Site: m.Site}
	siteOnly.Site.Spec.Controllers = []string{"elsewhere"}
	if errs := siteOnly.Validate(""); len(errs) > 0 {
		t.Errorf("site only:\n%v", errs)
	}
	// The coordinator combines the stored site with stored hosts.
	errs := ValidateSet("", m.Site, m.Hosts)
	if !findError(errs, "site.spec.controllers[0]", `no Host named "elsewhere"`) {
		t.Errorf("ValidateSet missed the dangling controller:\n%v", errs)
	}
	if (*Manifest)(nil).Validate("") != nil {
		t.Error("nil manifest has errors")
	}
}

func TestValidateSingleController(t *testing.T) {
	m := example(t)
	m.Site.Spec.Controllers = []string{"ctl-0"}
	m.Site.Spec.Witness = ""
	if errs := m.Validate(""); len(errs) > 0 {
		t.Errorf("one controller should be allowed:\n%v", errs)
	}
}
