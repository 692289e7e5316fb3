package hostspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Facts is what the agent reports about its host (pkg/host gathers them) and what the
// planner checks a host's spec against. Every list is sorted, so two Facts of an
// unchanged host marshal to the same bytes.
type Facts struct {
	Hostname      string `json:"hostname"`
	KernelRelease string `json:"kernelRelease"`
	CPUs          int    `json:"cpus"`
	// MemoryAvailableBytes changes all the time; Hash leaves it out.
	MemoryTotalBytes     uint64 `json:"memoryTotalBytes"`
	MemoryAvailableBytes uint64 `json:"memoryAvailableBytes"`
	// Hugepages is the default hugepage size from /proc/meminfo.
	Hugepages HugepageFact `json:"hugepages"`
	NUMANodes []NUMANode   `json:"numaNodes,omitempty"`
	// HugepageSizes are the system-wide pools, smallest page size first.
	HugepageSizes []HugepageFact `json:"hugepageSizes,omitempty"`
	CPUTopology   []CPUFact      `json:"cpuTopology,omitempty"`
	// IsolatedCPUs (isolcpus=) and NoHZFullCPUs (nohz_full=) are the CPUs the kernel
	// keeps free for dedicated threads such as OVS-DPDK's PMDs.
	IsolatedCPUs []int       `json:"isolatedCPUs,omitempty"`
	NoHZFullCPUs []int       `json:"nohzFullCPUs,omitempty"`
	Links        []LinkFact  `json:"links"`
	Addresses    []AddrFact  `json:"addresses"`
	Routes       []RouteFact `json:"routes"`
	// KubeCertificates are kubeadm's control-plane certificates on a controller
	// (kubeinstall.CertificateValidity); the agent adds them, Gather does not.
	KubeCertificates []api.CertValidity `json:"kubeCertificates,omitempty"`
}

// LinkFact is one network link as netlink reports it.
type LinkFact struct {
	Name      string `json:"name"`
	Index     int    `json:"index"`
	MAC       string `json:"mac,omitempty"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operState"`
	AdminUp   bool   `json:"adminUp"`
	// Kind is the netlink link type: "device" for hardware, "veth", "bridge", ...
	Kind string `json:"kind"`
	// Driver is the kernel driver, best effort; empty if unknown.
	Driver string `json:"driver,omitempty"`
	Master string `json:"master,omitempty"`
	Alias  string `json:"alias,omitempty"`
}

// AddrFact is one IP address on a link.
type AddrFact struct {
	Link   string `json:"link"`
	CIDR   string `json:"cidr"`
	Family string `json:"family"` // "inet" or "inet6"
}

// RouteFact is one route; the local table is left out.
type RouteFact struct {
	Dst      string `json:"dst"` // "default" or a CIDR
	Gateway  string `json:"gateway,omitempty"`
	Dev      string `json:"dev,omitempty"`
	Metric   int    `json:"metric"`
	Table    int    `json:"table"`
	Protocol string `json:"protocol"`
}

// NUMANode is one NUMA node from /sys/devices/system/node.
type NUMANode struct {
	ID          int    `json:"id"`
	CPUs        []int  `json:"cpus"`
	MemoryBytes uint64 `json:"memoryBytes"`
	// Hugepages by page size, e.g. "2048kB".
	Hugepages map[string]HugepageFact `json:"hugepages,omitempty"`
}

// HugepageFact counts hugepages of one size.
type HugepageFact struct {
	Size  string `json:"size,omitempty"` // e.g. "2048kB"
	Total int    `json:"total"`
	Free  int    `json:"free"`
}

// CPUFact is one online CPU's place in the topology: OVS-DPDK PMD threads and the
// vswitch's housekeeping cores are picked per NUMA node, with hyperthread siblings
// kept together.
type CPUFact struct {
	CPU      int   `json:"cpu"`
	Core     int   `json:"core"`
	Package  int   `json:"package"`
	Node     int   `json:"node"`
	Siblings []int `json:"siblings,omitempty"`
}

// Hash is a short hex digest of f that changes when any fact but
// MemoryAvailableBytes changes.
func (f Facts) Hash() string {
	f.MemoryAvailableBytes = 0
	b, err := json.Marshal(f)
	if err != nil { // cannot happen: Facts holds only plain values
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}
