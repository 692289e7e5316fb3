package host

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestGatherNetwork(t *testing.T) {
	n := newNS(t)
	n.run(t, func() {
		addVeth(t, "v0", "v1", "02:00:00:00:00:01")
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := netlink.LinkAdd(br); err != nil {
			t.Fatal(err)
		}
		v0 := link(t, "v0")
		a, _ := netlink.ParseAddr("10.0.0.5/24")
		dst, _ := netlink.ParseIPNet("10.1.0.0/16")
		for _, err := range []error{
			netlink.LinkSetMaster(link(t, "v1"), br),
			netlink.LinkSetUp(v0),
			netlink.AddrAdd(v0, a),
			netlink.RouteAdd(&netlink.Route{Dst: dst, Gw: []byte{10, 0, 0, 1}, Priority: 7}),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}

		f, err := Gather(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(f.Links))
		for i, l := range f.Links {
			names[i] = l.Name
		}
		if want := []string{"br0", "lo", "v0", "v1"}; !slices.Equal(names, want) {
			t.Errorf("links %v, want %v", names, want)
		}
		for _, l := range f.Links {
			switch l.Name {
			case "v0":
				want := LinkFact{Name: "v0", Index: v0.Attrs().Index, MAC: "02:00:00:00:00:01", MTU: 1500,
					OperState: l.OperState, AdminUp: true, Kind: "veth", Driver: "veth"}
				if l != want {
					t.Errorf("v0 %+v, want %+v", l, want)
				}
			case "v1":
				if l.Master != "br0" || l.AdminUp {
					t.Errorf("v1 %+v", l)
				}
			case "br0":
				if l.Kind != "bridge" {
					t.Errorf("br0 %+v", l)
				}
			}
		}
		if !slices.Contains(f.Addresses, AddrFact{Link: "v0", CIDR: "10.0.0.5/24", Family: "inet"}) {
			t.Errorf("addresses %+v", f.Addresses)
		}
		wantRoute := RouteFact{Dst: "10.1.0.0/16", Gateway: "10.0.0.1", Dev: "v0", Metric: 7, Table: 254, Protocol: "boot"}
		if !slices.Contains(f.Routes, wantRoute) {
			t.Errorf("routes %+v, want %+v among them", f.Routes, wantRoute)
		}
		if f.CPUs <= 0 || f.MemoryTotalBytes == 0 || f.MemoryAvailableBytes == 0 || f.KernelRelease == "" || f.Hostname == "" {
			t.Errorf("system facts %+v", f)
		}
	})
}

func TestGatherWithRoot(t *testing.T) {
	root := t.TempDir()
	for path, content := range map[string]string{
		"proc/sys/kernel/hostname":  "h1\n",
		"proc/sys/kernel/osrelease": "6.1.0-test\n",
		"proc/meminfo": "MemTotal:       16000 kB\nMemAvailable:    8000 kB\n" +
			"HugePages_Total:      8\nHugePages_Free:       3\nHugepagesize:       2048 kB\n",
		"sys/devices/system/cpu/online":                                              "0-3\n",
		"sys/devices/system/node/node1/cpulist":                                      "2-3\n",
		"sys/devices/system/node/node1/meminfo":                                      "Node 1 MemTotal:        8000 kB\nNode 1 MemFree: 1 kB\n",
		"sys/devices/system/node/node0/cpulist":                                      "0,1\n",
		"sys/devices/system/node/node0/meminfo":                                      "Node 0 MemTotal:        8000 kB\n",
		"sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages":      "8\n",
		"sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages":    "3\n",
		"sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages":   "0\n",
		"sys/devices/system/node/node0/hugepages/hugepages-1048576kB/free_hugepages": "0\n",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := GatherWith(context.Background(), GatherOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if f.Hostname != "h1" || f.KernelRelease != "6.1.0-test" || f.CPUs != 4 ||
		f.MemoryTotalBytes != 16000*1024 || f.MemoryAvailableBytes != 8000*1024 ||
		f.Hugepages != (HugepageFact{Size: "2048kB", Total: 8, Free: 3}) {
		t.Errorf("system facts %+v", f)
	}
	want := []NUMANode{
		{ID: 0, CPUs: []int{0, 1}, MemoryBytes: 8000 * 1024, Hugepages: map[string]HugepageFact{
			"2048kB":    {Size: "2048kB", Total: 8, Free: 3},
			"1048576kB": {Size: "1048576kB"},
		}},
		{ID: 1, CPUs: []int{2, 3}, MemoryBytes: 8000 * 1024},
	}
	if !reflect.DeepEqual(f.NUMANodes, want) {
		t.Errorf("numa %+v, want %+v", f.NUMANodes, want)
	}
}

func TestFactsHash(t *testing.T) {
	f := Facts{Hostname: "h1", CPUs: 4, MemoryAvailableBytes: 1, Links: []LinkFact{{Name: "eth0", MTU: 1500}},
		NUMANodes: []NUMANode{{ID: 0, Hugepages: map[string]HugepageFact{"2048kB": {Total: 1}, "1048576kB": {}}}}}
	h := f.Hash()
	if len(h) != 16 || h != f.Hash() {
		t.Fatalf("hash %q not stable", h)
	}
	g := f
	g.MemoryAvailableBytes = 2
	if g.Hash() != h {
		t.Error("hash changed with available memory")
	}
	g.Links = []LinkFact{{Name: "eth0", MTU: 9000}}
	if g.Hash() == h {
		t.Error("hash ignored an MTU change")
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0": {0}, "0-2,5,7-8\n": {0, 1, 2, 5, 7, 8}} {
		if got, err := parseCPUList(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"a", "3-1", "1-", "-1"} {
		if _, err := parseCPUList(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
