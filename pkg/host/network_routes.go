package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// keyOf is the routeKey of a kernel route.
func keyOf(r netlink.Route) (routeKey, bool) {
	p, ok := toPrefix(r.Dst)
	if !ok {
		return routeKey{}, false
	}
	return routeKey{Dst: p.Masked().String(), Table: r.Table, Metric: r.Priority}, true
}

// findRoute returns the first route in routes with key k.
func findRoute(routes []netlink.Route, k routeKey) (netlink.Route, bool) {
	for _, r := range routes {
		if rk, ok := keyOf(r); ok && rk == k {
			return r, true
		}
	}
	return netlink.Route{}, false
}

// planRoute adds a missing route or replaces one whose gateway, dev, MTU or type
// differ. Replacing a route Plinth did not add does not make it owned.
func (p *planner) planRoute(w wantRoute) error {
	var dev linkRef
	fresh := false
	if w.Dev != "" {
		if lp := p.links[w.Dev]; lp != nil {
			dev, fresh = lp.ref(), lp.fresh
		} else if l := p.snap.linkByName(w.Dev); l != nil {
			dev = linkRef{name: l.Attrs().Name, index: l.Attrs().Index}
		} else {
			return driver.Permanent(fmt.Errorf("host: %s: link %s not found", w.describe(), w.Dev))
		}
	}
	want := netlink.Route{
		Dst:      toIPNet(w.dst),
		Table:    w.key.Table,
		Priority: w.key.Metric,
		MTU:      w.MTU,
		Protocol: unix.RTPROT_STATIC,
	}
	if w.gw.IsValid() {
		want.Gw = w.gw.AsSlice()
	} else if w.dst.Addr().Is4() {
		want.Scope = netlink.SCOPE_LINK
	}

	var summary string
	have, exists := p.routes[w.key]
	if exists {
		diffs := routeDiffs(p.snap, have, w, dev.index)
		if fresh {
			diffs = append(diffs, "dev "+w.Dev+" is new")
		}
		if len(diffs) == 0 {
			return nil
		}
		summary = fmt.Sprintf("%s: replace (%s)", w.describe(), strings.Join(diffs, ", "))
	} else {
		summary = w.describe() + ": add"
		p.intent.routes = append(p.intent.routes, w.key)
	}
	s := undoable{
		summary: summary,
		apply: func(ctx context.Context) error {
			if !exists {
				if err := p.intent.record(); err != nil {
					return err
				}
			}
			return p.c.do(ctx, func(h *netlink.Handle) error {
				r := want // RouteReplace may fill in fields
				if w.Dev != "" {
					l, err := dev.get(p.c, h)
					if err != nil {
						return fmt.Errorf("host: %s: %w", w.describe(), err)
					}
					r.LinkIndex = l.Attrs().Index
				}
				if err := h.RouteReplace(&r); err != nil {
					return fmt.Errorf("host: %s: %w", w.describe(), err)
				}
				return nil
			})
		},
		undo: func(ctx context.Context) error {
			if err := deleteRoute(ctx, p.c, w.key); err != nil {
				return err
			}
			return p.d.forgetRoute(w.key)
		},
	}
	if exists {
		s.undo = func(ctx context.Context) error { return restoreRoute(ctx, p.c, have) }
	}
	p.routeSet = append(p.routeSet, s)
	return nil
}

// restoreRoute puts an observed route back as it was.
func restoreRoute(ctx context.Context, c *conn, r netlink.Route) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		if err := h.RouteReplace(&r); err != nil {
			return fmt.Errorf("host: restore route %s: %w", r.Dst, err)
		}
		return nil
	})
}

// routeDiffs lists how have differs from w, e.g. "gateway 10.0.0.2 -> 10.0.0.1".
func routeDiffs(s snapshot, have netlink.Route, w wantRoute, idx int) []string {
	var d []string
	if gw := toAddr(have.Gw); gw != w.gw || len(have.MultiPath) > 0 {
		d = append(d, fmt.Sprintf("gateway %s -> %s", showAddr(gw, len(have.MultiPath) > 0), showAddr(w.gw, false)))
	}
	if idx != 0 && have.LinkIndex != idx {
		d = append(d, fmt.Sprintf("dev %s -> %s", s.linkName(have.LinkIndex), w.Dev))
	}
	if have.MTU != w.MTU {
		d = append(d, fmt.Sprintf("mtu %d -> %d", have.MTU, w.MTU))
	}
	if have.Type != unix.RTN_UNICAST {
		d = append(d, fmt.Sprintf("type %d -> unicast", have.Type))
	}
	return d
}

func showAddr(a netip.Addr, multipath bool) string {
	switch {
	case multipath:
		return "multipath"
	case a.IsValid():
		return a.String()
	default:
		return "none"
	}
}

// planOwnedRoutes removes the routes Plinth added that are no longer wanted, and
// forgets those already gone.
func (p *planner) planOwnedRoutes(want map[routeKey]bool) {
	for _, k := range p.owned.Routes {
		if want[k] {
			continue
		}
		label := "route " + showDst(k.Dst) + keySuffix(k)
		if _, ok := p.routes[k]; !ok {
			p.routeDel = append(p.routeDel, undoable{
				summary: label + ": forget (already gone)",
				apply:   func(context.Context) error { return p.d.forgetRoute(k) },
			})
			continue
		}
		have := p.routes[k]
		p.routeDel = append(p.routeDel, undoable{
			summary: label + ": remove",
			apply: func(ctx context.Context) error {
				if err := deleteRoute(ctx, p.c, k); err != nil {
					return fmt.Errorf("host: remove %s: %w", label, err)
				}
				return p.d.forgetRoute(k)
			},
			undo: func(ctx context.Context) error {
				if err := p.d.state.update(func(s *ownedState) { s.Routes = append(s.Routes, k) }); err != nil {
					return err
				}
				return restoreRoute(ctx, p.c, have)
			},
		})
	}
}

// deleteRoute deletes the route with key k if it is still there. It looks the route up
// again first: a delete by key alone would let the kernel pick another metric.
func deleteRoute(ctx context.Context, c *conn, k routeKey) error {
	dst, err := netip.ParsePrefix(k.Dst)
	if err != nil {
		return driver.Permanent(fmt.Errorf("host: state: %w", err))
	}
	return c.do(ctx, func(h *netlink.Handle) error {
		fam := netlink.FAMILY_V4
		if dst.Addr().Is6() {
			fam = netlink.FAMILY_V6
		}
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: k.Table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		r, ok := findRoute(routes, k)
		if !ok {
			return nil
		}
		return ignoreErr(h.RouteDel(&r), unix.ESRCH, unix.ENOENT)
	})
}

func (d *NetworkDriver) forgetRoute(k routeKey) error {
	return d.state.update(func(s *ownedState) {
		s.Routes = slices.DeleteFunc(s.Routes, func(o routeKey) bool { return o == k })
	})
}

func parseRoute(s hostspec.RouteSpec) (wantRoute, error) {
	w := wantRoute{RouteSpec: s}
	if s.Gateway != "" {
		gw, err := netip.ParseAddr(s.Gateway)
		if err != nil {
			return w, fmt.Errorf("gateway: %w", err)
		}
		w.gw = gw
	}
	switch {
	case s.Dst == "default" && w.gw.Is6():
		w.dst = netip.MustParsePrefix("::/0")
	case s.Dst == "default":
		w.dst = netip.MustParsePrefix("0.0.0.0/0")
	default:
		p, err := netip.ParsePrefix(s.Dst)
		if err != nil {
			return w, err
		}
		if p != p.Masked() {
			return w, fmt.Errorf("host bits set (did you mean %s?)", p.Masked())
		}
		w.dst = p
	}
	switch {
	case s.Gateway == "" && s.Dev == "":
		return w, errors.New("needs a gateway or a dev")
	case w.gw.IsValid() && w.gw.Is4() != w.dst.Addr().Is4():
		return w, errors.New("gateway and destination differ in address family")
	case s.Metric < 0 || s.Table < 0 || s.MTU < 0 || int64(s.Table) > math.MaxUint32 || int64(s.Metric) > math.MaxUint32:
		return w, errors.New("metric, table and mtu must be non-negative 32-bit numbers")
	}
	w.key = routeKey{Dst: w.dst.String(), Table: s.Table, Metric: s.Metric}
	if w.key.Table == 0 {
		w.key.Table = unix.RT_TABLE_MAIN
	}
	if w.key.Metric == 0 && w.dst.Addr().Is6() {
		w.key.Metric = 1024 // what the kernel stores for IPv6 metric 0
	}
	return w, nil
}
