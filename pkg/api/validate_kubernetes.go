package api

import (
	"fmt"
	"net/netip"
	"strings"
)

func (v *validator) kubernetes(k *KubernetesSpec, nets []Network, prefixes []netip.Prefix) {
	const path = "site.spec.kubernetes"
	if k.Version != "" && !versionRE.MatchString(k.Version) {
		v.add(path+".version", "%q is not a valid version; use the form v1.37.2", clip(k.Version))
	}
	// Check the effective subnets: an unset one still claims its default range, and a
	// clash with a site network is just as fatal then.
	subnet := func(field, s, def string) netip.Prefix {
		note := ""
		if s == "" {
			s, note = def, " (the default; set "+field+" to a free range)"
		}
		pfx, ok := v.cidr(path+"."+field, s)
		if !ok {
			return netip.Prefix{}
		}
		for i, q := range prefixes {
			if q.IsValid() && q.Overlaps(pfx) {
				v.add(path+"."+field, "%s overlaps network %q (%s)%s", pfx, nets[i].Name, q, note)
			}
		}
		return pfx
	}
	pod := subnet("podSubnet", k.PodSubnet, DefaultPodSubnet)
	svc := subnet("serviceSubnet", k.ServiceSubnet, DefaultServiceSubnet)
	if pod.IsValid() && svc.IsValid() && pod.Overlaps(svc) {
		v.add(path+".serviceSubnet", "%s overlaps podSubnet (%s)", svc, pod)
	}
	if k.ControlPlaneVIP != "" {
		vip, ok := v.ip(path+".controlPlaneVIP", k.ControlPlaneVIP)
		if !ok {
			return
		}
		var candidates []string
		for i, n := range nets {
			if n.Role != NetworkMgmt && n.Role != NetworkClusterHost {
				continue
			}
			if prefixes[i].Contains(vip) {
				return
			}
			candidates = append(candidates, fmt.Sprintf("%s %s", n.Name, n.CIDR))
		}
		if len(candidates) == 0 {
			v.add(path+".controlPlaneVIP", "%s must be inside a mgmt or cluster-host network, and the site declares none", vip)
			return
		}
		v.add(path+".controlPlaneVIP", "%s is not inside any mgmt or cluster-host network (%s)", vip, strings.Join(candidates, ", "))
	}
}
