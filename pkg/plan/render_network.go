package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

// renderNetwork renders per host a host.network step, and a host.sysctl and a
// host.hugepages step when there is anything to set. The three do not depend on each
// other; steps that need them (ovs.dpdk on hugepages, kubeadm on sysctls) name them.
func renderNetwork(in renderInput) ([]Step, error) {
	var steps []Step
	for _, h := range in.hosts {
		name := h.Metadata.Name
		type render struct {
			kind   string
			inputs any
			skip   bool
		}
		sc, hp := SysctlInputs(in.site, h), HugepagesInputs(in.site, h, in.nets)
		for _, r := range []render{
			{hostspec.KindNetwork, networkInputs(h, in.nets, in.allocs), false},
			{hostspec.KindSysctl, sc, len(sc.Sysctls) == 0},
			{hostspec.KindHugepages, hp, len(hp.Pages) == 0},
		} {
			if r.skip {
				continue
			}
			s, err := NewStep(name, r.kind, "", r.inputs)
			if err != nil {
				return nil, fmt.Errorf("plan: host %s: render %s: %w", name, r.kind, err)
			}
			steps = append(steps, s)
		}
	}
	return steps, nil
}

// networkInputs maps interfaces onto links: an interface without its own MTU takes
// the largest MTU of the networks it carries (bond members take the bond's, so get
// none); it gets its static addresses, the management address when it carries the
// mgmt network that holds it, and one pool address per network it allocates from. A
// host that carries an oam network with a gateway gets its default route, unless it
// declares one.
func networkInputs(h api.Host, nets map[string]api.Network, allocs map[[2]string]string) hostspec.NetworkInputs {
	var in hostspec.NetworkInputs
	master := map[string]string{}
	bondMember := map[string]bool{}
	for _, ifc := range h.Spec.Interfaces {
		for _, m := range ifc.Members {
			master[m] = ifc.Name
			bondMember[m] = ifc.Type == api.InterfaceBond
		}
	}
	var gateways []string // oam gateways, in interface order
	for i := range h.Spec.Interfaces {
		ifc := &h.Spec.Interfaces[i]
		l := hostspec.LinkSpec{
			Name:      ifc.Name,
			MAC:       ifc.MAC,
			MTU:       api.EffectiveMTU(ifc, nets),
			Up:        ifc.State != "down",
			Addresses: append([]string(nil), ifc.Addresses...),
			Master:    master[ifc.Name],
		}
		if bondMember[ifc.Name] {
			l.MTU = 0
		}
		if a := api.ManagementAddressOn(&h.Spec, ifc, nets); a != "" {
			l.Addresses = append(l.Addresses, a)
		}
		for _, n := range api.AllocatesFrom(&h.Spec, ifc, nets) {
			cidr, err := netip.ParsePrefix(nets[n].CIDR)
			ip, ok := allocs[[2]string{n, h.Metadata.Name}]
			if err == nil && ok {
				l.Addresses = append(l.Addresses, ip+"/"+fmt.Sprint(cidr.Bits()))
			}
		}
		linkKind(&l, ifc, nets)
		for _, n := range ifc.Networks {
			if net := nets[n]; net.Role == api.NetworkOAM && net.Gateway != "" && !slices.Contains(gateways, net.Gateway) {
				gateways = append(gateways, net.Gateway)
			}
		}
		in.Links = append(in.Links, l)
	}
	for _, r := range h.Spec.Routes {
		in.Routes = append(in.Routes, hostspec.RouteSpec{
			Dst: r.To, Gateway: r.Via, Dev: r.Dev, Metric: r.Metric, MTU: r.MTU, Table: r.Table,
		})
	}
	for _, gw := range gateways {
		if !hasDefault(h.Spec.Routes, gw) {
			in.Routes = append(in.Routes, hostspec.RouteSpec{Dst: "default", Gateway: gw})
		}
	}
	for _, r := range h.Spec.Rules {
		in.Rules = append(in.Rules, hostspec.RuleSpec{
			Priority: r.Priority, From: r.From, To: r.To, IIF: r.IIF, OIF: r.OIF, FWMark: r.FWMark, Table: r.Table,
		})
	}
	return in
}

// linkKind fills in what a link of the interface's type is made of.
func linkKind(l *hostspec.LinkSpec, ifc *api.Interface, nets map[string]api.Network) {
	switch ifc.Type {
	case api.InterfaceBond:
		b := api.BondOptions{}
		if ifc.Bond != nil {
			b = *ifc.Bond
		}
		b = b.Effective()
		l.Kind, l.Bond = hostspec.LinkBond, &hostspec.BondSpec{Mode: b.Mode, LACPRate: b.LACPRate, HashPolicy: b.HashPolicy, MIIMon: b.MIIMon}
	case api.InterfaceBridge:
		l.Kind = hostspec.LinkBridge
	case api.InterfaceVLAN:
		l.Kind, l.Parent, l.VLANID = hostspec.LinkVLAN, ifc.Parent, api.VLANOf(ifc, nets)
	case api.InterfaceMacvlan:
		m := api.MacvlanOptions{}
		if ifc.Macvlan != nil {
			m = *ifc.Macvlan
		}
		l.Kind, l.Parent, l.Macvlan = hostspec.LinkMacvlan, ifc.Parent, m.Effective().Mode
	case api.InterfaceVXLAN:
		x := api.VXLANOptions{}
		if ifc.VXLAN != nil {
			x = *ifc.VXLAN
		}
		x = x.Effective()
		l.Kind, l.Parent = hostspec.LinkVXLAN, ifc.Parent
		l.VXLAN = &hostspec.VXLANSpec{VNI: x.VNI, Local: x.Local, Remote: x.Remote, Port: x.Port}
	}
}

// hasDefault reports whether routes hold a default route of gw's family.
func hasDefault(routes []api.Route, gw string) bool {
	g, err := netip.ParseAddr(gw)
	if err != nil {
		return true
	}
	for _, r := range routes {
		if r.To != "default" && r.To != "0.0.0.0/0" && r.To != "::/0" {
			continue
		}
		if v, err := netip.ParseAddr(r.Via); err != nil || v.Unmap().Is4() == g.Unmap().Is4() {
			return true
		}
	}
	return false
}

// kubernetesSysctls are what Kubernetes and the OpenStack networking agents need on
// every host of a site that runs Kubernetes. All are per network namespace. Reverse
// path filtering is loose: traffic between the oam, mgmt and cluster-host networks
// may come back on another interface than it left by.
var kubernetesSysctls = []hostspec.SysctlSpec{
	{Key: "net.bridge.bridge-nf-call-ip6tables", Value: "1", Optional: true},
	{Key: "net.bridge.bridge-nf-call-iptables", Value: "1", Optional: true},
	{Key: "net.ipv4.conf.all.rp_filter", Value: "2"},
	{Key: "net.ipv4.conf.default.rp_filter", Value: "2"},
	{Key: "net.ipv4.ip_forward", Value: "1"},
}

// SysctlInputs renders a host's kernel parameters: the Kubernetes ones when the site
// declares Kubernetes, then the host's own, which win.
func SysctlInputs(site *api.Site, h api.Host) hostspec.SysctlInputs {
	m := map[string]hostspec.SysctlSpec{}
	if site != nil && site.Spec.Kubernetes != nil {
		for _, s := range kubernetesSysctls {
			m[s.Key] = s
		}
	}
	for k, v := range h.Spec.Sysctls {
		m[k] = hostspec.SysctlSpec{Key: k, Value: v}
	}
	out := hostspec.SysctlInputs{Sysctls: []hostspec.SysctlSpec{}}
	for _, s := range m {
		out.Sysctls = append(out.Sysctls, s)
	}
	slices.SortFunc(out.Sysctls, func(a, b hostspec.SysctlSpec) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// HugepagesInputs renders a host's huge page reservations: the declared ones, or,
// when the host declares none and runs OVS-DPDK, 2 MiB pages covering dpdk-socket-mem
// on each NUMA node (rounded up). ovs.dpdk waits for this step.
func HugepagesInputs(site *api.Site, h api.Host, nets map[string]api.Network) hostspec.HugepagesInputs {
	out := hostspec.HugepagesInputs{Pages: []hostspec.HugepageSpec{}}
	for _, p := range h.Spec.Hugepages {
		if size, ok := api.HugepageSizeKB(p.Size); ok { // others are refused by validation
			out.Pages = append(out.Pages, hostspec.HugepageSpec{SizeKB: size, Node: p.Node, Count: p.Count})
		}
	}
	if len(out.Pages) > 0 {
		return out
	}
	_, dpdk := vswitch(site, h, nets)
	if !dpdk.Enabled {
		return out
	}
	const pageMB = 2
	for node, mb := range dpdk.SocketMemMB {
		if mb <= 0 {
			continue
		}
		n := node
		out.Pages = append(out.Pages, hostspec.HugepageSpec{SizeKB: pageMB * 1024, Node: &n, Count: (mb + pageMB - 1) / pageMB})
	}
	return out
}
