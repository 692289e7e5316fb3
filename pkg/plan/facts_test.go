package plan

import (
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

// factsSite is a site with OVS-DPDK and Kubernetes; compute-0 is a data host.
func factsSite() (*api.Site, api.Host) {
	site := &api.Site{Metadata: api.ObjectMeta{Name: "lab"}, Spec: api.SiteSpec{
		Controllers: []string{"ctl-0"},
		Networks:    []api.Network{{Name: "data", Role: api.NetworkData, CIDR: "10.9.0.0/24"}},
		OVS: &api.OVSSpec{DPDK: true, OVSSettings: api.OVSSettings{SocketMemMB: []int{1024}, PMDCPUs: "2-3"},
			Bridges: []api.OVSBridge{{Name: "br-data", Ports: []api.OVSPort{
				{OVSInterface: api.OVSInterface{Name: "dpdk0", PCI: "0000:03:00.0"}},
				{OVSInterface: api.OVSInterface{Name: "eth2"}},
				{OVSInterface: api.OVSInterface{Name: "br-data-int", Type: api.OVSPortInternal}},
			}}}},
		Kubernetes: &api.KubernetesSpec{DPDKReservedCPUs: "0-3"},
	}}
	h := api.Host{Metadata: api.ObjectMeta{Name: "compute-0"}, Spec: api.HostSpec{
		Roles: []string{api.RoleWorker}, ManagementAddress: "10.0.0.5",
		Interfaces: []api.Interface{
			{Name: "eth0", Addresses: []string{"10.0.0.5/24"}},
			{Name: "eth1"},
			{Name: "bond0", Type: api.InterfaceBond, Members: []string{"eth1"}, Networks: []string{"data"}},
			{Name: "vlan100", Type: api.InterfaceVLAN, Parent: "bond0", VLAN: 100},
		},
		Hugepages: []api.Hugepages{{Size: "2Mi", Count: 512}},
	}}
	return site, h
}

// oneNode is a 4-CPU single-node host with eth0..eth2.
func oneNode() hostspec.Facts {
	return hostspec.Facts{
		NUMANodes:     []hostspec.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}},
		CPUTopology:   []hostspec.CPUFact{{CPU: 0}, {CPU: 1}, {CPU: 2}, {CPU: 3}},
		HugepageSizes: []hostspec.HugepageFact{{Size: "2048kB"}},
		Links: []hostspec.LinkFact{{Name: "eth0", MAC: "52:54:00:00:00:01"}, {Name: "eth1", MAC: "52:54:00:00:00:02"},
			{Name: "eth2", MAC: "52:54:00:00:00:03"}, {Name: "lo"}},
	}
}

// twoNodes splits eight CPUs over two nodes (0-3, 4-7).
func twoNodes() hostspec.Facts {
	f := oneNode()
	f.NUMANodes = []hostspec.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}, {ID: 1, CPUs: []int{4, 5, 6, 7}}}
	f.CPUTopology = nil
	return f
}

func TestCheckFacts(t *testing.T) {
	type want struct{ path, msg string }
	for _, tc := range []struct {
		name  string
		edit  func(*api.Site, *api.Host, *hostspec.Facts)
		wants []want // empty: valid
	}{
		{name: "fits", edit: func(*api.Site, *api.Host, *hostspec.Facts) {}},
		{name: "no facts at all", edit: func(_ *api.Site, h *api.Host, f *hostspec.Facts) {
			*f = hostspec.Facts{CPUs: 2}
			h.Spec.Interfaces[0].Name = "eth9"
		}},
		{name: "socketMemMB more entries than nodes", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.OVS.SocketMemMB = []int{1024, 1024}
		}, wants: []want{{"site.spec.ovs.socketMemMB[1]", "host compute-0 reports 1 NUMA node (0); socketMemMB has 2 entries: give one value per node (1), 0 for a node without DPDK NICs, or set hosts[compute-0].spec.ovs.socketMemMB for this host"}}},
		{name: "socketMemMB fewer entries than nodes", edit: func(_ *api.Site, _ *api.Host, f *hostspec.Facts) {
			*f = twoNodes()
		}, wants: []want{{"site.spec.ovs.socketMemMB", "reports 2 NUMA nodes (0,1); socketMemMB has 1 entry, so node 1 would get no memory"}}},
		{name: "host override of socketMemMB is named", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			h.Spec.OVS = &api.HostOVS{OVSSettings: api.OVSSettings{SocketMemMB: []int{512, 512, 512}}}
		}, wants: []want{{"hosts[compute-0].spec.ovs.socketMemMB[1]", "socketMemMB has 3 entries: give one value per node (1), 0 for a node without DPDK NICs"}}},
		{name: "socketLimitMB too", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.OVS.SocketMemMB, s.Spec.OVS.SocketLimitMB = []int{1024, 0}, []int{2048, 0}
		}, wants: []want{{"site.spec.ovs.socketMemMB[1]", "socketMemMB has 2 entries"}, {"site.spec.ovs.socketLimitMB[1]", "socketLimitMB has 2 entries"}}},
		{name: "pmd CPUs the host does not have", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.OVS.PMDCPUs = "2-3,8-9"
		}, wants: []want{{"site.spec.ovs.pmdCPUs", "host compute-0 has no CPU 8-9 online (it has 0-3); pmdCPUs 2-3,8-9 must name CPUs of this host"}}},
		{name: "lcore CPUs the host does not have", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			h.Spec.OVS = &api.HostOVS{OVSSettings: api.OVSSettings{LcoreCPUs: "7"}}
		}, wants: []want{{"hosts[compute-0].spec.ovs.lcoreCPUs", "has no CPU 7 online"}}},
		{name: "a node with socket memory and no PMD CPU", edit: func(s *api.Site, _ *api.Host, f *hostspec.Facts) {
			*f = twoNodes()
			s.Spec.OVS.SocketMemMB = []int{1024, 1024}
		}, wants: []want{{"site.spec.ovs.pmdCPUs", "NUMA node 1 gets socketMemMB 1024 but none of pmdCPUs 2-3 is on it; reserve one of node 1's CPUs (4-7)"}}},
		{name: "dpdk off: OVS CPU settings unused", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.OVS.DPDK = false
			s.Spec.OVS.SocketMemMB, s.Spec.OVS.PMDCPUs = []int{1, 2, 3}, "9"
			s.Spec.OVS.Bridges[0].Ports = s.Spec.OVS.Bridges[0].Ports[1:]
		}},
		{name: "kubelet reserved CPUs (dpdk default)", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.Kubernetes.DPDKReservedCPUs = "0-5"
		}, wants: []want{{"site.spec.kubernetes.dpdkReservedCPUs", "host compute-0 has no CPU 4-5 online (it has 0-3); dpdkReservedCPUs 0-5 must name CPUs of this host"}}},
		{name: "kubelet reserved CPUs of the node", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.Kubernetes.Nodes = []api.KubernetesNode{{Host: "compute-0", ReservedCPUs: "16"}}
		}, wants: []want{{"site.spec.kubernetes.nodes[compute-0].reservedCPUs", "has no CPU 16 online"}}},
		{name: "hugepages on a node the host lacks", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			n := 1
			h.Spec.Hugepages = []api.Hugepages{{Size: "2Mi", Count: 8}, {Size: "1Gi", Count: 1, Node: &n}}
		}, wants: []want{
			{"hosts[compute-0].spec.hugepages[1].size", "host compute-0 has hugepage sizes 2048kB; 1Gi is not one of them"},
			{"hosts[compute-0].spec.hugepages[1].node", "host compute-0 reports 1 NUMA node (0); node 1 is not one of them"},
		}},
		{name: "ethernet interface the host does not have", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			h.Spec.Interfaces[1].Name = "ens5"
			h.Spec.Interfaces[2].Members = []string{"ens5"}
		}, wants: []want{{"hosts[compute-0].spec.interfaces[1].name", `host compute-0 has no link named "ens5"; an ethernet interface must exist already (its links: eth0, eth1, eth2)`}}},
		{name: "ethernet interface by MAC", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			h.Spec.Interfaces[0].MAC = "52:54:00:00:00:99"
		}, wants: []want{{"hosts[compute-0].spec.interfaces[0].mac", "no link with MAC 52:54:00:00:00:99; its links: eth0 (52:54:00:00:00:01)"}}},
		{name: "MAC matches whatever the name", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			h.Spec.Interfaces[0].Name, h.Spec.Interfaces[0].MAC = "mgmt0", "52:54:00:00:00:01"
		}},
		{name: "created interfaces are not looked for", edit: func(_ *api.Site, h *api.Host, _ *hostspec.Facts) {
			h.Spec.Interfaces = append(h.Spec.Interfaces, api.Interface{Name: "br0", Type: api.InterfaceBridge},
				api.Interface{Name: "vx0", Type: api.InterfaceVXLAN, VXLAN: &api.VXLANOptions{VNI: 5}})
		}},
		{name: "OVS system port the host does not have", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.OVS.Bridges[0].Ports[1].Name = "eth7"
		}, wants: []want{{"site.spec.ovs.bridges[br-data].ports[eth7].name", `host compute-0 has no link named "eth7" for this system port`}}},
		{name: "OVS system port declared under interfaces is made first", edit: func(s *api.Site, _ *api.Host, _ *hostspec.Facts) {
			s.Spec.OVS.Bridges[0].Ports[1].Name = "vlan100"
		}},
		{name: "OVS bond member the host does not have, on the host's bridge", edit: func(_ *api.Site, h *api.Host, f *hostspec.Facts) {
			f.Links = append(f.Links[:2], hostspec.LinkFact{Name: "ens1"}) // no eth2: the site's port is replaced
			h.Spec.OVS = &api.HostOVS{Bridges: []api.OVSBridge{{Name: "br-data", Ports: []api.OVSPort{
				{OVSInterface: api.OVSInterface{Name: "eth2"}, Bond: &api.OVSBond{Members: []api.OVSInterface{{Name: "ens1"}, {Name: "ens8"}}}},
			}}}}
		}, wants: []want{{"hosts[compute-0].spec.ovs.bridges[br-data].ports[eth2].bond.members[ens8].name", `no link named "ens8"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site, h := factsSite()
			f := oneNode()
			tc.edit(site, &h, &f)
			ctl := api.Host{Metadata: api.ObjectMeta{Name: "ctl-0"}, Spec: api.HostSpec{Roles: []string{api.RoleController}, ManagementAddress: "10.0.0.2"}}
			if errs := api.ValidateSet("", site, []api.Host{ctl, h}); len(errs) > 0 {
				t.Fatalf("fixture does not validate: %v", errs)
			}
			errs := CheckFacts(site, h, f)
			if len(errs) != len(tc.wants) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tc.wants), errs)
			}
			for i, w := range tc.wants {
				if errs[i].Path != w.path || !strings.Contains(errs[i].Msg, w.msg) {
					t.Errorf("problem %d = %s: %s\nwant    %s: ...%s...", i, errs[i].Path, errs[i].Msg, w.path, w.msg)
				}
			}
		})
	}
}

// A held host's steps are not handed out (Pending, a Failed one too) and come back
// once released; a Running one finishes its run.
func TestHold(t *testing.T) {
	recs := map[string]Record{
		"a/x": {Step: Step{ID: "a/x", Host: "a"}, State: Ready},
		"a/y": {Step: Step{ID: "a/y", Host: "a", Deps: []string{"a/x"}}, State: Pending},
		"a/z": {Step: Step{ID: "a/z", Host: "a"}, State: Failed, Attempts: 2},
		"a/r": {Step: Step{ID: "a/r", Host: "a"}, State: Running},
		"b/x": {Step: Step{ID: "b/x", Host: "b"}, State: Ready},
	}
	moved := Hold(recs, map[string]string{"a": "bad socketMemMB"})
	if got := strings.Join(moved, " "); got != "a/r a/x a/y a/z" {
		t.Errorf("moved = %q", got)
	}
	for id, want := range map[string]State{"a/x": Pending, "a/y": Pending, "a/z": Pending, "a/r": Running, "b/x": Ready} {
		if r := recs[id]; r.State != want || (r.Host == "a") != (r.Held != "") {
			t.Errorf("%s: state %s held %q, want %s", id, r.State, r.Held, want)
		}
	}
	if Regate(recs); recs["a/x"].State != Pending {
		t.Error("regating released a held step")
	}
	moved = Hold(recs, nil)
	if got := strings.Join(moved, " "); got != "a/r a/x a/y a/z" {
		t.Errorf("released = %q", got)
	}
	for id, want := range map[string]State{"a/x": Ready, "a/y": Pending, "a/z": Ready, "a/r": Running} {
		if r := recs[id]; r.State != want || r.Held != "" {
			t.Errorf("%s after release: state %s held %q, want %s", id, r.State, r.Held, want)
		}
	}
	if recs["a/z"].Attempts != 2 {
		t.Error("release lost the attempt count")
	}
}
