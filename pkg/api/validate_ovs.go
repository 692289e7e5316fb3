package api

import (
	"github.com/plinth-dev/plinth/pkg/cpuset"

	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// OVS limits: pmd-maxsleep is capped at 10 ms by OVS itself; DPDK NICs take at most
// a 9710-byte MTU in OVS; eight NUMA nodes is more than any data host we target.
const (
	ovsMaxSleepUs  = 10000
	ovsMaxDPDKMTU  = 9710
	ovsMaxNUMA     = 8
	ovsMaxRxQueues = 1024
	ovsMaxSocketMB = 1 << 20
)

var (
	pciAddressRE  = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	ovsCPUListMsg = "want a Linux cpulist such as 2-3,18-19"
)

// ovs validates site.spec.ovs.
func (v *validator) ovs(o *OVSSpec) {
	const p = "site.spec.ovs"
	v.ovsSettings(p, &o.OVSSettings)
	v.ovsBridges(p+".bridges", o.Bridges, o.DPDK)
}

// hostOVS validates hosts[h].spec.ovs against the site's OVS spec (nil site: the
// override alone). Call it from the per-host loop of hosts.
func (v *validator) hostOVS(p string, site *Site, h *HostSpec) {
	o := h.OVS
	if o == nil {
		return
	}
	var siteOVS *OVSSpec
	if site != nil {
		siteOVS = site.Spec.OVS
		if siteOVS == nil {
			v.add(p, "the site declares no ovs; host overrides need site.spec.ovs")
			return
		}
	}
	v.ovsSettings(p, &o.OVSSettings)
	dpdk := o.DPDK != nil && *o.DPDK
	if o.DPDK == nil && siteOVS != nil {
		dpdk = siteOVS.DPDK
	}
	v.ovsBridges(p+".bridges", o.Bridges, dpdk)
	if siteOVS != nil && !dpdk {
		for _, b := range siteOVS.Bridges {
			for _, pt := range b.Ports {
				if ovsUsesDPDK(pt) && !ovsOverridesPort(o.Bridges, b.Name, pt.Name) {
					v.add(p+".dpdk", "false, but the site's bridge %q has DPDK port %q: override the port too", b.Name, pt.Name)
				}
			}
		}
	}
}

func (v *validator) ovsSettings(p string, s *OVSSettings) {
	v.ovsSocketMB(p+".socketMemMB", s.SocketMemMB)
	v.ovsSocketMB(p+".socketLimitMB", s.SocketLimitMB)
	if len(s.SocketLimitMB) > 0 && len(s.SocketMemMB) > 0 {
		if len(s.SocketLimitMB) != len(s.SocketMemMB) {
			v.add(p+".socketLimitMB", "has %d values but socketMemMB has %d; give one per NUMA node in both", len(s.SocketLimitMB), len(s.SocketMemMB))
		} else {
			for i, lim := range s.SocketLimitMB {
				if lim > 0 && lim < s.SocketMemMB[i] {
					v.add(index(p+".socketLimitMB", strconv.Itoa(i)), "%d is below socketMemMB[%d] (%d); the limit must cover what is preallocated", lim, i, s.SocketMemMB[i])
				}
			}
		}
	}
	if d := s.HugepageDir; d != "" && (!path.IsAbs(d) || path.Clean(d) != d) {
		v.add(p+".hugepageDir", "%q must be a clean absolute path, e.g. /dev/hugepages", clip(d))
	}
	pmd, pmdOK := v.ovsCPUs(p+".pmdCPUs", s.PMDCPUs)
	lcore, lcoreOK := v.ovsCPUs(p+".lcoreCPUs", s.LcoreCPUs)
	if pmdOK && lcoreOK {
		for _, c := range lcore {
			if slices.Contains(pmd, c) {
				v.add(p+".lcoreCPUs", "CPU %d is also in pmdCPUs; a PMD thread owns its CPU", c)
				break
			}
		}
	}
	switch {
	case s.PMDPerNUMA < 0:
		v.add(p+".pmdPerNUMA", "%d must be positive (0 uses every pmdCPU)", s.PMDPerNUMA)
	case s.PMDPerNUMA > 0 && s.PMDCPUs == "":
		v.add(p+".pmdPerNUMA", "needs pmdCPUs, the CPUs reserved for the vswitch")
	}
	if s.PMDMaxSleepUs < 0 || s.PMDMaxSleepUs > ovsMaxSleepUs {
		v.add(p+".pmdMaxSleepUs", "%d is out of range; valid values are 0..%d", s.PMDMaxSleepUs, ovsMaxSleepUs)
	}
	if strings.ContainsAny(s.DPDKExtra, "\n\r\x00") {
		v.add(p+".dpdkExtra", "must be a single line of EAL arguments")
	}
	if d := s.VhostSockDir; d != "" && (path.IsAbs(d) || slices.Contains(strings.Split(d, "/"), "..")) {
		v.add(p+".vhostSockDir", "%q must be relative to OVS's run directory, without '..'", clip(d))
	}
}

func (v *validator) ovsSocketMB(p string, mb []int) {
	if len(mb) > ovsMaxNUMA {
		v.add(p, "%d values; give one per NUMA node (at most %d)", len(mb), ovsMaxNUMA)
	}
	for i, n := range mb {
		if n < 0 || n > ovsMaxSocketMB {
			v.add(index(p, strconv.Itoa(i)), "%d is out of range; valid values are 0..%d MB", n, ovsMaxSocketMB)
		}
	}
}

// ovsCPUs parses an optional cpulist.
func (v *validator) ovsCPUs(p, s string) ([]int, bool) {
	if s == "" {
		return nil, true
	}
	cpus, ok := parseOVSCPUList(s)
	if !ok {
		v.add(p, "%q is not valid: %s", clip(s), ovsCPUListMsg)
	}
	return cpus, ok
}

// ovsBridges checks bridges and ports; OVS port and interface names share one
// namespace across all bridges, so uniqueness is checked across all of them.
func (v *validator) ovsBridges(p string, bridges []OVSBridge, dpdk bool) {
	names := map[string]string{} // name -> path of first use
	unique := func(at, name string) {
		if first, dup := names[name]; dup && name != "" {
			v.add(at, "%q is already used at %s; OVS bridge, port and interface names must be unique", name, first)
			return
		}
		names[name] = at
	}
	for i, b := range bridges {
		bp := index(p, key(b.Name, i))
		v.ovsName(bp+".name", b.Name, "bridge")
		unique(bp+".name", b.Name)
		v.oneOf(bp+".datapath", b.Datapath, true, OVSDatapaths...)
		for j, pt := range b.Ports {
			pp := index(bp+".ports", key(pt.Name, j))
			unique(pp+".name", pt.Name)
			v.ovsPort(pp, pt, b, dpdk)
			if pt.Bond != nil {
				for k, m := range pt.Bond.Members {
					unique(index(pp+".bond.members", key(m.Name, k))+".name", m.Name)
				}
			}
		}
	}
}

func (v *validator) ovsName(p, name, what string) {
	switch {
	case name == "":
		v.add(p, "required: the %s name", what)
	case !validIfName(name):
		v.add(p, "%q is not a valid %s name: at most 15 characters, no '/', ':' or whitespace", clip(name), what)
	}
}

func (v *validator) ovsPort(p string, pt OVSPort, b OVSBridge, dpdk bool) {
	if pt.VLAN < 0 || pt.VLAN > 4094 {
		v.add(p+".vlan", "%d is out of range; valid VLAN IDs are 1..4094 (0 for none)", pt.VLAN)
	}
	for i, t := range pt.Trunks {
		switch {
		case t < 0 || t > 4094:
			v.add(index(p+".trunks", strconv.Itoa(i)), "%d is out of range; valid VLAN IDs are 0..4094", t)
		case slices.Index(pt.Trunks, t) < i:
			v.add(index(p+".trunks", strconv.Itoa(i)), "%d is listed twice", t)
		}
	}
	if pt.VLAN > 0 && len(pt.Trunks) > 0 {
		v.add(p+".trunks", "set vlan (an access port) or trunks, not both")
	}
	if pt.Bond == nil {
		v.ovsInterface(p, pt.OVSInterface, b, dpdk)
		return
	}
	v.ovsName(p+".name", pt.Name, "bond port")
	in := pt.OVSInterface
	if in.Type != "" || in.PCI != "" || in.Devargs != "" || in.RxQueues != 0 || in.MTU != 0 {
		v.add(p, "a bond port sets type, pci, devargs, rxQueues and mtu on its members, not on the port")
	}
	bp := p + ".bond"
	bd := pt.Bond
	v.oneOf(bp+".mode", bd.Mode, true, OVSBondModes...)
	v.oneOf(bp+".lacp", bd.LACP, true, OVSLACPModes...)
	v.oneOf(bp+".lacpTime", bd.LACPTime, true, OVSLACPTimes...)
	if bd.Mode == OVSBondBalanceTCP && (bd.LACP == "" || bd.LACP == OVSLACPOff) {
		v.add(bp+".lacp", "balance-tcp needs LACP: set active or passive")
	}
	if bd.LACPTime != "" && (bd.LACP == "" || bd.LACP == OVSLACPOff) {
		v.add(bp+".lacpTime", "only applies with lacp active or passive")
	}
	if len(bd.Members) < 2 {
		v.add(bp+".members", "a bond needs at least 2 members, got %d", len(bd.Members))
	}
	for i, m := range bd.Members {
		mp := index(bp+".members", key(m.Name, i))
		v.ovsInterface(mp, m, b, dpdk)
		if OVSInterfaceType(m) == OVSPortInternal {
			v.add(mp+".type", "a bond member must be dpdk or system")
		}
	}
}

func (v *validator) ovsInterface(p string, in OVSInterface, b OVSBridge, dpdk bool) {
	v.ovsName(p+".name", in.Name, "interface")
	v.oneOf(p+".type", in.Type, true, OVSPortTypes...)
	t := OVSInterfaceType(in)
	if t != OVSPortDPDK {
		for f, set := range map[string]bool{"pci": in.PCI != "", "devargs": in.Devargs != "", "rxQueues": in.RxQueues != 0} {
			if set {
				v.add(p+"."+f, "only applies to type dpdk")
			}
		}
		v.mtu(p+".mtu", in.MTU, true)
		return
	}
	switch {
	case in.PCI != "" && in.Devargs != "":
		v.add(p+".devargs", "set pci or devargs, not both")
	case in.PCI == "" && in.Devargs == "":
		v.add(p+".pci", "required: the NIC's PCI address (e.g. 0000:03:00.0), or devargs")
	case in.PCI != "" && !pciAddressRE.MatchString(in.PCI):
		v.add(p+".pci", "%q is not a PCI address; want domain:bus:device.function in lowercase hex, e.g. 0000:03:00.0", clip(in.PCI))
	case strings.ContainsAny(in.Devargs, " \t\n\x00"):
		v.add(p+".devargs", "%q must not contain whitespace", clip(in.Devargs))
	}
	if in.RxQueues < 0 || in.RxQueues > ovsMaxRxQueues {
		v.add(p+".rxQueues", "%d is out of range; valid values are 1..%d (0 for OVS's default)", in.RxQueues, ovsMaxRxQueues)
	}
	if in.MTU > ovsMaxDPDKMTU {
		v.add(p+".mtu", "%d is above %d, the largest MTU OVS gives a DPDK port", in.MTU, ovsMaxDPDKMTU)
	} else {
		v.mtu(p+".mtu", in.MTU, true)
	}
	if !dpdk {
		v.add(p+".type", "a DPDK interface needs ovs dpdk: true")
	}
	if b.Datapath == OVSDatapathSystem {
		v.add(p+".type", "a DPDK interface needs a netdev bridge; %q has datapath system", b.Name)
	}
}

func ovsUsesDPDK(pt OVSPort) bool {
	if pt.Bond == nil {
		return OVSInterfaceType(pt.OVSInterface) == OVSPortDPDK
	}
	for _, m := range pt.Bond.Members {
		if OVSInterfaceType(m) == OVSPortDPDK {
			return true
		}
	}
	return false
}

func ovsOverridesPort(bridges []OVSBridge, bridge, port string) bool {
	for _, b := range bridges {
		if b.Name == bridge {
			for _, pt := range b.Ports {
				if pt.Name == port {
					return !ovsUsesDPDK(pt)
				}
			}
		}
	}
	return false
}

// parseOVSCPUList parses a Linux cpulist into sorted, distinct CPUs; ok is false for
// a malformed or empty list.
func parseOVSCPUList(s string) ([]int, bool) {
	cpus, err := cpuset.Parse(s)
	return cpus, err == nil && len(cpus) > 0 && cpus[len(cpus)-1] <= 4095
}
