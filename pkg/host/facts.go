package host

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

// The facts' types are the contract between the agent and the planner, which checks
// a host's spec against them; they live in hostspec so the planner links no driver.
type (
	Facts        = hostspec.Facts
	LinkFact     = hostspec.LinkFact
	AddrFact     = hostspec.AddrFact
	RouteFact    = hostspec.RouteFact
	NUMANode     = hostspec.NUMANode
	HugepageFact = hostspec.HugepageFact
	CPUFact      = hostspec.CPUFact
)

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
	snap, err := observe(ctx, everything)
	if err != nil {
		return Facts{}, err
	}
	f.Links, f.Addresses, f.Routes = networkFacts(snap, opts.Root)
	return f, nil
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
