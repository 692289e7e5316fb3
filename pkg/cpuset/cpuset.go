// Package cpuset reads the kernel's CPU list notation ("0-3,8,10-11"), which the
// manifest (PMD and reserved cores), /sys (NUMA nodes, online CPUs) and OVS all use,
// so that every part of Plinth agrees on what a list means.
package cpuset

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU numbers accepted, so garbage cannot ask for huge lists.
const MaxCPU = 1<<16 - 1

// Parse returns the sorted, distinct CPUs of a list. Empty parts are skipped, so ""
// is an empty list (a memory-only NUMA node has no CPUs).
func Parse(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %q is not a CPU number", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %q is not a CPU number", s, hi)
			}
		}
		if a < 0 || b < a || b > MaxCPU {
			return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// Format renders sorted, distinct CPUs in the same notation, ranges compacted
// ("0-3,8"), so messages quote CPU sets the way the manifest and /sys write them.
func Format(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
