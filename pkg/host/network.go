package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NetworkDriver executes host.network steps in the network namespace of the thread
// that calls Diff and the returned Apply closures.
type NetworkDriver struct {
	state *stateStore
	log   *slog.Logger
}

var _ driver.Driver = (*NetworkDriver)(nil)

// NetworkOption configures a NetworkDriver.
type NetworkOption func(*NetworkDriver)

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) NetworkOption {
	return func(d *NetworkDriver) { d.log = l }
}

// NewNetworkDriver returns a driver that records the addresses and routes it adds in
// stateDir/host.network.owned.json.
func NewNetworkDriver(stateDir string, opts ...NetworkOption) *NetworkDriver {
	d := &NetworkDriver{state: &stateStore{}, log: slog.Default()}
	if stateDir != "" {
		d.state.path = filepath.Join(stateDir, ownedFile)
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Kind implements driver.Driver.
func (d *NetworkDriver) Kind() string { return KindNetwork }

// Diff implements driver.Driver. Changes come in this order: link MTU and admin state,
// address removals, address additions, route additions and replacements, route removals.
func (d *NetworkDriver) Diff(ctx context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	if d.state.path == "" {
		return nil, driver.Permanent(errors.New("host: network driver has no state directory"))
	}
	links, routes, err := parseNetwork(inputs)
	if err != nil {
		return nil, err
	}
	snap, err := observe(ctx)
	if err != nil {
		return nil, err
	}
	owned, err := d.state.load()
	if err != nil {
		return nil, err
	}
	p := &planner{d: d, snap: snap, owned: owned, intent: &intent{store: d.state},
		byName: map[string]netlink.Link{}, routes: map[routeKey]netlink.Route{}}
	for _, r := range snap.routes {
		if k, ok := keyOf(r); ok {
			if _, dup := p.routes[k]; !dup { // first wins, as with findRoute
				p.routes[k] = r
			}
		}
	}
	return p.plan(links, routes)
}

// planner turns one snapshot, the ownership state and the inputs into changes.
type planner struct {
	d      *NetworkDriver
	snap   snapshot
	owned  ownedState
	intent *intent
	byName map[string]netlink.Link // spec name -> resolved link, for route devs
	routes map[routeKey]netlink.Route

	links, addrDel, addrAdd, routeSet, routeDel []driver.Change
}

func (p *planner) plan(links []wantLink, routes []wantRoute) ([]driver.Change, error) {
	wantAddrs := map[addrKey]bool{}
	used := map[int]string{}
	for _, w := range links {
		l, err := p.findLink(w)
		if err != nil {
			return nil, err
		}
		a := l.Attrs()
		if prev, dup := used[a.Index]; dup {
			return nil, driver.Permanent(fmt.Errorf("host: links %s and %s are the same link %s", prev, linkWanted(w.LinkSpec), a.Name))
		}
		used[a.Index] = linkWanted(w.LinkSpec)
		if w.Name != "" {
			p.byName[w.Name] = l
		}
		p.planLink(w, l)
		for _, pfx := range w.addrs {
			wantAddrs[addrKey{Link: a.Name, CIDR: pfx.String()}] = true
		}
	}
	p.planOwnedAddrs(wantAddrs)

	wantRoutes := map[routeKey]bool{}
	for _, w := range routes {
		if err := p.planRoute(w); err != nil {
			return nil, err
		}
		wantRoutes[w.key] = true
	}
	p.planOwnedRoutes(wantRoutes)
	return slices.Concat(p.links, p.addrDel, p.addrAdd, p.routeSet, p.routeDel), nil
}

// findLink resolves a spec: by MAC when set (the name is then only a hint and is never
// applied), else by name. Missing hardware is Permanent.
func (p *planner) findLink(w wantLink) (netlink.Link, error) {
	if w.mac == nil {
		if l := p.snap.linkByName(w.Name); l != nil {
			return l, nil
		}
		return nil, driver.Permanent(fmt.Errorf("host: link %s not found", w.Name))
	}
	var found []netlink.Link
	for _, l := range p.snap.links {
		if bytes.Equal(l.Attrs().HardwareAddr, w.mac) {
			if l.Attrs().Name == w.Name {
				return l, nil
			}
			found = append(found, l)
		}
	}
	if len(found) > 1 { // e.g. a bridge that took its port's MAC: prefer the hardware
		found = slices.DeleteFunc(found, func(l netlink.Link) bool { return l.Type() != "device" })
	}
	switch len(found) {
	case 0:
		return nil, driver.Permanent(fmt.Errorf("host: link %s not found", linkWanted(w.LinkSpec)))
	case 1:
		if w.Name != "" {
			p.d.log.Warn("host: link found by mac under another name; not renaming",
				"mac", w.MAC, "wanted", w.Name, "actual", found[0].Attrs().Name)
		}
		return found[0], nil
	default:
		return nil, driver.Permanent(fmt.Errorf("host: link %s is ambiguous", linkWanted(w.LinkSpec)))
	}
}

func (p *planner) planLink(w wantLink, l netlink.Link) {
	a := l.Attrs()
	label := "link " + a.Name
	if w.Name != "" && w.Name != a.Name {
		label += " (wanted name " + w.Name + ", matched by mac)"
	}
	if w.MTU > 0 && a.MTU != w.MTU {
		p.links = append(p.links, driver.Change{
			Summary: fmt.Sprintf("%s: mtu %d -> %d", label, a.MTU, w.MTU),
			Apply: func(ctx context.Context) error {
				return withHandle(ctx, func(h *netlink.Handle) error {
					if err := h.LinkSetMTU(l, w.MTU); err != nil {
						err = fmt.Errorf("host: set mtu %d on %s: %w", w.MTU, a.Name, err)
						if errors.Is(err, unix.EINVAL) {
							return driver.Permanent(err) // out of the device's range
						}
						return err
					}
					return nil
				})
			},
		})
	}
	if up := a.Flags&net.FlagUp != 0; up != w.Up {
		verb, set := "set down", (*netlink.Handle).LinkSetDown
		if w.Up {
			verb, set = "set up", (*netlink.Handle).LinkSetUp
		}
		p.links = append(p.links, driver.Change{
			Summary: label + ": " + verb,
			Apply: func(ctx context.Context) error {
				return withHandle(ctx, func(h *netlink.Handle) error {
					if err := set(h, l); err != nil {
						return fmt.Errorf("host: %s %s: %w", verb, a.Name, err)
					}
					return nil
				})
			},
		})
	}
	have := p.addrsOn(a.Index)
	for _, pfx := range w.addrs {
		if have[pfx.String()] {
			continue // present: kept, owned or not
		}
		k := addrKey{Link: a.Name, CIDR: pfx.String()}
		p.intent.addrs = append(p.intent.addrs, k)
		addr := &netlink.Addr{IPNet: toIPNet(pfx), LinkIndex: a.Index}
		p.addrAdd = append(p.addrAdd, driver.Change{
			Summary: fmt.Sprintf("address %s on %s: add", k.CIDR, k.Link),
			Apply: func(ctx context.Context) error {
				if err := p.intent.record(); err != nil {
					return err
				}
				return withHandle(ctx, func(h *netlink.Handle) error {
					if err := ignoreErr(h.AddrAdd(nil, addr), unix.EEXIST); err != nil {
						return fmt.Errorf("host: add address %s on %s: %w", k.CIDR, k.Link, err)
					}
					return nil
				})
			},
		})
	}
}

// addrsOn is the set of CIDRs on link index i.
func (p *planner) addrsOn(i int) map[string]bool {
	out := map[string]bool{}
	for _, a := range p.snap.addrs {
		if pfx, ok := toPrefix(a.IPNet); ok && a.LinkIndex == i {
			out[pfx.String()] = true
		}
	}
	return out
}

// planOwnedAddrs removes the addresses Plinth added that are no longer wanted, and
// forgets those that are already gone.
func (p *planner) planOwnedAddrs(want map[addrKey]bool) {
	for _, k := range p.owned.Addresses {
		if want[k] {
			continue
		}
		l := p.snap.linkByName(k.Link)
		if l == nil || !p.addrsOn(l.Attrs().Index)[k.CIDR] {
			p.addrDel = append(p.addrDel, driver.Change{
				Summary: fmt.Sprintf("address %s on %s: forget (already gone)", k.CIDR, k.Link),
				Apply:   func(context.Context) error { return p.d.forgetAddr(k) },
			})
			continue
		}
		idx := l.Attrs().Index
		p.addrDel = append(p.addrDel, driver.Change{
			Summary: fmt.Sprintf("address %s on %s: remove", k.CIDR, k.Link),
			Apply: func(ctx context.Context) error {
				addr, err := netlink.ParseAddr(k.CIDR)
				if err != nil {
					return driver.Permanent(fmt.Errorf("host: state: %w", err))
				}
				addr.LinkIndex = idx
				err = withHandle(ctx, func(h *netlink.Handle) error {
					return ignoreErr(h.AddrDel(nil, addr), unix.EADDRNOTAVAIL, unix.ENODEV, unix.ENOENT, unix.ESRCH)
				})
				if err != nil {
					return fmt.Errorf("host: remove address %s from %s: %w", k.CIDR, k.Link, err)
				}
				return p.d.forgetAddr(k)
			},
		})
	}
}

func (d *NetworkDriver) forgetAddr(k addrKey) error {
	return d.state.update(func(s *ownedState) {
		s.Addresses = slices.DeleteFunc(s.Addresses, func(o addrKey) bool { return o == k })
	})
}

// intent records, once and before the first add, ownership of everything a Diff is
// about to add: a crash after recording leaves owned-but-absent entries, which the
// next Diff either adds again or forgets.
type intent struct {
	store  *stateStore
	mu     sync.Mutex
	done   bool
	addrs  []addrKey
	routes []routeKey
}

func (in *intent) record() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done {
		return nil
	}
	err := in.store.update(func(s *ownedState) {
		s.Addresses = append(s.Addresses, in.addrs...)
		s.Routes = append(s.Routes, in.routes...)
	})
	if err != nil {
		return err
	}
	in.done = true
	return nil
}

// describe renders a change target: "route 10.1.0.0/16 via 10.0.0.1 dev eth1 table 100".
func (w wantRoute) describe() string {
	var b strings.Builder
	b.WriteString("route " + showDst(w.key.Dst))
	if w.gw.IsValid() {
		b.WriteString(" via " + w.gw.String())
	}
	if w.Dev != "" {
		b.WriteString(" dev " + w.Dev)
	}
	b.WriteString(keySuffix(w.key))
	return b.String()
}

func showDst(dst string) string {
	if dst == "0.0.0.0/0" {
		return "default"
	}
	return dst
}

func keySuffix(k routeKey) string {
	var s string
	if k.Table != unix.RT_TABLE_MAIN {
		s += fmt.Sprintf(" table %d", k.Table)
	}
	if k.Metric != 0 && !(k.Metric == 1024 && strings.Contains(k.Dst, ":")) {
		s += fmt.Sprintf(" metric %d", k.Metric)
	}
	return s
}
