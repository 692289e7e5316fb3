package host

import (
	"github.com/plinth-dev/plinth/pkg/cpuset"

	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// gatherSystem fills the non-network facts from /proc and /sys under root.
func gatherSystem(root string, f *Facts) error {
	f.Hostname = readTrim(root + "/proc/sys/kernel/hostname")
	if f.Hostname == "" && root == "" {
		f.Hostname, _ = os.Hostname()
	}
	f.KernelRelease = readTrim(root + "/proc/sys/kernel/osrelease")

	f.CPUs = len(parseCPUListOr(readTrim(root + "/sys/devices/system/cpu/online")))
	if f.CPUs == 0 && root == "" {
		f.CPUs = runtime.NumCPU()
	}

	mem, err := readMeminfo(root+"/proc/meminfo", "")
	if err != nil {
		return fmt.Errorf("host: gather facts: %w", err)
	}
	f.MemoryTotalBytes = mem["MemTotal"] * 1024
	f.MemoryAvailableBytes = mem["MemAvailable"] * 1024
	if size := mem["Hugepagesize"]; size > 0 {
		f.Hugepages = HugepageFact{
			Size:  fmt.Sprintf("%dkB", size),
			Total: int(mem["HugePages_Total"]),
			Free:  int(mem["HugePages_Free"]),
		}
	}

	f.NUMANodes, err = numaNodes(root + "/sys/devices/system/node")
	if err != nil {
		return fmt.Errorf("host: gather facts: %w", err)
	}
	gatherCPU(root, f)
	return nil
}

// numaNodes reads every nodeN directory under dir; none (no NUMA support) is no error.
func numaNodes(dir string) ([]NUMANode, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read numa nodes: %w", err)
	}
	var nodes []NUMANode
	for _, e := range ents {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if !strings.HasPrefix(e.Name(), "node") || err != nil {
			continue
		}
		nd := filepath.Join(dir, e.Name())
		n := NUMANode{ID: id, CPUs: parseCPUListOr(readTrim(nd + "/cpulist"))}
		mem, err := readMeminfo(nd+"/meminfo", fmt.Sprintf("Node %d ", id))
		if err != nil {
			return nil, err
		}
		n.MemoryBytes = mem["MemTotal"] * 1024
		n.Hugepages = hugepages(nd + "/hugepages")
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b NUMANode) int { return cmp.Compare(a.ID, b.ID) })
	return nodes, nil
}

// hugepages reads hugepages-<size>/{nr,free}_hugepages under dir.
func hugepages(dir string) map[string]HugepageFact {
	ents, _ := os.ReadDir(dir)
	var out map[string]HugepageFact
	for _, e := range ents {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		total, _ := strconv.Atoi(readTrim(filepath.Join(dir, e.Name(), "nr_hugepages")))
		free, _ := strconv.Atoi(readTrim(filepath.Join(dir, e.Name(), "free_hugepages")))
		if out == nil {
			out = map[string]HugepageFact{}
		}
		out[size] = HugepageFact{Size: size, Total: total, Free: free}
	}
	return out
}

// readMeminfo parses "Key: value [kB]" lines, after stripping prefix from each line
// (per-node files start with "Node N "). Values are as written, so kB stay kB.
func readMeminfo(path, prefix string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), prefix), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
			out[strings.TrimSpace(key)] = v
		}
	}
	return out, nil
}

// parseCPUList parses a kernel cpulist such as "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	cpus, err := cpuset.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	return cpus, nil
}

// parseCPUListOr is parseCPUList for best-effort facts: garbage gives nil.
func parseCPUListOr(s string) []int {
	cpus, _ := parseCPUList(s)
	return cpus
}

// readTrim returns the trimmed content of a small file, or "" if unreadable.
func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// symlinkBase returns the base name of a symlink's target, or "".
func symlinkBase(path string) string {
	t, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}
