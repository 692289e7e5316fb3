package host

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Facts is what the agent reports about its host. Gather sorts every list, so two
// Facts of an unchanged host marshal to the same bytes.
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

// GatherOptions tunes Gather.
type GatherOptions struct {
	// Root is prepended to /proc and /sys paths; "" means the real ones. Network facts
	// always come from netlink in the calling thread's namespace.
	Root string
}

// Gather reads the facts of the calling thread's network namespace and of the host.
func Gather(ctx context.Context) (Facts, error) {
	return GatherWith(ctx, GatherOptions{})
}

// GatherWith is Gather with options.
func GatherWith(ctx context.Context, opts GatherOptions) (Facts, error) {
	var f Facts
	if err := gatherSystem(opts.Root, &f); err != nil {
		return Facts{}, err
	}
	if err := ctx.Err(); err != nil {
		return Facts{}, fmt.Errorf("host: gather facts: %w", err)
	}
	snap, err := observe(ctx)
	if err != nil {
		return Facts{}, err
	}
	f.Links, f.Addresses, f.Routes = networkFacts(snap, opts.Root)
	return f, nil
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

func networkFacts(s snapshot, root string) ([]LinkFact, []AddrFact, []RouteFact) {
	links := make([]LinkFact, 0, len(s.links))
	for _, l := range s.links {
		a := l.Attrs()
		links = append(links, LinkFact{
			Name:      a.Name,
			Index:     a.Index,
			MAC:       a.HardwareAddr.String(),
			MTU:       a.MTU,
			OperState: a.OperState.String(),
			AdminUp:   a.Flags&net.FlagUp != 0,
			Kind:      l.Type(),
			Driver:    linkDriver(root, a),
			Master:    s.linkName(a.MasterIndex),
			Alias:     a.Alias,
		})
	}
	slices.SortFunc(links, func(a, b LinkFact) int { return cmp.Compare(a.Name, b.Name) })

	addrs := make([]AddrFact, 0, len(s.addrs))
	for _, ad := range s.addrs {
		p, ok := toPrefix(ad.IPNet)
		if !ok {
			continue
		}
		addrs = append(addrs, AddrFact{Link: s.linkName(ad.LinkIndex), CIDR: p.String(), Family: family(p.Addr())})
	}
	slices.SortFunc(addrs, func(a, b AddrFact) int {
		return cmp.Or(cmp.Compare(a.Link, b.Link), cmp.Compare(a.Family, b.Family), cmp.Compare(a.CIDR, b.CIDR))
	})

	routes := make([]RouteFact, 0, len(s.routes))
	for _, r := range s.routes {
		if r.Table == unix.RT_TABLE_LOCAL {
			continue
		}
		rf := RouteFact{Dev: s.linkName(r.LinkIndex), Metric: r.Priority, Table: r.Table, Protocol: r.Protocol.String()}
		if p, ok := toPrefix(r.Dst); ok && p.Bits() > 0 {
			rf.Dst = p.String()
		} else {
			rf.Dst = "default"
		}
		if gw := toAddr(r.Gw); gw.IsValid() {
			rf.Gateway = gw.String()
		}
		routes = append(routes, rf)
	}
	slices.SortFunc(routes, func(a, b RouteFact) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Metric, b.Metric),
			cmp.Compare(a.Dev, b.Dev), cmp.Compare(a.Gateway, b.Gateway))
	})
	return links, addrs, routes
}

// linkDriver asks the kernel through the ethtool ioctl (namespace-correct), then falls
// back to the /sys device symlink, trusted only when that entry's ifindex and MAC match:
// outside the root namespace /sys may describe a different link of the same name.
func linkDriver(root string, a *netlink.LinkAttrs) string {
	if root == "" {
		if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err == nil {
			info, err := unix.IoctlGetEthtoolDrvinfo(fd, a.Name)
			unix.Close(fd)
			if err == nil {
				if d := string(bytes.TrimRight(info.Driver[:], "\x00")); d != "" {
					return d
				}
			}
		}
	}
	dir := root + "/sys/class/net/" + a.Name
	if readTrim(dir+"/ifindex") != fmt.Sprint(a.Index) || readTrim(dir+"/address") != a.HardwareAddr.String() {
		return ""
	}
	return symlinkBase(dir + "/device/driver")
}
