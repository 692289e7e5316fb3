package api

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

var (
	maxVNI          = 1<<24 - 1
	maxRulePriority = 32765 // 0, 32766 and 32767 hold the kernel's own rules
)

// interfaceType checks that an interface's type is known and that it sets exactly the
// fields of its type.
func (v *validator) interfaceType(p string, in *Interface) {
	v.oneOf(p+".type", in.Type, true, InterfaceTypes...)
	t := orDefault(in.Type, InterfaceEthernet)
	switch {
	case len(in.Members) > 0 && t != InterfaceBond && t != InterfaceBridge:
		v.add(p+".members", "only a bond or a bridge has members; this interface is of type %s", t)
	case len(in.Members) == 0 && t == InterfaceBond:
		v.add(p+".members", "required: the interfaces to bond, e.g. [eno1, eno2]")
	}
	switch {
	case in.Parent == "" && (t == InterfaceVLAN || t == InterfaceMacvlan):
		v.add(p+".parent", "required: the interface a %s sits on, e.g. eno1", t)
	case in.Parent != "" && t != InterfaceVLAN && t != InterfaceMacvlan && t != InterfaceVXLAN:
		v.add(p+".parent", "only a vlan, macvlan or vxlan has a parent; this interface is of type %s", t)
	}
	switch {
	case in.VLAN != 0 && t != InterfaceVLAN:
		v.add(p+".vlan", "only a vlan interface has a vlan id; add an interface of type vlan with parent %q", in.Name)
	case in.VLAN < 0 || in.VLAN > 4094:
		v.add(p+".vlan", "%d is out of range; valid VLAN IDs are 1..4094", in.VLAN)
	}
	v.bondOptions(p+".bond", t, in.Bond)
	if m := in.Macvlan; m != nil {
		if t != InterfaceMacvlan {
			v.add(p+".macvlan", "only a macvlan has macvlan options; this interface is of type %s", t)
		} else {
			v.oneOf(p+".macvlan.mode", m.Mode, true, MacvlanModes...)
		}
	}
	switch x := in.VXLAN; {
	case x == nil && t == InterfaceVXLAN:
		v.add(p+".vxlan", "required: the tunnel's options, at least vni")
	case x != nil && t != InterfaceVXLAN:
		v.add(p+".vxlan", "only a vxlan has vxlan options; this interface is of type %s", t)
	case x != nil:
		v.vxlanOptions(p+".vxlan", x)
	}
}

func (v *validator) bondOptions(p, t string, b *BondOptions) {
	if b == nil {
		return
	}
	if t != InterfaceBond {
		v.add(p, "only a bond has bond options; this interface is of type %s", t)
		return
	}
	v.oneOf(p+".mode", b.Mode, true, BondModes...)
	mode := orDefault(b.Mode, DefaultBondMode)
	if b.LACPRate != "" && mode != BondLACP {
		v.add(p+".lacpRate", "only mode 802.3ad uses lacpRate; this bond is %s", mode)
	} else {
		v.oneOf(p+".lacpRate", b.LACPRate, true, BondLACPRates...)
	}
	if b.HashPolicy != "" && mode == BondActiveBackup {
		v.add(p+".hashPolicy", "mode active-backup sends on one member and has no hashPolicy")
	} else {
		v.oneOf(p+".hashPolicy", b.HashPolicy, true, BondHashPolicies...)
	}
	if b.MIIMon < 0 {
		v.add(p+".miimon", "%d is below 0", b.MIIMon)
	}
}

func (v *validator) vxlanOptions(p string, x *VXLANOptions) {
	if x.VNI < 1 || x.VNI > maxVNI {
		v.add(p+".vni", "%d is out of range; valid VNIs are 1..%d", x.VNI, maxVNI)
	}
	var local netip.Addr
	if x.Local != "" {
		local, _ = v.ip(p+".local", x.Local)
	}
	if x.Remote != "" {
		if r, ok := v.ip(p+".remote", x.Remote); ok && local.IsValid() && r.Unmap().Is4() != local.Unmap().Is4() {
			v.add(p+".remote", "%s is %s but local %s is %s", r, family(r.Unmap()), local, family(local.Unmap()))
		}
	}
	if x.Port < 0 || x.Port > math.MaxUint16 {
		v.add(p+".port", "%d is out of range; valid ports are 1..65535 (0 for %d)", x.Port, DefaultVXLANPort)
	}
}

// carriedNetworks checks what follows from the networks each interface carries: one
// interface per network on a host (data networks excepted), an MTU no lower than
// theirs, a pool for allocate, and a VLAN ID for a vlan interface.
func (v *validator) carriedNetworks(path string, h *HostSpec, nets map[string]Network) {
	if nets == nil {
		return // no site: nothing to resolve against
	}
	carried := map[string]int{}   // network -> first interface carrying it
	allocated := map[string]int{} // network -> interface allocating from it
	for i := range h.Interfaces {
		in := &h.Interfaces[i]
		p := index(path, strconv.Itoa(i))
		var tags []int
		var tagNets []string
		pool := false
		topMTU, topNet := 0, ""
		for j, name := range in.Networks {
			n, ok := nets[name]
			if !ok {
				continue
			}
			if first, dup := carried[name]; dup && first != i && n.Role != NetworkData {
				v.add(index(p+".networks", strconv.Itoa(j)), "network %q is already carried by interfaces[%d]; a host carries a %s network on one interface", name, first, n.Role)
			} else if !dup {
				carried[name] = i
			}
			if mtu := orDefault(n.MTU, DefaultNetworkMTU); mtu > topMTU {
				topMTU, topNet = mtu, name
			}
			pool = pool || n.Pool != nil
			if n.VLAN > 0 && !slices.Contains(tags, n.VLAN) {
				tags = append(tags, n.VLAN)
				tagNets = append(tagNets, name)
			}
		}
		if in.MTU >= 68 && in.MTU <= math.MaxUint16 && in.MTU < topMTU {
			v.add(p+".mtu", "%d is below the mtu of network %q (%d) that this interface carries", in.MTU, topNet, topMTU)
		}
		if in.Allocate && !pool {
			v.add(p+".allocate", "none of the networks this interface carries has a pool; add one or remove allocate")
		}
		for _, name := range AllocatesFrom(h, in, nets) {
			if first, dup := allocated[name]; dup {
				v.add(p+".allocate", "interfaces[%d] already takes an address from network %q; a host gets one per network", first, name)
			} else {
				allocated[name] = i
			}
		}
		if orDefault(in.Type, InterfaceEthernet) != InterfaceVLAN {
			continue
		}
		switch {
		case in.VLAN == 0 && len(tags) == 0:
			v.add(p+".vlan", "required: the 802.1q ID (1..4094), or carry a network that has a vlan")
		case in.VLAN == 0 && len(tags) > 1:
			v.add(p+".vlan", "the carried networks have different vlans (%s %d, %s %d); set the one to use", tagNets[0], tags[0], tagNets[1], tags[1])
		case in.VLAN != 0:
			for k, tag := range tags {
				if tag != in.VLAN {
					v.add(p+".vlan", "%d differs from vlan %d of network %q that this interface carries", in.VLAN, tag, tagNets[k])
				}
			}
		}
	}
}

// VLANOf is the 802.1q ID of a vlan interface: its own, else that of the (single)
// tagged network it carries; 0 when there is none.
func VLANOf(in *Interface, nets map[string]Network) int {
	if in.VLAN != 0 {
		return in.VLAN
	}
	for _, name := range in.Networks {
		if n := nets[name]; n.VLAN > 0 {
			return n.VLAN
		}
	}
	return 0
}

// EffectiveMTU is the MTU the planner gives an interface: its own, else the largest
// of the networks it carries (defaulted); 0 leaves the kernel's.
func EffectiveMTU(in *Interface, nets map[string]Network) int {
	if in.MTU != 0 {
		return in.MTU
	}
	mtu := 0
	for _, name := range in.Networks {
		if n, ok := nets[name]; ok {
			mtu = max(mtu, orDefault(n.MTU, DefaultNetworkMTU))
		}
	}
	return mtu
}

// topology checks the references between a host's interfaces: members and parents
// exist, a member has one master and no addresses, there are no cycles, and no
// interface has a larger MTU than one it sits on.
func (v *validator) topology(path string, ifaces []Interface, names map[string]int, nets map[string]Network) {
	at := func(i int) string { return index(path, strconv.Itoa(i)) }
	memberOf := map[int]int{}
	vlans := map[[2]int]int{} // parent, vlan -> interface
	lowers := make([][]int, len(ifaces))
	for i := range ifaces {
		in := &ifaces[i]
		t := orDefault(in.Type, InterfaceEthernet)
		for j, m := range in.Members {
			if t != InterfaceBond && t != InterfaceBridge {
				break // reported by interfaceType
			}
			mp := index(at(i)+".members", strconv.Itoa(j))
			k, ok := names[m]
			switch {
			case m == "":
				v.add(mp, "required: the name of an interface of this host")
				continue
			case !ok:
				v.add(mp, "no interface named %q on this host; declare it under interfaces", clip(m))
				continue
			case k == i:
				v.add(mp, "an interface cannot be its own member")
				continue
			}
			mt := orDefault(ifaces[k].Type, InterfaceEthernet)
			switch first, dup := memberOf[k]; {
			case dup:
				v.add(mp, "%q is already a member of %q", m, ifaces[first].Name)
				continue
			case t == InterfaceBond && mt != InterfaceEthernet:
				v.add(mp, "%q is a %s; a bond's members must be ethernet interfaces", m, mt)
				continue
			case t == InterfaceBridge && mt == InterfaceBridge:
				v.add(mp, "%q is a bridge; a bridge cannot be a port of another bridge", m)
				continue
			}
			memberOf[k] = i
			lowers[i] = append(lowers[i], k)
			mem := &ifaces[k]
			switch {
			case len(mem.Addresses) > 0:
				v.add(at(k)+".addresses", "%q is a member of %q; put its addresses on %q", m, in.Name, in.Name)
			case len(mem.Networks) > 0:
				v.add(at(k)+".networks", "%q is a member of %q; carry its networks on %q", m, in.Name, in.Name)
			}
		}
		if in.Parent == "" {
			continue
		}
		k, ok := names[in.Parent]
		switch {
		case !ok:
			v.add(at(i)+".parent", "no interface named %q on this host; declare it under interfaces", clip(in.Parent))
			continue
		case k == i:
			v.add(at(i)+".parent", "an interface cannot be its own parent")
			continue
		}
		lowers[i] = append(lowers[i], k)
		if t == InterfaceVLAN {
			key := [2]int{k, VLANOf(in, nets)}
			if first, dup := vlans[key]; dup && key[1] != 0 {
				v.add(at(i)+".vlan", "vlan %d on %q is already interfaces[%d]", key[1], in.Parent, first)
			} else {
				vlans[key] = i
			}
		}
	}
	for i := range ifaces { // a parent must not be a bond's member: its traffic goes to the bond
		if k, ok := names[ifaces[i].Parent]; ok && ifaces[i].Parent != "" {
			if m, isMember := memberOf[k]; isMember && ifaces[m].Type == InterfaceBond {
				v.add(at(i)+".parent", "%q is a member of bond %q; use the bond as the parent", ifaces[i].Parent, ifaces[m].Name)
			}
		}
	}
	if cyc := findCycle(lowers); cyc != nil {
		chain := make([]string, len(cyc))
		for j, k := range cyc {
			chain[j] = ifaces[k].Name
		}
		v.add(at(cyc[0]), "interfaces form a cycle through their parents and members: %s", strings.Join(chain, " -> "))
		return
	}
	v.mtuOrder(at, ifaces, lowers, nets)
}

// mtuOrder: an interface's MTU must not exceed that of an interface it sits on, and a
// bond member must not ask for an MTU other than its bond's (the bond sets it).
func (v *validator) mtuOrder(at func(int) string, ifaces []Interface, lowers [][]int, nets map[string]Network) {
	for i := range ifaces {
		in := &ifaces[i]
		mtu := EffectiveMTU(in, nets)
		bond := orDefault(in.Type, InterfaceEthernet) == InterfaceBond
		for _, k := range lowers[i] {
			lo := &ifaces[k]
			rel := "parent"
			if slices.Contains(in.Members, lo.Name) {
				rel = "member"
			}
			switch lm := EffectiveMTU(lo, nets); {
			case bond && lo.MTU != 0 && mtu != 0 && lo.MTU != mtu:
				v.add(at(k)+".mtu", "%d differs from the mtu of bond %q (%d); a bond sets its members' mtu, so leave it unset", lo.MTU, in.Name, mtu)
			case !bond && mtu != 0 && lm != 0 && mtu > lm:
				v.add(at(i)+".mtu", "%d is above the mtu of %s %q (%d); raise %q's mtu or lower this one", mtu, rel, lo.Name, lm, lo.Name)
			}
		}
	}
}

// findCycle returns the interfaces of one cycle in the lowers graph, or nil.
func findCycle(lowers [][]int) []int {
	const (
		visiting = 1
		done     = 2
	)
	mark := make([]int, len(lowers))
	var stack []int
	var visit func(i int) []int
	visit = func(i int) []int {
		mark[i] = visiting
		stack = append(stack, i)
		for _, k := range lowers[i] {
			switch mark[k] {
			case visiting:
				start := slices.Index(stack, k)
				return append(slices.Clone(stack[start:]), k)
			case 0:
				if c := visit(k); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		return nil
	}
	for i := range lowers {
		if mark[i] == 0 {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// poolCapacity checks that every pool has a free address for each interface that
// allocates from it, counting the addresses no pool may hand out.
func (v *validator) poolCapacity(site *Site, hosts []Host) {
	nets := map[string]Network{}
	for _, n := range site.Spec.Networks {
		nets[n.Name] = n
	}
	for i, n := range site.Spec.Networks {
		if n.Pool == nil || nets[n.Name].CIDR != n.CIDR {
			continue
		}
		start, err1 := netip.ParseAddr(n.Pool.Start)
		end, err2 := netip.ParseAddr(n.Pool.End)
		cidr, err3 := netip.ParsePrefix(n.CIDR)
		if err1 != nil || err2 != nil || err3 != nil || !cidr.Contains(start.Unmap()) || !cidr.Contains(end.Unmap()) {
			continue // reported by networks()
		}
		var users []string
		for h := range hosts {
			for k := range hosts[h].Spec.Interfaces {
				if slices.Contains(AllocatesFrom(&hosts[h].Spec, &hosts[h].Spec.Interfaces[k], nets), n.Name) {
					users = append(users, hosts[h].Metadata.Name+"/"+hosts[h].Spec.Interfaces[k].Name)
				}
			}
		}
		if len(users) == 0 {
			continue
		}
		reserved := ReservedAddresses(n, hosts)
		free := 0
		for a := start.Unmap(); a.IsValid() && !end.Unmap().Less(a) && free < len(users); a = a.Next() {
			if !reserved[a] {
				free++
			}
		}
		if free < len(users) {
			shown := users[:min(len(users), 5)]
			more := ""
			if len(users) > len(shown) {
				more = fmt.Sprintf(" and %d more", len(users)-len(shown))
			}
			v.add(index("site.spec.networks", key(n.Name, i))+".pool", "%d free addresses for %d interfaces that allocate from it (%s%s); widen the pool",
				free, len(users), strings.Join(shown, ", "), more)
		}
	}
}
