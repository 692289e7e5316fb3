package api

import (
	"net/netip"
	"strings"
)

// This file holds the rules about host addresses that both validation and the planner
// need, so the two can never disagree about which interface gets which address.

// ManagementAddressOn returns the address (in CIDR notation) that interface in gets
// because it carries the mgmt network that holds the host's managementAddress, or ""
// when it gets none: the interface must carry a network of role mgmt whose cidr holds
// the management address, and have no static address of its own in that cidr.
func ManagementAddressOn(h *HostSpec, in *Interface, nets map[string]Network) string {
	mgmt, err := netip.ParseAddr(h.ManagementAddress)
	if err != nil {
		return ""
	}
	mgmt = mgmt.Unmap()
	for _, name := range in.Networks {
		n, ok := nets[name]
		if !ok || n.Role != NetworkMgmt {
			continue
		}
		cidr, err := netip.ParsePrefix(n.CIDR)
		if err != nil || !cidr.Contains(mgmt) || hasAddressIn(in, cidr) {
			continue
		}
		return netip.PrefixFrom(mgmt, cidr.Bits()).String()
	}
	return ""
}

// AllocatesFrom lists the networks, in the interface's order, that interface in takes
// an address from: it sets allocate, carries the network, the network has a pool, and
// the interface has no static or management address in the network's cidr.
func AllocatesFrom(h *HostSpec, in *Interface, nets map[string]Network) []string {
	if !in.Allocate {
		return nil
	}
	mgmt := ManagementAddressOn(h, in, nets)
	var out []string
	for _, name := range in.Networks {
		n, ok := nets[name]
		if !ok || n.Pool == nil {
			continue
		}
		cidr, err := netip.ParsePrefix(n.CIDR)
		if err != nil || hasAddressIn(in, cidr) {
			continue
		}
		if m, err := netip.ParsePrefix(mgmt); err == nil && cidr.Contains(m.Addr()) {
			continue
		}
		out = append(out, name)
	}
	return out
}

func hasAddressIn(in *Interface, cidr netip.Prefix) bool {
	for _, a := range in.Addresses {
		if p, err := netip.ParsePrefix(a); err == nil && cidr.Contains(p.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// ReservedAddresses is every address of cidr that no pool may hand out: the
// static and management addresses of all hosts, the gateway and, for IPv4, the
// network and broadcast addresses.
func ReservedAddresses(n Network, hosts []Host) map[netip.Addr]bool {
	cidr, err := netip.ParsePrefix(n.CIDR)
	if err != nil {
		return nil
	}
	out := map[netip.Addr]bool{}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && cidr.Contains(a.Unmap()) {
			out[a.Unmap()] = true
		}
	}
	add(n.Gateway)
	for i := range hosts {
		add(hosts[i].Spec.ManagementAddress)
		for _, in := range hosts[i].Spec.Interfaces {
			for _, a := range in.Addresses {
				add(strings.SplitN(a, "/", 2)[0])
			}
		}
	}
	if cidr.Addr().Is4() && cidr.Bits() < 31 {
		out[cidr.Masked().Addr()] = true
		out[lastAddr(cidr)] = true
	}
	return out
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// HugepageSizeKB converts a page size as written in a manifest (2Mi, 1Gi, 2048kB,
// 1048576kB) to kB, the unit of the kernel's hugepages-<size>kB directories.
func HugepageSizeKB(s string) (int, bool) {
	switch s {
	case "2Mi", "2048kB":
		return 2048, true
	case "1Gi", "1048576kB":
		return 1048576, true
	}
	return 0, false
}
