package ovs

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// topology is the host's online CPUs and their NUMA nodes.
type topology struct {
	online []int
	nodes  map[int][]int // node -> CPUs
}

// readTopology reads /sys below root. A host without NUMA directories is one node.
func readTopology(root string) (topology, error) {
	sys := filepath.Join(root, "/sys/devices/system")
	b, err := os.ReadFile(filepath.Join(sys, "cpu/online"))
	if err != nil {
		return topology{}, fmt.Errorf("ovs: read online CPUs: %w", err)
	}
	online, ok := ovsspec.ParseCPUList(string(b))
	if !ok {
		return topology{}, fmt.Errorf("ovs: cannot parse online CPUs %q", strings.TrimSpace(string(b)))
	}
	t := topology{online: online, nodes: map[int][]int{}}
	dirs, _ := filepath.Glob(filepath.Join(sys, "node/node[0-9]*"))
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			return topology{}, fmt.Errorf("ovs: read NUMA node %d CPUs: %w", id, err)
		}
		cpus, _ := ovsspec.ParseCPUList(string(b)) // a memory-only node has none
		t.nodes[id] = cpus
	}
	if len(t.nodes) == 0 {
		t.nodes[0] = online
	}
	return t, nil
}

func (t topology) nodeOf(cpu int) int {
	for n, cpus := range t.nodes {
		if slices.Contains(cpus, cpu) {
			return n
		}
	}
	return -1
}

// cpus parses a cpulist from the inputs and checks every CPU is online here.
func (t topology) cpus(field, list string) ([]int, error) {
	cpus, ok := ovsspec.ParseCPUList(list)
	if !ok {
		return nil, driver.Permanent(fmt.Errorf("ovs: %s %q is not a cpulist", field, list))
	}
	for _, c := range cpus {
		if !slices.Contains(t.online, c) {
			return nil, driver.Permanent(fmt.Errorf("ovs: %s %s: CPU %d is not online on this host (online: %s)", field, list, c, cpuList(t.online)))
		}
	}
	return cpus, nil
}

// pmdCPUs derives the PMD CPUs from the reserved ones: all of them, or the first
// perNUMA on each node that has socket memory; every node with socket memory must
// get one, or its NICs would be polled from the other node.
func (t topology) pmdCPUs(in ovsspec.DPDKInputs) ([]int, error) {
	reserved, err := t.cpus("pmdCPUs", in.PMDCPUs)
	if err != nil {
		return nil, err
	}
	memNodes := map[int]bool{}
	for n, mb := range in.SocketMemMB {
		if mb > 0 {
			memNodes[n] = true
		}
	}
	var out []int
	taken := map[int]int{}
	for _, c := range reserved {
		n := t.nodeOf(c)
		if in.PMDPerNUMA > 0 && ((len(memNodes) > 0 && !memNodes[n]) || taken[n] >= in.PMDPerNUMA) {
			continue
		}
		taken[n]++
		out = append(out, c)
	}
	for n := range memNodes {
		if taken[n] == 0 {
			return nil, driver.Permanent(fmt.Errorf("ovs: NUMA node %d has dpdk-socket-mem but none of pmdCPUs %s is on it (node %d has CPUs %s): reserve a CPU there", n, in.PMDCPUs, n, cpuList(t.nodes[n])))
		}
	}
	return out, nil
}

// perNode renders a per-NUMA-node list (dpdk-socket-mem) after checking it has one
// value per node: a single value only covers node 0, a classic sizing bug.
func (t topology) perNode(key string, mb []int) (string, error) {
	if len(mb) != len(t.nodes) {
		return "", driver.Permanent(fmt.Errorf("ovs: %s has %d value(s) (%s) but this host has %d NUMA node(s): give one value per node, 0 for a node without DPDK NICs",
			key, len(mb), joinInts(mb), len(t.nodes)))
	}
	return joinInts(mb), nil
}

// cpuMask renders CPUs as the hex mask OVS expects ("0x6").
func cpuMask(cpus []int) string {
	m := new(big.Int)
	for _, c := range cpus {
		m.SetBit(m, c, 1)
	}
	return "0x" + m.Text(16)
}

// maskCPUs parses a hex mask back into CPUs.
func maskCPUs(mask string) ([]int, bool) {
	m, ok := new(big.Int).SetString(strings.TrimPrefix(strings.ToLower(mask), "0x"), 16)
	if !ok {
		return nil, false
	}
	var cpus []int
	for i := 0; i < m.BitLen(); i++ {
		if m.Bit(i) == 1 {
			cpus = append(cpus, i)
		}
	}
	return cpus, true
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// cpuList renders CPUs compactly ("0-3,8").
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
