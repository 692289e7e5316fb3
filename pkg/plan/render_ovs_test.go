package plan

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

func ovsSite(o *api.OVSSpec) *api.Site {
	return &api.Site{
		Metadata: api.ObjectMeta{Name: "s"},
		Spec: api.SiteSpec{Controllers: []string{"c1"}, OVS: o, Networks: []api.Network{
			{Name: "mgmt", Role: api.NetworkMgmt, CIDR: "10.0.0.0/24"},
			{Name: "data", Role: api.NetworkData, CIDR: "10.1.0.0/24"},
		}},
	}
}

func ovsHost(name, network string, o *api.HostOVS) api.Host {
	h := api.Host{Metadata: api.ObjectMeta{Name: name}, Spec: api.HostSpec{Roles: []string{"worker"}, OVS: o}}
	h.Spec.Interfaces = []api.Interface{{Name: "eth1", Networks: []string{network}}}
	return h
}

func ovsSteps(t *testing.T, steps []Step) map[string]Step {
	t.Helper()
	out := map[string]Step{}
	for _, s := range steps {
		if s.Kind == ovsspec.KindDPDK || s.Kind == ovsspec.KindBridges {
			out[s.ID] = s
		}
	}
	return out
}

func TestRenderOVS(t *testing.T) {
	off := false
	site := &api.OVSSpec{
		DPDK: true,
		OVSSettings: api.OVSSettings{SocketMemMB: []int{1024, 1024}, PMDCPUs: "2,3", PMDMaxSleepUs: 100,
			HugepageDir: "/dev/hugepages"},
		Bridges: []api.OVSBridge{
			{Name: "br-phy", Ports: []api.OVSPort{
				{OVSInterface: api.OVSInterface{Name: "dpdk0", PCI: "0000:03:00.0", RxQueues: 2, MTU: 9000}},
				{OVSInterface: api.OVSInterface{Name: "bond0"}, Bond: &api.OVSBond{Mode: "balance-tcp", LACP: "active",
					Members: []api.OVSInterface{{Name: "dpdk1", PCI: "0000:04:00.0"}, {Name: "dpdk2", PCI: "0000:04:00.1"}}}},
			}},
			{Name: "br-int", Ports: []api.OVSPort{{OVSInterface: api.OVSInterface{Name: "vlan100", Type: "internal"}, VLAN: 100}}},
		},
	}
	hosts := []api.Host{
		ovsHost("compute-0", "data", nil),
		ovsHost("compute-1", "data", &api.HostOVS{
			OVSSettings: api.OVSSettings{PMDCPUs: "4-5"},
			Bridges: []api.OVSBridge{{Name: "br-phy", Ports: []api.OVSPort{
				{OVSInterface: api.OVSInterface{Name: "dpdk0", PCI: "0000:81:00.0"}},
				{OVSInterface: api.OVSInterface{Name: "eth9"}},
			}}},
		}),
		ovsHost("gateway-0", "mgmt", &api.HostOVS{DPDK: &off, Bridges: []api.OVSBridge{{Name: "br-phy", Ports: []api.OVSPort{
			{OVSInterface: api.OVSInterface{Name: "dpdk0"}},
			{OVSInterface: api.OVSInterface{Name: "bond0"}, Bond: &api.OVSBond{Members: []api.OVSInterface{{Name: "eth1"}, {Name: "eth2"}}}},
		}}}}),
		ovsHost("storage-0", "mgmt", nil),
	}
	steps, err := Render(ovsSite(site), hosts)
	if err != nil {
		t.Fatal(err)
	}
	got := ovsSteps(t, steps)
	if len(got) != 6 {
		t.Fatalf("want ovs.dpdk and ovs.bridges on 3 hosts, got %v", slices.Sorted(func(yield func(string) bool) {
			for id := range got {
				if !yield(id) {
					return
				}
			}
		}))
	}
	// compute-0 runs DPDK and declares no huge pages: they are derived, and waited for.
	if d := got["compute-0/ovs.dpdk"]; !slices.Equal(d.Deps, []string{"compute-0/host.network", "compute-0/host.hugepages"}) {
		t.Errorf("ovs.dpdk deps %v", d.Deps)
	}
	if b := got["compute-0/ovs.bridges"]; !slices.Equal(b.Deps, []string{"compute-0/ovs.dpdk"}) {
		t.Errorf("ovs.bridges deps %v", b.Deps)
	}

	var dp ovsspec.DPDKInputs
	var br ovsspec.BridgesInputs
	decode := func(id string, v any) {
		t.Helper()
		reflect.ValueOf(v).Elem().SetZero()
		if err := json.Unmarshal(got[id].Inputs, v); err != nil {
			t.Fatal(err)
		}
	}
	decode("compute-0/ovs.dpdk", &dp)
	want := ovsspec.DPDKInputs{Enabled: true, SocketMemMB: []int{1024, 1024}, PMDCPUs: "2,3", PMDMaxSleepUs: 100, HugepageDir: "/dev/hugepages"}
	if !reflect.DeepEqual(dp, want) {
		t.Errorf("compute-0 dpdk %+v", dp)
	}
	decode("compute-0/ovs.bridges", &br)
	wantBr := ovsspec.BridgesInputs{Bridges: []ovsspec.Bridge{
		{Name: "br-phy", Datapath: "netdev", Ports: []ovsspec.Port{
			{Name: "dpdk0", Interfaces: []ovsspec.Interface{{Name: "dpdk0", Type: "dpdk", Devargs: "0000:03:00.0", RxQueues: 2, MTU: 9000}}},
			{Name: "bond0", BondMode: "balance-tcp", LACP: "active", Interfaces: []ovsspec.Interface{
				{Name: "dpdk1", Type: "dpdk", Devargs: "0000:04:00.0"}, {Name: "dpdk2", Type: "dpdk", Devargs: "0000:04:00.1"}}},
		}},
		{Name: "br-int", Datapath: "netdev", Ports: []ovsspec.Port{
			{Name: "vlan100", Tag: 100, Interfaces: []ovsspec.Interface{{Name: "vlan100", Type: "internal"}}}}},
	}}
	if !reflect.DeepEqual(br, wantBr) {
		t.Errorf("compute-0 bridges\n got %+v\nwant %+v", br, wantBr)
	}

	// Host overrides: settings field by field, ports by name, new ports appended.
	decode("compute-1/ovs.dpdk", &dp)
	if dp.PMDCPUs != "4-5" || !slices.Equal(dp.SocketMemMB, []int{1024, 1024}) {
		t.Errorf("compute-1 dpdk %+v", dp)
	}
	decode("compute-1/ovs.bridges", &br)
	if p := br.Bridges[0].Ports; len(p) != 3 || p[0].Interfaces[0].Devargs != "0000:81:00.0" || p[0].Interfaces[0].RxQueues != 0 ||
		p[2].Name != "eth9" || p[2].Interfaces[0].Type != "system" {
		t.Errorf("compute-1 br-phy ports %+v", p)
	}
	// A host with spec.ovs is a data host; dpdk: false turns DPDK off there.
	decode("gateway-0/ovs.dpdk", &dp)
	if !reflect.DeepEqual(dp, ovsspec.DPDKInputs{}) {
		t.Errorf("gateway-0 dpdk %+v", dp)
	}
	decode("gateway-0/ovs.bridges", &br)
	if p := br.Bridges[0].Ports; p[0].Interfaces[0].Type != "system" || p[1].BondMode != "active-backup" {
		t.Errorf("gateway-0 ports %+v", p)
	}
	// The site's slices are not shared with a host's merged copy.
	if site.Bridges[0].Ports[0].PCI != "0000:03:00.0" {
		t.Error("rendering changed the site spec")
	}

	again, _ := Render(ovsSite(site), hosts)
	for id, s := range ovsSteps(t, again) {
		if s.InputsHash != got[id].InputsHash {
			t.Errorf("%s: inputs hash changed between renders", id)
		}
	}
}

func TestRenderOVSNone(t *testing.T) {
	steps, err := Render(ovsSite(nil), []api.Host{ovsHost("compute-0", "data", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ovsSteps(t, steps); len(got) != 0 {
		t.Errorf("no site.spec.ovs, yet %v", got)
	}
}

// TestRenderOVSWaitsForHugepages: ovs.dpdk depends on host.hugepages where an
// earlier renderer produced it, and only there.
func TestRenderOVSWaitsForHugepages(t *testing.T) {
	hosts := []api.Host{ovsHost("compute-0", "data", nil), ovsHost("compute-1", "data", nil)}
	site := ovsSite(&api.OVSSpec{DPDK: true})
	nets := map[string]api.Network{}
	for _, n := range site.Spec.Networks {
		nets[n.Name] = n
	}
	rendered := map[string]bool{StepID("compute-0", hostspec.KindHugepages, ""): true}
	steps, err := renderOVS(renderInput{site: site, hosts: hosts, nets: nets, rendered: rendered})
	if err != nil {
		t.Fatal(err)
	}
	got := ovsSteps(t, steps)
	if d := got["compute-0/ovs.dpdk"].Deps; !slices.Equal(d, []string{"compute-0/host.network", "compute-0/host.hugepages"}) {
		t.Errorf("compute-0 deps %v", d)
	}
	if d := got["compute-1/ovs.dpdk"].Deps; !slices.Equal(d, []string{"compute-1/host.network"}) {
		t.Errorf("compute-1 deps %v", d)
	}
}

// TestRenderHugepagesFromDPDK: a DPDK host that declares no huge pages gets enough
// 2 MiB pages per NUMA node for dpdk-socket-mem, and ovs.dpdk waits for them.
func TestRenderHugepagesFromDPDK(t *testing.T) {
	site := ovsSite(&api.OVSSpec{DPDK: true, OVSSettings: api.OVSSettings{SocketMemMB: []int{1024, 513}}})
	steps, err := Render(site, []api.Host{ovsHost("compute-0", "data", nil)})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Step{}
	for _, s := range steps {
		byID[s.ID] = s
	}
	hp, ok := byID["compute-0/host.hugepages"]
	if !ok {
		t.Fatalf("no hugepages step derived from socket memory: %v", steps)
	}
	if !strings.Contains(string(hp.Inputs), `"count":512`) || !strings.Contains(string(hp.Inputs), `"count":257`) {
		t.Errorf("derived pages %s, want 512 on node 0 and 257 on node 1", hp.Inputs)
	}
	if d := byID["compute-0/ovs.dpdk"].Deps; !slices.Contains(d, "compute-0/host.hugepages") {
		t.Errorf("ovs.dpdk deps %v", d)
	}
}

// Every consumer of the vswitch rule agrees on every kind of host: the OVS steps,
// the openvswitch label, the DPDK datapath, hugepages and kubelet's reserved CPUs.
func TestVswitchRuleAgreesEverywhere(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name       string
		network    string
		ovs        *api.HostOVS
		runs, dpdk bool
	}{
		{"data network", "data", nil, true, true},
		{"no data network", "cluster", nil, false, false},
		{"spec.ovs of its own, no data network", "cluster", &api.HostOVS{}, true, true},
		{"data network, DPDK off for the host", "data", &api.HostOVS{DPDK: &off}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, hs := kubeSite(false, &api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10", DPDKReservedCPUs: "0-1"})
			s.Spec.OVS.SocketMemMB = []int{1024}
			h := &hs[2] // compute-0
			h.Spec.Interfaces = []api.Interface{{Name: "eth1", Networks: []string{"cluster"}, Addresses: []string{"10.50.0.21/24"}}}
			if tc.network == "data" {
				h.Spec.Interfaces = append(h.Spec.Interfaces, api.Interface{Name: "eth2", Networks: []string{"data"}, Addresses: []string{"10.60.0.21/24"}})
			}
			h.Spec.OVS = tc.ovs
			steps, err := Render(s, hs)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]Step{}
			for _, st := range steps {
				byID[st.ID] = st
			}
			dpdkStep, hasOVS := byID["compute-0/ovs.dpdk"]
			labels := inputsOf[kubespec.LabelsInputs](t, byID["ctl-0/kube.labels/compute-0"]).Labels
			join := inputsOf[kubespec.JoinInputs](t, byID["compute-0/kube.join"])
			hp, hasHP := byID["compute-0/host.hugepages"]
			pages := hasHP && len(inputsOf[hostspec.HugepagesInputs](t, hp).Pages) > 0
			if hasOVS != tc.runs || (labels["openvswitch"] == "enabled") != tc.runs {
				t.Errorf("OVS steps %v, openvswitch label %q; want OVS %v", hasOVS, labels["openvswitch"], tc.runs)
			}
			dpdk := hasOVS && inputsOf[ovsspec.DPDKInputs](t, dpdkStep).Enabled
			if dpdk != tc.dpdk || (join.Node.ReservedCPUs != "") != tc.dpdk || pages != tc.dpdk {
				t.Errorf("DPDK %v, reserved CPUs %q, hugepages %v; want DPDK %v", dpdk, join.Node.ReservedCPUs, pages, tc.dpdk)
			}
		})
	}
}
