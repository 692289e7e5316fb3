package host

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func addAddr(ctx context.Context, c *conn, ref linkRef, pfx netip.Prefix) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		l, err := ref.get(c, h)
		if err != nil {
			return err
		}
		addr := &netlink.Addr{IPNet: toIPNet(pfx), LinkIndex: l.Attrs().Index}
		if err := ignoreErr(h.AddrAdd(l, addr), unix.EEXIST); err != nil {
			return fmt.Errorf("host: add address %s on %s: %w", pfx, ref.name, err)
		}
		return nil
	})
}

func delAddr(ctx context.Context, c *conn, ref linkRef, pfx netip.Prefix) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		l, err := ref.get(c, h)
		if isNotFound(err) {
			return nil // gone with its link
		}
		if err != nil {
			return err
		}
		addr := &netlink.Addr{IPNet: toIPNet(pfx), LinkIndex: l.Attrs().Index}
		if err := ignoreErr(h.AddrDel(l, addr), unix.EADDRNOTAVAIL, unix.ENODEV, unix.ENOENT, unix.ESRCH); err != nil {
			return fmt.Errorf("host: remove address %s from %s: %w", pfx, ref.name, err)
		}
		return nil
	})
}

// planOwnedAddrs removes the addresses Plinth added that are no longer wanted, and
// forgets those that are already gone.
func (p *planner) planOwnedAddrs(want map[addrKey]bool) {
	for _, k := range p.owned.Addresses {
		if want[k] {
			continue
		}
		l := p.snap.linkByName(k.Link)
		pfx, err := netip.ParsePrefix(k.CIDR)
		if l == nil || err != nil || !p.addrsOn(l.Attrs().Index)[k.CIDR] {
			p.addrDel = append(p.addrDel, undoable{
				summary: fmt.Sprintf("address %s on %s: forget (already gone)", k.CIDR, k.Link),
				apply:   func(context.Context) error { return p.d.forgetAddr(k) },
			})
			continue
		}
		ref := linkRef{name: k.Link, index: l.Attrs().Index}
		p.addrDel = append(p.addrDel, undoable{
			summary: fmt.Sprintf("address %s on %s: remove", k.CIDR, k.Link),
			apply: func(ctx context.Context) error {
				if err := delAddr(ctx, p.c, ref, pfx); err != nil {
					return err
				}
				return p.d.forgetAddr(k)
			},
			undo: func(ctx context.Context) error {
				if err := p.d.state.update(func(s *ownedState) { s.Addresses = append(s.Addresses, k) }); err != nil {
					return err
				}
				return addAddr(ctx, p.c, ref, pfx)
			},
		})
	}
}

func (d *NetworkDriver) forgetAddr(k addrKey) error {
	return d.state.update(func(s *ownedState) {
		s.Addresses = slices.DeleteFunc(s.Addresses, func(o addrKey) bool { return o == k })
	})
}
