package plan

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// renderOVS renders <host>/ovs.dpdk and then <host>/ovs.bridges on every data host
// (an interface on a data network, or spec.ovs of its own) when the site declares
// ovs. ovs.dpdk is rendered even with DPDK off, so that turning it off is applied.
func renderOVS(in renderInput) ([]Step, error) {
	if in.site == nil || in.site.Spec.OVS == nil {
		return nil, nil
	}
	var steps []Step
	for _, h := range in.hosts {
		if runs, _ := vswitch(in.site, h, in.nets); !runs {
			continue
		}
		name := h.Metadata.Name
		dpdk, bridges := OVSInputs(in.site.Spec.OVS, h.Spec.OVS)
		deps := []string{StepID(name, hostspec.KindNetwork, "")}
		if hp := StepID(name, hostspec.KindHugepages, ""); in.rendered[hp] {
			deps = append(deps, hp)
		}
		ds, err := NewStep(name, ovsspec.KindDPDK, "", dpdk, deps...)
		if err != nil {
			return nil, fmt.Errorf("plan: host %s: render %s: %w", name, ovsspec.KindDPDK, err)
		}
		bs, err := NewStep(name, ovsspec.KindBridges, "", bridges, ds.ID)
		if err != nil {
			return nil, fmt.Errorf("plan: host %s: render %s: %w", name, ovsspec.KindBridges, err)
		}
		steps = append(steps, ds, bs)
	}
	return steps, nil
}

// vswitch is the one rule for Open vSwitch on a host: it runs on a data host of a
// site that declares ovs, with DPDK as the host's effective settings say (the site's,
// with the host's own on top). The OVS steps, hugepages, the openvswitch node label
// and kubelet's reserved CPUs all follow it, so they can never disagree.
func vswitch(site *api.Site, h api.Host, nets map[string]api.Network) (runs bool, dpdk ovsspec.DPDKInputs) {
	if site == nil || site.Spec.OVS == nil || !isDataHost(h, nets) {
		return false, ovsspec.DPDKInputs{}
	}
	dpdk, _ = OVSInputs(site.Spec.OVS, h.Spec.OVS)
	return true, dpdk
}

// DPDKHosts returns the hosts that run the OVS-DPDK datapath by the vswitch rule, in
// the order given: what an application's dpdk gate waits for (pkg/appplan).
func DPDKHosts(site *api.Site, hosts []api.Host) []string {
	if site == nil {
		return nil
	}
	nets := make(map[string]api.Network, len(site.Spec.Networks))
	for _, n := range site.Spec.Networks {
		nets[n.Name] = n
	}
	var out []string
	for _, h := range hosts {
		if _, d := vswitch(site, h, nets); d.Enabled {
			out = append(out, h.Metadata.Name)
		}
	}
	return out
}

// isDataHost reports whether h carries a data network or has OVS settings of its own.
func isDataHost(h api.Host, nets map[string]api.Network) bool {
	if h.Spec.OVS != nil {
		return true
	}
	for _, ifc := range h.Spec.Interfaces {
		for _, n := range ifc.Networks {
			if nets[n].Role == api.NetworkData {
				return true
			}
		}
	}
	return false
}

// OVSInputs renders one host's ovs.dpdk and ovs.bridges inputs: the site's settings
// with the host's set fields on top, its bridges merged by name and ports by name.
func OVSInputs(site *api.OVSSpec, host *api.HostOVS) (ovsspec.DPDKInputs, ovsspec.BridgesInputs) {
	s := site.OVSSettings
	enabled := site.DPDK
	bridges := slices.Clone(site.Bridges)
	if host != nil {
		overlay(&s, host.OVSSettings)
		if host.DPDK != nil {
			enabled = *host.DPDK
		}
		bridges = mergeBridges(bridges, host.Bridges)
	}
	dpdk := ovsspec.DPDKInputs{Enabled: enabled}
	if enabled {
		dpdk = ovsspec.DPDKInputs{
			Enabled: true, SocketMemMB: s.SocketMemMB, SocketLimitMB: s.SocketLimitMB, HugepageDir: s.HugepageDir,
			PMDCPUs: s.PMDCPUs, PMDPerNUMA: s.PMDPerNUMA, LcoreCPUs: s.LcoreCPUs, PMDMaxSleepUs: s.PMDMaxSleepUs,
			Extra: s.DPDKExtra, VhostSockDir: s.VhostSockDir,
		}
	}
	out := ovsspec.BridgesInputs{Bridges: []ovsspec.Bridge{}}
	for _, b := range bridges {
		b = b.Effective()
		ob := ovsspec.Bridge{Name: b.Name, Datapath: b.Datapath}
		for _, p := range b.Ports {
			ob.Ports = append(ob.Ports, ovsPort(p))
		}
		out.Bridges = append(out.Bridges, ob)
	}
	return dpdk, out
}

// overlay copies the set fields of o onto s.
func overlay(s *api.OVSSettings, o api.OVSSettings) {
	dst, src := reflect.ValueOf(s).Elem(), reflect.ValueOf(o)
	for i := range src.NumField() {
		if f := src.Field(i); !f.IsZero() {
			dst.Field(i).Set(f)
		}
	}
}

func mergeBridges(site, host []api.OVSBridge) []api.OVSBridge {
	out := make([]api.OVSBridge, 0, len(site)+len(host))
	for _, b := range site {
		b.Ports = slices.Clone(b.Ports)
		out = append(out, b)
	}
	for _, hb := range host {
		i := slices.IndexFunc(out, func(b api.OVSBridge) bool { return b.Name == hb.Name })
		if i < 0 {
			out = append(out, hb)
			continue
		}
		if hb.Datapath != "" {
			out[i].Datapath = hb.Datapath
		}
		for _, hp := range hb.Ports {
			if j := slices.IndexFunc(out[i].Ports, func(p api.OVSPort) bool { return p.Name == hp.Name }); j >= 0 {
				out[i].Ports[j] = hp
			} else {
				out[i].Ports = append(out[i].Ports, hp)
			}
		}
	}
	return out
}

// ovsPort renders a port of an effective bridge (api.OVSBridge.Effective).
func ovsPort(p api.OVSPort) ovsspec.Port {
	out := ovsspec.Port{Name: p.Name, Tag: p.VLAN, Trunks: p.Trunks}
	if p.Bond == nil {
		out.Interfaces = []ovsspec.Interface{ovsIface(p.OVSInterface)}
		return out
	}
	for _, m := range p.Bond.Members {
		out.Interfaces = append(out.Interfaces, ovsIface(m))
	}
	out.BondMode, out.LACP, out.LACPTime = p.Bond.Mode, p.Bond.LACP, p.Bond.LACPTime
	return out
}

func ovsIface(in api.OVSInterface) ovsspec.Interface {
	devargs := in.Devargs
	if in.PCI != "" {
		devargs = in.PCI
	}
	return ovsspec.Interface{Name: in.Name, Type: in.Type, Devargs: devargs, RxQueues: in.RxQueues, MTU: in.MTU}
}
