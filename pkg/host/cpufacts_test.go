package host

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestGatherCPUTopology(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/meminfo":                                               "MemTotal: 16000 kB\n",
		"sys/devices/system/cpu/online":                              "0-3\n",
		"sys/devices/system/cpu/isolated":                            "2-3\n",
		"sys/devices/system/cpu/nohz_full":                           "\n",
		"sys/devices/system/node/node0/cpulist":                      "0-1\n",
		"sys/devices/system/node/node0/meminfo":                      "Node 0 MemTotal: 8000 kB\n",
		"sys/devices/system/node/node1/cpulist":                      "2-3\n",
		"sys/devices/system/node/node1/meminfo":                      "Node 1 MemTotal: 8000 kB\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages":   "2\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages": "1\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":      "512\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages":    "512\n",
	}
	for cpu, topo := range map[string][3]string{"0": {"0", "0", "0,2"}, "1": {"1", "0", "1,3"}, "2": {"0", "1", "0,2"}, "3": {"1", "1", "1,3"}} {
		dir := "sys/devices/system/cpu/cpu" + cpu + "/topology/"
		files[dir+"core_id"], files[dir+"physical_package_id"], files[dir+"thread_siblings_list"] = topo[0], topo[1], topo[2]
	}
	for path, content := range files {
		p := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := GatherWith(context.Background(), GatherOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	want := []CPUFact{
		{CPU: 0, Core: 0, Package: 0, Node: 0, Siblings: []int{0, 2}},
		{CPU: 1, Core: 1, Package: 0, Node: 0, Siblings: []int{1, 3}},
		{CPU: 2, Core: 0, Package: 1, Node: 1, Siblings: []int{0, 2}},
		{CPU: 3, Core: 1, Package: 1, Node: 1, Siblings: []int{1, 3}},
	}
	if !reflect.DeepEqual(f.CPUTopology, want) {
		t.Errorf("topology %+v", f.CPUTopology)
	}
	if !reflect.DeepEqual(f.IsolatedCPUs, []int{2, 3}) || f.NoHZFullCPUs != nil {
		t.Errorf("isolated %v nohz_full %v", f.IsolatedCPUs, f.NoHZFullCPUs)
	}
	if want := []HugepageFact{{Size: "2048kB", Total: 512, Free: 512}, {Size: "1048576kB", Total: 2, Free: 1}}; !reflect.DeepEqual(f.HugepageSizes, want) {
		t.Errorf("hugepage sizes %+v", f.HugepageSizes)
	}
}
