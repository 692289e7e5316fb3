package plan

import (
	"hash/fnv"
	"net/netip"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// vip renders a controller's kube.vip: the VIP, its interface and what the site's
// provider needs (kube-vip's image; keepalived's router ID, priority and peers).
func (r *kubeRenderer) vip(h *api.Host, first bool) kubespec.VIPInputs {
	in := kubespec.VIPInputs{
		Provider: r.k.VIPProvider, VIP: r.k.ControlPlaneVIP, Port: r.k.APIServerPort,
		Interface: kubeVIPInterface(*h, r.k.ControlPlaneVIP, r.in.site.Spec.Networks),
	}
	if r.k.VIPProvider == api.VIPKubeVIP {
		in.Image, in.FirstControlPlane = r.k.KubeVIPImage, first
		return in
	}
	in.RouterID = vrrpRouterID(r.in.site.Metadata.Name)
	in.Priority = kubespec.KeepalivedPrioritySecond
	if first {
		in.Priority = kubespec.KeepalivedPriorityFirst
	}
	in.Address = r.vipAddress(*h)
	for _, peer := range []*api.Host{r.t.first, r.t.second} {
		if peer != nil && peer.Metadata.Name != h.Metadata.Name {
			in.Peers = append(in.Peers, r.vipAddress(*peer))
		}
	}
	return in
}

// vipAddress is the host's address in the VIP's network (static or from its pool),
// else its node IP: the source of its unicast VRRP adverts, and where its peer sends
// them.
func (r *kubeRenderer) vipAddress(h api.Host) string {
	vip, err := netip.ParseAddr(r.k.ControlPlaneVIP)
	if err != nil {
		return r.nodeIP(h)
	}
	for _, n := range r.in.site.Spec.Networks {
		if p, err := netip.ParsePrefix(n.CIDR); err != nil || !p.Contains(vip) {
			continue
		}
		if ip, _ := kubeAddressIn(h, n.CIDR); ip != "" {
			return ip
		}
		if ip := r.in.allocs[[2]string{n.Name, h.Metadata.Name}]; ip != "" {
			return ip
		}
	}
	return r.nodeIP(h)
}

// vrrpRouterID is the site's VRRP virtual_router_id, 1..255, the same on both
// controllers and stable across plans. Adverts are unicast between the controllers,
// so another site that hashes to the same ID on a shared segment never sees them.
func vrrpRouterID(site string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(site))
	return int(h.Sum32()%255) + 1
}
