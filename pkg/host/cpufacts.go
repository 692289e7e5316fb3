package host

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// gatherCPU fills the CPU topology, the isolated and nohz_full CPUs, and the
// system-wide hugepage pools from /sys under root. All are best effort.
func gatherCPU(root string, f *Facts) {
	cpuDir := root + "/sys/devices/system/cpu"
	nodeOf := map[int]int{}
	for _, n := range f.NUMANodes {
		for _, c := range n.CPUs {
			nodeOf[c] = n.ID
		}
	}
	f.CPUTopology = nil
	for _, c := range parseCPUListOr(readTrim(cpuDir + "/online")) {
		dir := fmt.Sprintf("%s/cpu%d/topology", cpuDir, c)
		core, err1 := strconv.Atoi(readTrim(dir + "/core_id"))
		pkg, err2 := strconv.Atoi(readTrim(dir + "/physical_package_id"))
		if err1 != nil || err2 != nil {
			continue
		}
		f.CPUTopology = append(f.CPUTopology, CPUFact{CPU: c, Core: core, Package: pkg, Node: nodeOf[c],
			Siblings: parseCPUListOr(readTrim(dir + "/thread_siblings_list"))})
	}
	f.IsolatedCPUs = parseCPUListOr(readTrim(cpuDir + "/isolated"))
	f.NoHZFullCPUs = parseCPUListOr(readTrim(cpuDir + "/nohz_full"))

	dir := root + "/sys/kernel/mm/hugepages"
	ents, _ := os.ReadDir(dir)
	f.HugepageSizes = nil
	for _, e := range ents {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		total, _ := strconv.Atoi(readTrim(filepath.Join(dir, e.Name(), "nr_hugepages")))
		free, _ := strconv.Atoi(readTrim(filepath.Join(dir, e.Name(), "free_hugepages")))
		f.HugepageSizes = append(f.HugepageSizes, HugepageFact{Size: size, Total: total, Free: free})
	}
	slices.SortFunc(f.HugepageSizes, func(a, b HugepageFact) int {
		return cmp.Or(cmp.Compare(len(a.Size), len(b.Size)), cmp.Compare(a.Size, b.Size))
	})
}
