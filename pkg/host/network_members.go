package host

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
)

// planMember attaches lp to the bond or bridge its spec names. The master is a link
// of the inputs or, failing that, any existing link of that name.
func (p *planner) planMember(lp *linkPlan) error {
	w := lp.w
	if w.Master == "" {
		return nil
	}
	master, masterIdx, isBond := p.parentName(w.Master), -1, false
	if mp := p.links[w.Master]; mp != nil {
		isBond = mp.w.Kind == hostspec.LinkBond || (!mp.fresh && mp.link.Type() == "bond")
		if !mp.fresh {
			masterIdx = mp.link.Attrs().Index
		}
	} else if l := p.snap.linkByName(w.Master); l != nil {
		masterIdx, isBond = l.Attrs().Index, l.Type() == "bond"
	} else {
		return driver.Permanent(fmt.Errorf("host: %s: master %s not found", lp.label(), w.Master))
	}
	oldIdx := 0
	if !lp.fresh {
		oldIdx = lp.link.Attrs().MasterIndex
	}
	if oldIdx == masterIdx {
		return nil
	}
	oldName := p.snap.linkName(oldIdx)
	key := memberKey{Link: lp.name, Master: master}
	p.intent.members = append(p.intent.members, key)
	ref := lp.ref()
	p.members = append(p.members, undoable{
		summary: fmt.Sprintf("%s: master %s -> %s", lp.label(), orStr(oldName, "none"), master),
		apply: func(ctx context.Context) error {
			if err := p.intent.record(); err != nil {
				return err
			}
			return setMaster(ctx, p.c, ref, master, isBond, w.Up)
		},
		undo: func(ctx context.Context) error {
			if err := setMaster(ctx, p.c, ref, oldName, false, false); err != nil {
				return err
			}
			return p.d.forgetMember(key)
		},
	})
	return nil
}

// setMaster makes ref a member of master ("" releases it). A bond takes only links
// that are down; bring it up again afterwards if wanted.
func setMaster(ctx context.Context, c *conn, ref linkRef, master string, bond, up bool) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		l, err := ref.get(c, h)
		if err != nil {
			return err
		}
		if master == "" {
			if err := h.LinkSetNoMaster(l); err != nil {
				return fmt.Errorf("host: release %s: %w", ref.name, err)
			}
			return nil
		}
		m, err := c.byName(h, master)
		if err != nil {
			return fmt.Errorf("host: %s: master %s: %w", ref.name, master, err)
		}
		if bond {
			if err := h.LinkSetDown(l); err != nil {
				return fmt.Errorf("host: set %s down to join %s: %w", ref.name, master, err)
			}
		}
		if err := h.LinkSetMasterByIndex(l, m.Attrs().Index); err != nil {
			return notSupported(fmt.Errorf("host: make %s a member of %s: %w", ref.name, master, err), m.Type())
		}
		if bond && up {
			if err := h.LinkSetUp(l); err != nil {
				return fmt.Errorf("host: set %s up in %s: %w", ref.name, master, err)
			}
		}
		return nil
	})
}

// planOwnedMembers releases the links Plinth attached to a master that no spec asks
// for any more, and forgets attachments that are gone. A link that moves to another
// master is handled by planMember.
func (p *planner) planOwnedMembers() {
	wanted := map[string]string{} // kernel name -> wanted master
	for _, lp := range p.order {
		if lp.w.Master != "" {
			wanted[lp.name] = p.parentName(lp.w.Master)
		}
	}
	for _, k := range p.owned.Members {
		m, ok := wanted[k.Link]
		if ok && m == k.Master {
			continue
		}
		l := p.snap.linkByName(k.Link)
		forget := func(context.Context) error { return p.d.forgetMember(k) }
		if ok || l == nil || p.snap.linkName(l.Attrs().MasterIndex) != k.Master {
			p.members = append(p.members, undoable{summary: fmt.Sprintf("link %s: forget membership of %s (changed or gone)", k.Link, k.Master), apply: forget})
			continue
		}
		ref := linkRef{name: k.Link, index: l.Attrs().Index}
		p.members = append(p.members, undoable{
			summary: fmt.Sprintf("link %s: leave %s", k.Link, k.Master),
			apply: func(ctx context.Context) error {
				if err := setMaster(ctx, p.c, ref, "", false, false); err != nil {
					return err
				}
				return p.d.forgetMember(k)
			},
			undo: func(ctx context.Context) error {
				if err := p.d.state.update(func(s *ownedState) { s.Members = append(s.Members, k) }); err != nil {
					return err
				}
				return setMaster(ctx, p.c, ref, k.Master, false, false)
			},
		})
	}
}

func (d *NetworkDriver) forgetMember(k memberKey) error {
	return d.state.update(func(s *ownedState) {
		s.Members = deleteKeys(s.Members, func(o memberKey) bool { return o == k })
	})
}

// planOwnedLinks deletes the links Plinth created that no spec names any more: links
// on a parent first, then bridges and bonds.
func (p *planner) planOwnedLinks() {
	wanted := map[string]bool{}
	for _, lp := range p.order {
		wanted[lp.name] = true
	}
	var upper, lower []undoable
	for _, k := range p.owned.Links {
		if wanted[k.Name] {
			continue // kept, changed or re-created by resolveCreated, or now configured as it is
		}
		l := p.snap.linkByName(k.Name)
		if l == nil || l.Type() != k.Kind {
			p.linkDel = append(p.linkDel, undoable{
				summary: fmt.Sprintf("link %s: forget %s (already gone)", k.Name, k.Kind),
				apply:   func(context.Context) error { return p.d.forgetLink(k) },
			})
			continue
		}
		var addrs []netip.Prefix
		for a := range p.addrsOn(l.Attrs().Index) {
			addrs = append(addrs, netip.MustParsePrefix(a))
		}
		s := undoable{
			summary: fmt.Sprintf("link %s: delete %s (no longer declared)", k.Name, k.Kind),
			apply: func(ctx context.Context) error {
				if err := deleteLink(ctx, p.c, k.Name, k.Kind); err != nil {
					return err
				}
				return p.d.forgetLink(k)
			},
			undo: func(ctx context.Context) error {
				if err := p.d.state.update(func(s *ownedState) { s.Links = append(s.Links, k) }); err != nil {
					return err
				}
				return recreate(ctx, p.c, l, addrs)
			},
		}
		if l.Attrs().ParentIndex != 0 || k.Kind == hostspec.LinkVXLAN {
			upper = append(upper, s)
		} else {
			lower = append(lower, s)
		}
	}
	p.linkDel = append(p.linkDel, upper...)
	p.linkDel = append(p.linkDel, lower...)
}

func (d *NetworkDriver) forgetLink(k linkKey) error {
	return d.state.update(func(s *ownedState) {
		s.Links = deleteKeys(s.Links, func(o linkKey) bool { return o == k })
	})
}
