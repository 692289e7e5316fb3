package plan

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

func netSite(nets ...api.Network) *api.Site {
	return &api.Site{Spec: api.SiteSpec{Networks: nets}}
}

func poolNet(name, role, cidr, start, end string) api.Network {
	return api.Network{Name: name, Role: role, CIDR: cidr, Pool: &api.AddressPool{Start: start, End: end}}
}

// allocHost is a host whose eth1 takes an address from network "stor".
func allocHost(name string, static ...string) api.Host {
	return api.Host{Metadata: api.ObjectMeta{Name: name}, Spec: api.HostSpec{
		ManagementAddress: "10.0.0.1",
		Interfaces:        []api.Interface{{Name: "eth1", Networks: []string{"stor"}, Allocate: len(static) == 0, Addresses: static}},
	}}
}

func addrOf(allocs []Allocation, host string) string {
	for _, a := range allocs {
		if a.Host == host {
			return a.Address
		}
	}
	return ""
}

func TestAllocateIsStable(t *testing.T) {
	site := netSite(api.Network{Name: "stor", Role: "other", CIDR: "10.5.0.0/24", Gateway: "10.5.0.10",
		Pool: &api.AddressPool{Start: "10.5.0.10", End: "10.5.0.20"}})
	hosts := []api.Host{allocHost("b"), allocHost("c"), allocHost("s", "10.5.0.11/24")}
	first, err := Allocate(site, hosts, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The gateway (.10) and s's static .11 are never handed out.
	want := []Allocation{{"stor", "b", "10.5.0.12"}, {"stor", "c", "10.5.0.13"}}
	if !slices.Equal(first, want) {
		t.Fatalf("first %v, want %v", first, want)
	}
	// Host a sorts first but arrives later: b and c keep theirs.
	hosts = append([]api.Host{allocHost("a")}, hosts...)
	second, _ := Allocate(site, hosts, first)
	if addrOf(second, "a") != "10.5.0.14" || addrOf(second, "b") != "10.5.0.12" || addrOf(second, "c") != "10.5.0.13" {
		t.Errorf("after adding a: %v", second)
	}
	if again, _ := Allocate(site, hosts, second); !slices.Equal(again, second) {
		t.Errorf("not a fixed point: %v then %v", second, again)
	}
	// b leaves: its address is freed and the next newcomer gets the lowest free one.
	hosts = slices.DeleteFunc(hosts, func(h api.Host) bool { return h.Metadata.Name == "b" })
	hosts = append(hosts, allocHost("d"))
	third, _ := Allocate(site, hosts, second)
	if addrOf(third, "b") != "" || addrOf(third, "d") != "10.5.0.12" || addrOf(third, "c") != "10.5.0.13" {
		t.Errorf("after b left and d came: %v", third)
	}
	// An operator gives .13 to s statically: c moves, the others stay.
	hosts[len(hosts)-2] = allocHost("s", "10.5.0.11/24", "10.5.0.13/24")
	fourth, _ := Allocate(site, hosts, third)
	if addrOf(fourth, "c") != "10.5.0.15" || addrOf(fourth, "a") != "10.5.0.14" {
		t.Errorf("after a static took c's address: %v", fourth)
	}
	// A shrunk pool moves what falls outside it.
	site.Spec.Networks[0].Pool.End = "10.5.0.14"
	site.Spec.Networks[0].Pool.Start = "10.5.0.12"
	if fifth, err := Allocate(site, hosts, fourth); err == nil {
		t.Errorf("three hosts fit a pool of .12-.14 with .13 static: %v", fifth)
	}
}

func TestAllocateIPv6AndExhaustion(t *testing.T) {
	site := netSite(poolNet("stor", "other", "fd00:5::/64", "fd00:5::ff", "fd00:5::100"))
	got, err := Allocate(site, []api.Host{allocHost("a"), allocHost("b")}, nil)
	if err != nil || addrOf(got, "a") != "fd00:5::ff" || addrOf(got, "b") != "fd00:5::100" {
		t.Errorf("ipv6: %v %v", got, err)
	}
	if _, err := Allocate(site, []api.Host{allocHost("a"), allocHost("b"), allocHost("c")}, nil); err == nil {
		t.Error("a pool of two served three hosts")
	}
}

// TestRenderAllocatedRecordsAddresses: the steps carry the allocated addresses with
// the network's prefix length, and the allocations come back for the FSM to record.
func TestRenderAllocatedRecordsAddresses(t *testing.T) {
	site := netSite(poolNet("stor", "other", "10.5.0.0/24", "10.5.0.100", "10.5.0.200"))
	steps, allocs, err := RenderAllocated(site, []api.Host{allocHost("a"), allocHost("b")}, []Allocation{{"stor", "b", "10.5.0.150"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Allocation{{"stor", "a", "10.5.0.100"}, {"stor", "b", "10.5.0.150"}}; !slices.Equal(allocs, want) {
		t.Errorf("allocations %v, want %v", allocs, want)
	}
	var in hostspec.NetworkInputs
	if err := json.Unmarshal(steps[1].Inputs, &in); err != nil || steps[1].ID != "b/host.network" {
		t.Fatal(steps[1].ID, err)
	}
	if !slices.Equal(in.Links[0].Addresses, []string{"10.5.0.150/24"}) {
		t.Errorf("b addresses %v", in.Links[0].Addresses)
	}
}

func TestRenderNetworkTypes(t *testing.T) {
	node0 := 0
	site := netSite(
		api.Network{Name: "oam", Role: "oam", CIDR: "192.168.10.0/24", Gateway: "192.168.10.1"},
		api.Network{Name: "mgmt", Role: "mgmt", CIDR: "10.0.0.0/24"},
		poolNet("stor", "other", "10.5.0.0/24", "10.5.0.100", "10.5.0.200"),
		api.Network{Name: "data", Role: "data", CIDR: "10.6.0.0/24", MTU: 9000},
	)
	site.Spec.Networks[2].VLAN = 205
	h := api.Host{Metadata: api.ObjectMeta{Name: "h1"}, Spec: api.HostSpec{
		ManagementAddress: "10.0.0.21",
		Interfaces: []api.Interface{
			{Name: "eno1", Networks: []string{"oam"}, Addresses: []string{"192.168.10.21/24"}},
			{Name: "eno2"}, {Name: "eno3"},
			{Name: "bond0", Type: "bond", Members: []string{"eno2", "eno3"}, Networks: []string{"mgmt", "data"}, Bond: &api.BondOptions{LACPRate: "fast"}},
			{Name: "bond0.205", Type: "vlan", Parent: "bond0", Networks: []string{"stor"}, Allocate: true},
			{Name: "br0", Type: "bridge", State: "down"},
			{Name: "mv0", Type: "macvlan", Parent: "eno1"},
			{Name: "vx0", Type: "vxlan", Parent: "bond0", VXLAN: &api.VXLANOptions{VNI: 42, Remote: "239.1.1.1"}},
		},
		Rules:     []api.Rule{{Priority: 1000, From: "10.5.0.0/24", Table: 205}},
		Sysctls:   map[string]string{"net.ipv4.ip_forward": "0", "vm.swappiness": "10"},
		Hugepages: []api.Hugepages{{Size: "1Gi", Count: 4, Node: &node0}, {Size: "2Mi", Count: 512}},
	}}
	site.Spec.Kubernetes = &api.KubernetesSpec{}
	steps, allocs, err := RenderAllocated(site, []api.Host{h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(steps))
	for i, s := range steps {
		ids[i] = s.ID
	}
	for _, id := range []string{"h1/host.network", "h1/host.sysctl", "h1/host.hugepages"} {
		if !slices.Contains(ids, id) {
			t.Errorf("step %s missing from %v", id, ids)
		}
	}
	in := networkInputs(h, render(site).nets, allocIndex(allocs))
	want := hostspec.NetworkInputs{
		Links: []hostspec.LinkSpec{
			{Name: "eno1", MTU: 1500, Up: true, Addresses: []string{"192.168.10.21/24"}},
			{Name: "eno2", Up: true, Master: "bond0"},
			{Name: "eno3", Up: true, Master: "bond0"},
			{Name: "bond0", Kind: hostspec.LinkBond, MTU: 9000, Up: true, Addresses: []string{"10.0.0.21/24"},
				Bond: &hostspec.BondSpec{Mode: "802.3ad", LACPRate: "fast", HashPolicy: "layer2", MIIMon: 100}},
			{Name: "bond0.205", Kind: hostspec.LinkVLAN, Parent: "bond0", VLANID: 205, MTU: 1500, Up: true, Addresses: []string{"10.5.0.100/24"}},
			{Name: "br0", Kind: hostspec.LinkBridge},
			{Name: "mv0", Kind: hostspec.LinkMacvlan, Parent: "eno1", Macvlan: "bridge", Up: true},
			{Name: "vx0", Kind: hostspec.LinkVXLAN, Parent: "bond0", Up: true, VXLAN: &hostspec.VXLANSpec{VNI: 42, Remote: "239.1.1.1", Port: 4789}},
		},
		Routes: []hostspec.RouteSpec{{Dst: "default", Gateway: "192.168.10.1"}},
		Rules:  []hostspec.RuleSpec{{Priority: 1000, From: "10.5.0.0/24", Table: 205}},
	}
	if !reflect.DeepEqual(in, want) {
		got, _ := json.MarshalIndent(in, "", " ")
		t.Errorf("inputs:\n%s", got)
	}

	// The host's own default route wins over the oam gateway.
	h.Spec.Routes = []api.Route{{To: "default", Via: "192.168.10.254"}}
	if r := networkInputs(h, render(site).nets, nil).Routes; len(r) != 1 || r[0].Gateway != "192.168.10.254" {
		t.Errorf("routes %+v", r)
	}

	sc := SysctlInputs(site, h)
	keys := map[string]string{}
	for _, s := range sc.Sysctls {
		keys[s.Key] = s.Value
	}
	if keys["net.ipv4.ip_forward"] != "0" || keys["vm.swappiness"] != "10" || keys["net.ipv4.conf.all.rp_filter"] != "2" || len(sc.Sysctls) != 6 {
		t.Errorf("sysctls %+v", sc.Sysctls)
	}
	hp := HugepagesInputs(nil, h, nil)
	if len(hp.Pages) != 2 || hp.Pages[0].SizeKB != 1048576 || *hp.Pages[0].Node != 0 || hp.Pages[1].SizeKB != 2048 || hp.Pages[1].Node != nil {
		t.Errorf("hugepages %+v", hp.Pages)
	}

	// Without Kubernetes or declarations there is no sysctl or hugepages step.
	plain := api.Host{Metadata: api.ObjectMeta{Name: "h2"}}
	steps, _ = Render(netSite(), []api.Host{plain})
	if len(steps) != 1 || steps[0].Kind != hostspec.KindNetwork {
		t.Errorf("steps %v", steps)
	}
}

// An ethernet interface renders the same JSON as before links had kinds, so
// existing steps keep their inputs hash.
func TestRenderNetworkInputsCompatible(t *testing.T) {
	site := netSite(api.Network{Name: "data", Role: "data", CIDR: "10.212.0.0/24", MTU: 9000})
	h := api.Host{Metadata: api.ObjectMeta{Name: "h1"}, Spec: api.HostSpec{
		Interfaces: []api.Interface{{Name: "data0", Type: "ethernet", State: "up", Networks: []string{"data"}, Addresses: []string{"10.212.0.11/24"}}},
		Routes:     []api.Route{{To: "10.213.0.0/24", Via: "10.212.0.254"}},
	}}
	steps, err := Render(site, []api.Host{h})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"links":[{"name":"data0","mtu":9000,"up":true,"addresses":["10.212.0.11/24"]}],"routes":[{"dst":"10.213.0.0/24","gateway":"10.212.0.254"}]}`
	if got := string(steps[0].Inputs); got != want {
		t.Errorf("inputs\n%s\nwant\n%s", got, want)
	}
}

// render builds the renderInput Render would, for tests that call renderers.
func render(site *api.Site) renderInput {
	nets := map[string]api.Network{}
	for _, n := range site.Spec.Networks {
		nets[n.Name] = n
	}
	return renderInput{site: site, nets: nets}
}

// The lab manifest (make demo) is valid and renders its bridges, macvlans, vxlan,
// pool addresses, rules and sysctls.
func TestRenderLabExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/lab/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// plinth-lab fills in the bundle it installed (pkg/lab); any valid one will do here.
	b = []byte(strings.NewReplacer("${BUNDLE_VERSION}", "0.1.0", "${BUNDLE_SHA256}", strings.Repeat("a", 64)).Replace(string(b)))
	m, err := api.Decode("site.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	m.Default()
	if errs := m.Validate("site.yaml"); len(errs) > 0 {
		t.Fatalf("examples/lab/site.yaml:\n%v", errs)
	}
	steps, allocs, err := RenderAllocated(m.Site, m.Hosts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 5 || allocs[0].Address != "10.214.0.100" {
		t.Errorf("allocations %v", allocs)
	}
	byID := map[string]Step{}
	for _, s := range steps {
		byID[s.ID] = s
	}
	// The whole Kubernetes bootstrap renders on the lab's five hosts.
	for _, id := range []string{"controller-0/kube.binaries", "witness/kube.etcd", "controller-0/kube.vip", "controller-1/kube.vip",
		"controller-0/kube.init", "controller-1/kube.join-control-plane", "compute-0/kube.join", "compute-1/kube.join",
		"controller-0/kube.cni", "controller-0/kube.labels/compute-1", "controller-0/kube.health"} {
		if _, ok := byID[id]; !ok {
			t.Errorf("the lab site does not render %s", id)
		}
	}
	var in hostspec.NetworkInputs
	if err := json.Unmarshal(byID["compute-0/host.network"].Inputs, &in); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, l := range in.Links {
		kinds[l.Name] = l.Kind
	}
	if kinds["br-ch"] != hostspec.LinkBridge || kinds["stor0"] != hostspec.LinkMacvlan || kinds["vx100"] != hostspec.LinkVXLAN || len(in.Rules) != 1 {
		t.Errorf("compute-0 inputs %+v", in)
	}
	for _, l := range in.Links {
		if l.Name == "eth0" {
			t.Error("the lab must never manage eth0")
		}
	}
	if _, ok := byID["controller-0/host.sysctl"]; !ok {
		t.Error("no host.sysctl step")
	}
}
