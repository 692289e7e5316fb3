package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// snapshot is one observation of the links, addresses, routes (all tables) and policy
// rules of the calling thread's network namespace.
type snapshot struct {
	links  []netlink.Link
	addrs  []netlink.Addr
	routes []netlink.Route
	rules  []netlink.Rule
}

// dumpRetries bounds how often an interrupted netlink dump is retried.
const dumpRetries = 5

// withHandle runs fn with a NETLINK_ROUTE handle opened in the calling thread's
// network namespace, and closes it afterwards. A done ctx stops it before it starts.
func withHandle(ctx context.Context, fn func(h *netlink.Handle) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("host: open netlink: %w", err)
	}
	defer h.Close()
	return fn(h)
}

// conn is the NETLINK_ROUTE handle the changes of one Diff share, so that applying
// them costs one request each rather than a socket each. It is opened by the first
// change that needs it, in the network namespace of the thread applying that change,
// and closed by close; a use after close opens it again.
type conn struct {
	mu      sync.Mutex
	h       *netlink.Handle
	created map[string]netlink.Link // added through it, by name: found without a lookup
}

// do runs fn with the shared handle. A done ctx stops it before it starts.
func (c *conn) do(ctx context.Context, fn func(h *netlink.Handle) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	return fn(h)
}

func (c *conn) handle() (*netlink.Handle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == nil {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("host: open netlink: %w", err)
		}
		c.h = h
	}
	return c.h, nil
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != nil {
		c.h.Close()
		c.h = nil
	}
	c.created = nil
}

// remember notes a link the changes added (its index filled in by LinkAdd), so that
// the changes after it need not look it up by name.
func (c *conn) remember(l netlink.Link) {
	if l.Attrs().Index == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.created == nil {
		c.created = map[string]netlink.Link{}
	}
	c.created[l.Attrs().Name] = l
}

// forget drops a link the changes deleted.
func (c *conn) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.created, name)
}

// byName finds a link: one the changes added, else the kernel's of that name.
func (c *conn) byName(h *netlink.Handle, name string) (netlink.Link, error) {
	c.mu.Lock()
	l := c.created[name]
	c.mu.Unlock()
	if l != nil {
		return l, nil
	}
	return h.LinkByName(name)
}

// scope is what a snapshot holds besides every link and address.
type scope struct {
	allRoutes bool         // the routes of every table of every family
	tables    []routeTable // else only the routes of these tables
	rules     bool
}

// routeTable is one routing table of one address family.
type routeTable struct{ family, table int }

// everything is the scope of a full snapshot.
var everything = scope{allRoutes: true, rules: true}

// observe takes a snapshot of sc; dumps interrupted by concurrent changes are retried.
func observe(ctx context.Context, sc scope) (snapshot, error) {
	var s snapshot
	err := withHandle(ctx, func(h *netlink.Handle) error {
		var err error
		for range dumpRetries {
			if err = ctx.Err(); err != nil {
				return err
			}
			if s, err = dump(h, sc); !errors.Is(err, netlink.ErrDumpInterrupted) {
				return err
			}
		}
		return err
	})
	if err != nil {
		return snapshot{}, fmt.Errorf("host: observe network: %w", err)
	}
	return s, nil
}

func dump(h *netlink.Handle, sc scope) (snapshot, error) {
	links, err := h.LinkList()
	if err != nil {
		return snapshot{}, fmt.Errorf("list links: %w", err)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return snapshot{}, fmt.Errorf("list addresses: %w", err)
	}
	var rules []netlink.Rule
	if sc.rules {
		rules, err = h.RuleList(netlink.FAMILY_ALL)
		if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EAFNOSUPPORT) { // no policy routing: no rules
			return snapshot{}, fmt.Errorf("list rules: %w", err)
		}
	}
	var routes []netlink.Route
	switch {
	case sc.allRoutes:
		routes, err = h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	case len(sc.tables) > 0:
		routes, err = tableRoutes(h, sc.tables)
	}
	if err != nil {
		return snapshot{}, fmt.Errorf("list routes: %w", err)
	}
	return snapshot{links: links, addrs: addrs, routes: routes, rules: rules}, nil
}

// tableRoutes dumps the routes of the given tables only. With strict checking (Linux
// 4.20) the kernel dumps just the table asked for, and says ENOENT when it has no such
// table; without, it is one dump of every table, filtered here.
func tableRoutes(h *netlink.Handle, tables []routeTable) ([]netlink.Route, error) {
	if err := h.SetStrictCheck(true); err != nil {
		all, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		return slices.DeleteFunc(all, func(r netlink.Route) bool { return !slices.Contains(tables, routeTable{r.Family, r.Table}) }), err
	}
	defer h.SetStrictCheck(false) // a rule dump on this handle is refused when strict
	var out []netlink.Route
	for _, t := range tables {
		rs, err := h.RouteListFiltered(t.family, &netlink.Route{Table: t.table}, netlink.RT_FILTER_TABLE)
		if errors.Is(err, unix.ENOENT) {
			continue // no route has been put in that table yet
		}
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// linkByIndex finds a link in the snapshot.
func (s snapshot) linkByIndex(i int) netlink.Link {
	for _, l := range s.links {
		if l.Attrs().Index == i {
			return l
		}
	}
	return nil
}

// linkByName finds a link in the snapshot.
func (s snapshot) linkByName(name string) netlink.Link {
	for _, l := range s.links {
		if l.Attrs().Name == name {
			return l
		}
	}
	return nil
}

// linkName names index i, or "" when it is not in the snapshot.
func (s snapshot) linkName(i int) string {
	if l := s.linkByIndex(i); l != nil {
		return l.Attrs().Name
	}
	return ""
}

// toPrefix converts a kernel IPNet; IPv4 comes out unmapped.
func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones), true
}

// toAddr converts a kernel IP; IPv4 comes out unmapped. Nil gives the zero Addr.
func toAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// toIPNet converts p for netlink, keeping its host bits.
func toIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// family names an address family the way iproute2 does.
func family(a netip.Addr) string {
	if a.Is4() {
		return "inet"
	}
	return "inet6"
}

// ignoreErr returns nil when err is one of the errnos that mean "already done".
func ignoreErr(err error, done ...unix.Errno) error {
	for _, e := range done {
		if errors.Is(err, e) {
			return nil
		}
	}
	return err
}
