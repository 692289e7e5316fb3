package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// sysctlRoots are the top-level directories of /proc/sys a key may start with.
var sysctlRoots = []string{"abi", "crypto", "debug", "dev", "fs", "kernel", "net", "user", "vm"}

// SysctlPath converts a dotted sysctl key to its path below /proc/sys, the way
// sysctl(8) does: dots separate directories, and a '/' stands for a dot inside one
// (net.ipv4.conf.eth0/100.rp_filter is net/ipv4/conf/eth0.100/rp_filter). It returns
// false for anything that could leave /proc/sys or does not name a known tree.
func SysctlPath(key string) (string, bool) {
	parts := strings.Split(key, ".")
	if len(parts) < 2 || !slices.Contains(sysctlRoots, parts[0]) || len(key) > 256 {
		return "", false
	}
	for i, p := range parts {
		p = strings.ReplaceAll(p, "/", ".")
		if p == "" || p == "." || p == ".." || strings.ContainsFunc(p, badSysctlRune) {
			return "", false
		}
		parts[i] = p
	}
	return strings.Join(parts, "/"), true
}

func badSysctlRune(r rune) bool {
	ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:@+", r)
	return !ok
}

// sysctls checks kernel parameter names and values.
func (v *validator) sysctls(path string, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := index(path, mapKey(k))
		if _, ok := SysctlPath(k); !ok {
			v.add(p, "%q is not a sysctl name; use the dotted form, e.g. net.ipv4.ip_forward, starting with one of %s", clip(k), strings.Join(sysctlRoots, ", "))
			continue
		}
		switch val := m[k]; {
		case strings.TrimSpace(val) == "":
			v.add(p, "required: the value to set")
		case len(val) > 1024 || strings.ContainsFunc(val, func(r rune) bool { return r < ' ' && r != '\t' }):
			v.add(p, "the value must be one line of at most 1024 characters")
		}
	}
}

// hugepages checks page reservations: a known size, a non-negative count, and for
// each size either per-node entries or one system-wide entry.
func (v *validator) hugepages(path string, pages []Hugepages) {
	type key struct{ size, node int }
	seen := map[key]int{}
	global := map[int]int{} // size -> entry without a node
	nodes := map[int]int{}  // size -> first entry with a node
	for i, hp := range pages {
		p := index(path, strconv.Itoa(i))
		size, ok := HugepageSizeKB(hp.Size)
		if !ok {
			if hp.Size == "" {
				v.add(p+".size", "required: the page size, 2Mi or 1Gi")
			} else {
				v.add(p+".size", "%q is not a supported page size; valid sizes are 2Mi, 1Gi", clip(hp.Size))
			}
		}
		if hp.Count < 0 {
			v.add(p+".count", "%d is below 0", hp.Count)
		}
		node := -1
		if hp.Node != nil {
			node = *hp.Node
			if node < 0 || node > 1023 {
				v.add(p+".node", "%d is out of range; valid NUMA nodes are 0..1023", node)
			}
		}
		if !ok {
			continue
		}
		k := key{size, node}
		if first, dup := seen[k]; dup {
			v.add(p, "the same size and node as hugepages[%d]", first)
			continue
		}
		seen[k] = i
		var first int
		var mixed bool
		if node < 0 {
			global[size] = i
			first, mixed = nodes[size]
		} else {
			if _, had := nodes[size]; !had {
				nodes[size] = i
			}
			first, mixed = global[size]
		}
		if mixed {
			v.add(p+".node", "%s pages are reserved both per node and system-wide (hugepages[%d]); give every %s entry a node, or none", hp.Size, first, hp.Size)
		}
	}
}

// String renders a reservation for messages: "1024 x 2Mi on node 0".
func (h Hugepages) String() string {
	s := fmt.Sprintf("%d x %s", h.Count, h.Size)
	if h.Node != nil {
		s += fmt.Sprintf(" on node %d", *h.Node)
	}
	return s
}
