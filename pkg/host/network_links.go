package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resolveCreated plans a link of a kind Plinth creates: nothing when it exists as
// wanted, in-place changes for what the kernel can change, and a re-creation for what
// it cannot (kind, parent, VLAN ID, bond mode, vxlan tunnel) — but only of a link
// Plinth created itself.
func (p *planner) resolveCreated(w wantLink) (*linkPlan, error) {
	lp := &linkPlan{w: w, name: w.Name}
	l := p.snap.linkByName(w.Name)
	if l == nil {
		lp.fresh = true
		p.planCreate(lp, nil, "")
		return lp, nil
	}
	fixed, mutable := p.attrDiffs(w, l)
	if len(fixed) > 0 {
		if !p.ownsLinkNamed(w.Name) {
			return nil, driver.Permanent(fmt.Errorf("host: link %s exists as a %s that differs (%s), and Plinth did not create it, so it will not replace it; remove or rename it",
				w.Name, l.Type(), strings.Join(fixed, ", ")))
		}
		lp.fresh = true
		p.planCreate(lp, l, strings.Join(fixed, ", "))
		return lp, nil
	}
	lp.link = l
	p.planModify(lp, mutable)
	return lp, nil
}

func (p *planner) ownsLinkNamed(name string) bool {
	for _, k := range p.owned.Links {
		if k.Name == name {
			return true
		}
	}
	return false
}

// parentIndex is the index the wanted parent has in the snapshot; -1 when the parent
// is created by this run, 0 when there is none.
func (p *planner) parentIndex(name string) int {
	if name == "" {
		return 0
	}
	if lp := p.links[name]; lp != nil {
		if lp.fresh {
			return -1
		}
		return lp.link.Attrs().Index
	}
	if l := p.snap.linkByName(name); l != nil {
		return l.Attrs().Index
	}
	return -1
}

// parentName is the kernel name of a wanted parent or master.
func (p *planner) parentName(name string) string {
	if lp := p.links[name]; lp != nil {
		return lp.name
	}
	return name
}

// attrDiffs compares an existing link with the spec: fixed differences need a new
// link, mutable ones can be applied in place.
func (p *planner) attrDiffs(w wantLink, l netlink.Link) (fixed, mutable []string) {
	if l.Type() != w.Kind {
		return []string{"kind " + l.Type() + " -> " + w.Kind}, nil
	}
	parent := p.parentIndex(w.Parent)
	diff := func(list *[]string, what string, have, want any) {
		if fmt.Sprint(have) != fmt.Sprint(want) {
			*list = append(*list, fmt.Sprintf("%s %v -> %v", what, have, want))
		}
	}
	parentDiff := func(have int) {
		if have != parent {
			fixed = append(fixed, fmt.Sprintf("parent %s -> %s", orStr(p.snap.linkName(have), "none"), orStr(w.Parent, "none")))
		}
	}
	switch o := l.(type) {
	case *netlink.Vlan:
		diff(&fixed, "vlan", o.VlanId, w.VLANID)
		parentDiff(o.ParentIndex)
	case *netlink.Macvlan:
		parentDiff(o.ParentIndex)
		diff(&mutable, "mode", macvlanName(o.Mode), w.Macvlan)
	case *netlink.Vxlan:
		diff(&fixed, "vni", o.VxlanId, w.VXLAN.VNI)
		parentDiff(o.VtepDevIndex)
		diff(&fixed, "local", showIP(toAddr(o.SrcAddr)), showIP(w.local))
		diff(&fixed, "remote", showIP(toAddr(o.Group)), showIP(w.peer))
		if w.VXLAN.Port != 0 {
			diff(&fixed, "port", o.Port, w.VXLAN.Port)
		}
	case *netlink.Bond:
		diff(&fixed, "mode", o.Mode, w.bondMode)
		if w.lacpRate >= 0 {
			diff(&mutable, "lacp rate", o.LacpRate, w.lacpRate)
		}
		if w.hashPolicy >= 0 {
			diff(&mutable, "hash policy", o.XmitHashPolicy, w.hashPolicy)
		}
		if w.Bond.MIIMon > 0 {
			diff(&mutable, "miimon", o.Miimon, w.Bond.MIIMon)
		}
	}
	if w.mac != nil && !bytes.Equal(l.Attrs().HardwareAddr, w.mac) {
		mutable = append(mutable, fmt.Sprintf("mac %s -> %s", l.Attrs().HardwareAddr, w.mac))
	}
	return fixed, mutable
}

func macvlanName(m netlink.MacvlanMode) string {
	for name, v := range macvlanModes {
		if v == m {
			return name
		}
	}
	return fmt.Sprint(int(m))
}

func showIP(a netip.Addr) string {
	if !a.IsValid() || a.IsUnspecified() {
		return "none"
	}
	return a.String()
}

// describe renders what a spec creates: "vlan 100 on eno1", "bond 802.3ad".
func (p *planner) describe(w wantLink) string {
	switch w.Kind {
	case hostspec.LinkBond:
		s := "bond " + w.Bond.Mode
		var opts []string
		for _, o := range [][2]string{{"lacp ", w.Bond.LACPRate}, {"hash ", w.Bond.HashPolicy}} {
			if o[1] != "" {
				opts = append(opts, o[0]+o[1])
			}
		}
		if len(opts) > 0 {
			s += " (" + strings.Join(opts, ", ") + ")"
		}
		return s
	case hostspec.LinkVLAN:
		return fmt.Sprintf("vlan %d on %s", w.VLANID, p.parentName(w.Parent))
	case hostspec.LinkMacvlan:
		return fmt.Sprintf("macvlan %s on %s", w.Macvlan, p.parentName(w.Parent))
	case hostspec.LinkVXLAN:
		s := fmt.Sprintf("vxlan %d", w.VXLAN.VNI)
		if w.peer.IsValid() {
			s += " remote " + w.peer.String()
		}
		if w.Parent != "" {
			s += " dev " + p.parentName(w.Parent)
		}
		return s
	}
	return w.Kind
}

// planCreate plans the creation of lp, replacing old (a link Plinth owns) if set.
func (p *planner) planCreate(lp *linkPlan, old netlink.Link, why string) {
	w := lp.w
	key := linkKey{Name: w.Name, Kind: w.Kind}
	p.intent.links = append(p.intent.links, key)
	parent := p.parentName(w.Parent)
	summary := fmt.Sprintf("link %s: create %s", w.Name, p.describe(w))
	if old != nil {
		summary = fmt.Sprintf("link %s: re-create as %s (%s cannot change in place)", w.Name, p.describe(w), why)
	}
	var oldAddrs []netip.Prefix
	if old != nil {
		for pfx := range p.addrsOn(old.Attrs().Index) {
			oldAddrs = append(oldAddrs, netip.MustParsePrefix(pfx))
		}
	}
	p.create = append(p.create, undoable{
		summary: summary,
		apply: func(ctx context.Context) error {
			if old != nil {
				if err := deleteLink(ctx, p.c, old.Attrs().Name, old.Type()); err != nil {
					return err
				}
				was := linkKey{Name: old.Attrs().Name, Kind: old.Type()}
				if err := p.d.state.update(func(s *ownedState) {
					s.Links = append(deleteKeys(s.Links, func(k linkKey) bool { return k == was }), key)
				}); err != nil {
					return err
				}
			}
			if err := p.intent.record(); err != nil {
				return err
			}
			return p.c.do(ctx, func(h *netlink.Handle) error {
				l, err := newLink(p.c, h, w, parent)
				if err != nil {
					return err
				}
				if err := h.LinkAdd(l); err != nil {
					if errors.Is(err, unix.EEXIST) {
						if have, lerr := h.LinkByName(w.Name); lerr == nil && have.Type() == w.Kind {
							p.c.remember(have)
							return nil // created by an earlier, interrupted run
						}
					}
					return notSupported(fmt.Errorf("host: create %s %s: %w", w.Kind, w.Name, err), w.Kind)
				}
				p.c.remember(l)
				return nil
			})
		},
		undo: func(ctx context.Context) error {
			if err := deleteLink(ctx, p.c, w.Name, w.Kind); err != nil {
				return err
			}
			if err := p.d.forgetLink(key); err != nil || old == nil {
				return err
			}
			if err := p.d.state.update(func(s *ownedState) { s.Links = append(s.Links, linkKey{Name: old.Attrs().Name, Kind: old.Type()}) }); err != nil {
				return err
			}
			return recreate(ctx, p.c, old, oldAddrs)
		},
	})
}

// notSupported makes "this kernel has no such link type" Permanent and says so.
func notSupported(err error, kind string) error {
	if errors.Is(err, unix.EOPNOTSUPP) {
		return driver.Permanent(fmt.Errorf("%w (the kernel has no %s support: load its module)", err, kind))
	}
	return err
}

// newLink builds the netlink object that creates w, looking its parent up by name.
func newLink(c *conn, h *netlink.Handle, w wantLink, parent string) (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = w.Name
	if w.mac != nil {
		attrs.HardwareAddr = w.mac
	}
	if parent != "" {
		pl, err := c.byName(h, parent)
		if err != nil {
			return nil, fmt.Errorf("host: create %s: parent %s: %w", w.Name, parent, err)
		}
		attrs.ParentIndex = pl.Attrs().Index
	}
	switch w.Kind {
	case hostspec.LinkBridge:
		return &netlink.Bridge{LinkAttrs: attrs}, nil
	case hostspec.LinkBond:
		b := netlink.NewLinkBond(attrs)
		b.Mode, b.LacpRate, b.XmitHashPolicy = w.bondMode, w.lacpRate, w.hashPolicy
		if w.Bond.MIIMon > 0 {
			b.Miimon = w.Bond.MIIMon
		}
		return b, nil
	case hostspec.LinkVLAN:
		return &netlink.Vlan{LinkAttrs: attrs, VlanId: w.VLANID, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q}, nil
	case hostspec.LinkMacvlan:
		return &netlink.Macvlan{LinkAttrs: attrs, Mode: w.macvlanMode}, nil
	case hostspec.LinkVXLAN:
		x := &netlink.Vxlan{LinkAttrs: attrs, VxlanId: w.VXLAN.VNI, VtepDevIndex: attrs.ParentIndex, Port: w.VXLAN.Port, Learning: true}
		x.ParentIndex = 0
		if w.local.IsValid() {
			x.SrcAddr = w.local.AsSlice()
		}
		if w.peer.IsValid() {
			x.Group = w.peer.AsSlice()
		}
		return x, nil
	}
	return nil, driver.Permanent(fmt.Errorf("host: link %s: unknown kind %q", w.Name, w.Kind))
}

// planModify plans the in-place changes of an existing created link.
func (p *planner) planModify(lp *linkPlan, diffs []string) {
	if len(diffs) == 0 {
		return
	}
	w, old := lp.w, lp.link
	p.create = append(p.create, undoable{
		summary: fmt.Sprintf("%s: change %s", lp.label(), strings.Join(diffs, ", ")),
		apply:   func(ctx context.Context) error { return modifyLink(ctx, p.c, old, w) },
		undo:    func(ctx context.Context) error { return restoreLink(ctx, p.c, old) },
	})
}

// modifyLink applies a spec's mutable attributes (bond options, macvlan mode, MAC).
func modifyLink(ctx context.Context, c *conn, l netlink.Link, w wantLink) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		a := netlink.LinkAttrs{Index: l.Attrs().Index, Name: l.Attrs().Name}
		var err error
		switch l.(type) {
		case *netlink.Bond:
			b := netlink.NewLinkBond(a)
			b.LacpRate, b.XmitHashPolicy = w.lacpRate, w.hashPolicy
			if w.Bond.MIIMon > 0 {
				b.Miimon = w.Bond.MIIMon
			}
			err = h.LinkModify(b)
		case *netlink.Macvlan:
			err = h.LinkModify(&netlink.Macvlan{LinkAttrs: a, Mode: w.macvlanMode})
		}
		if err == nil && w.mac != nil && !bytes.Equal(l.Attrs().HardwareAddr, w.mac) {
			err = h.LinkSetHardwareAddr(l, w.mac)
		}
		if err != nil {
			return fmt.Errorf("host: change %s: %w", a.Name, err)
		}
		return nil
	})
}

// restoreLink puts an observed link's mutable attributes back.
func restoreLink(ctx context.Context, c *conn, l netlink.Link) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		var err error
		switch o := l.(type) {
		case *netlink.Bond:
			b := netlink.NewLinkBond(netlink.LinkAttrs{Index: o.Index, Name: o.Name})
			b.LacpRate, b.XmitHashPolicy, b.Miimon = o.LacpRate, o.XmitHashPolicy, o.Miimon
			err = h.LinkModify(b)
		case *netlink.Macvlan:
			err = h.LinkModify(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Index: o.Index, Name: o.Name}, Mode: o.Mode})
		}
		if err == nil {
			err = h.LinkSetHardwareAddr(l, l.Attrs().HardwareAddr)
		}
		return err
	})
}

// deleteLink deletes the link named name if it is still of kind.
func deleteLink(ctx context.Context, c *conn, name, kind string) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		c.forget(name)
		l, err := h.LinkByName(name)
		if err != nil {
			if isNotFound(err) {
				return nil
			}
			return fmt.Errorf("host: delete %s: %w", name, err)
		}
		if l.Type() != kind {
			return nil
		}
		if err := ignoreErr(h.LinkDel(l), unix.ENODEV); err != nil {
			return fmt.Errorf("host: delete %s %s: %w", kind, name, err)
		}
		return nil
	})
}

// recreate adds an observed link again (with its MTU, MAC, admin state and the given
// addresses): the undo of a deletion, best effort.
func recreate(ctx context.Context, c *conn, old netlink.Link, addrs []netip.Prefix) error {
	o := old.Attrs()
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU, attrs.HardwareAddr, attrs.ParentIndex = o.Name, o.MTU, o.HardwareAddr, o.ParentIndex
	attrs.Flags = o.Flags & net.FlagUp
	var l netlink.Link
	switch x := old.(type) {
	case *netlink.Bridge:
		l = &netlink.Bridge{LinkAttrs: attrs}
	case *netlink.Bond:
		b := netlink.NewLinkBond(attrs)
		b.Mode, b.LacpRate, b.XmitHashPolicy, b.Miimon = x.Mode, x.LacpRate, x.XmitHashPolicy, x.Miimon
		l = b
	case *netlink.Vlan:
		l = &netlink.Vlan{LinkAttrs: attrs, VlanId: x.VlanId, VlanProtocol: x.VlanProtocol}
	case *netlink.Macvlan:
		l = &netlink.Macvlan{LinkAttrs: attrs, Mode: x.Mode}
	case *netlink.Vxlan:
		attrs.ParentIndex = 0
		l = &netlink.Vxlan{LinkAttrs: attrs, VxlanId: x.VxlanId, VtepDevIndex: x.VtepDevIndex, SrcAddr: x.SrcAddr,
			Group: x.Group, Port: x.Port, Learning: x.Learning, TTL: x.TTL, TOS: x.TOS}
	default:
		return fmt.Errorf("host: cannot re-create %s link %s", old.Type(), o.Name)
	}
	err := c.do(ctx, func(h *netlink.Handle) error {
		if err := h.LinkAdd(l); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return nil
			}
			return fmt.Errorf("host: re-create %s: %w", o.Name, err)
		}
		c.remember(l)
		return nil
	})
	for _, a := range addrs {
		err = errors.Join(err, addAddr(ctx, c, linkRef{name: o.Name}, a))
	}
	return err
}

// isNotFound reports a netlink lookup of a link that does not exist.
func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

func deleteKeys[T any](s []T, del func(T) bool) []T {
	out := s[:0]
	for _, k := range s {
		if !del(k) {
			out = append(out, k)
		}
	}
	return out
}
