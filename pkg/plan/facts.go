package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/cpuset"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

// CheckFacts checks what in a host's declared spec only makes sense against the facts
// its agent reported: one dpdk-socket-mem (and -limit) value per NUMA node, with a PMD
// CPU on each node that gets memory; PMD, lcore and kubelet-reserved CPUs the host has
// online; hugepages on NUMA nodes and of page sizes it has; the ethernet interfaces and
// OVS system ports that must exist before Plinth configures them. Each problem found
// here would otherwise be a step that fails on the host.
//
// Links and interfaces Plinth creates (bond, bridge, vlan, macvlan, vxlan, OVS internal
// ports) are not checked, nor DPDK ports' PCI devices (facts carry none). Facts without
// CPU or link information (an agent that could not read them) leave those checks out.
// Paths follow pkg/api's validation; site-wide values name the host in the message.
func CheckFacts(site *api.Site, h api.Host, f hostspec.Facts) api.ErrorList {
	c := factChecker{site: site, h: h, name: h.Metadata.Name, facts: f, t: topologyOf(f)}
	c.hp = api.Elem("hosts", c.name, 0)
	if site != nil {
		c.nets = make(map[string]api.Network, len(site.Spec.Networks))
		for _, n := range site.Spec.Networks {
			c.nets[n.Name] = n
		}
	}
	c.ovs()
	c.kubeletCPUs()
	c.hugepages()
	c.interfaces()
	return c.errs
}

type factChecker struct {
	site  *api.Site
	h     api.Host
	name  string
	hp    string // hosts[<name>]
	nets  map[string]api.Network
	facts hostspec.Facts
	t     factTopology
	errs  api.ErrorList
}

func (c *factChecker) add(path, format string, args ...any) {
	c.errs = append(c.errs, api.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// factTopology is the host's online CPUs and NUMA nodes as its facts say. As for the
// OVS driver, a host that reports CPUs but no NUMA nodes is one node holding them all.
type factTopology struct {
	known  bool // the facts carry CPU information
	online []int
	nodes  map[int][]int
}

func topologyOf(f hostspec.Facts) factTopology {
	t := factTopology{nodes: map[int][]int{}}
	for _, c := range f.CPUTopology {
		t.online = append(t.online, c.CPU)
	}
	for _, n := range f.NUMANodes {
		t.nodes[n.ID] = n.CPUs
		t.online = append(t.online, n.CPUs...)
	}
	slices.Sort(t.online)
	t.online = slices.Compact(t.online)
	t.known = len(t.online) > 0 || len(f.NUMANodes) > 0
	if len(t.nodes) == 0 && t.known {
		t.nodes[0] = t.online
	}
	return t
}

func (t factTopology) nodeIDs() []int { return slices.Sorted(maps.Keys(t.nodes)) }

// nodesDesc is "1 NUMA node (0)" or "2 NUMA nodes (0,1)".
func (t factTopology) nodesDesc() string {
	ids := t.nodeIDs()
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return fmt.Sprintf("%d NUMA node%s (%s)", len(ids), plural(len(ids)), strings.Join(s, ","))
}

// offline returns the CPUs of list the host does not have online.
func (t factTopology) offline(list string) []int {
	cpus, err := cpuset.Parse(list)
	if err != nil { // validation reports it
		return nil
	}
	var out []int
	for _, c := range cpus {
		if !slices.Contains(t.online, c) {
			out = append(out, c)
		}
	}
	return out
}

// ovsField is the path an effective OVS setting comes from: the host's override when
// it sets the field, else the site's.
func (c *factChecker) ovsField(field string, hostSets bool) string {
	if hostSets {
		return c.hp + ".spec.ovs." + field
	}
	return "site.spec.ovs." + field
}

// hint tells where to fix a site-wide value for one host.
func (c *factChecker) hint(path, field string) string {
	if strings.HasPrefix(path, "site.") {
		return fmt.Sprintf(", or set %s.spec.ovs.%s for this host", c.hp, field)
	}
	return ""
}

func (c *factChecker) ovs() {
	runs, dpdk := vswitch(c.site, c.h, c.nets)
	if !runs {
		return
	}
	var hs api.OVSSettings
	if c.h.Spec.OVS != nil {
		hs = c.h.Spec.OVS.OVSSettings
	}
	if dpdk.Enabled && c.t.known {
		memOK := c.perNode("socketMemMB", len(hs.SocketMemMB) > 0, dpdk.SocketMemMB)
		c.perNode("socketLimitMB", len(hs.SocketLimitMB) > 0, dpdk.SocketLimitMB)
		c.cpus(c.ovsField("lcoreCPUs", hs.LcoreCPUs != ""), "lcoreCPUs", dpdk.LcoreCPUs)
		pmdPath := c.ovsField("pmdCPUs", hs.PMDCPUs != "")
		if c.cpus(pmdPath, "pmdCPUs", dpdk.PMDCPUs) && memOK && dpdk.PMDCPUs != "" {
			pmd, _ := cpuset.Parse(dpdk.PMDCPUs)
			for node, mb := range dpdk.SocketMemMB {
				if mb > 0 && !slices.ContainsFunc(pmd, func(cpu int) bool { return slices.Contains(c.t.nodes[node], cpu) }) {
					c.add(pmdPath, "host %s: NUMA node %d gets socketMemMB %d but none of pmdCPUs %s is on it; reserve one of node %d's CPUs (%s)",
						c.name, node, mb, dpdk.PMDCPUs, node, cpuset.Format(c.t.nodes[node]))
				}
			}
		}
	}
	c.ovsPorts()
}

// perNode checks a per-NUMA-node list has one value per node the host reports, and
// returns whether it does (or is unset).
func (c *factChecker) perNode(field string, hostSets bool, mb []int) bool {
	n := len(c.t.nodes)
	if len(mb) == 0 || len(mb) == n {
		return true
	}
	path := c.ovsField(field, hostSets)
	fix := fmt.Sprintf("give one value per node (%d), 0 for a node without DPDK NICs%s", n, c.hint(path, field))
	if len(mb) > n {
		c.add(api.Elem(path, "", n), "host %s reports %s; %s has %d entries: %s", c.name, c.t.nodesDesc(), field, len(mb), fix)
	} else {
		c.add(path, "host %s reports %s; %s has %d entr%s, so node %d would get no memory: %s",
			c.name, c.t.nodesDesc(), field, len(mb), pluralY(len(mb)), c.t.nodeIDs()[len(mb)], fix)
	}
	return false
}

// cpus checks every CPU of a list is online on the host; it reports whether they are.
func (c *factChecker) cpus(path, field, list string) bool {
	if list == "" {
		return true
	}
	off := c.t.offline(list)
	if len(off) == 0 {
		return true
	}
	c.add(path, "host %s has no CPU %s online (it has %s); %s %s must name CPUs of this host", c.name, cpuset.Format(off), cpuset.Format(c.t.online), field, list)
	return false
}

// kubeletCPUs checks the CPUs kubelet keeps pods off (reservedSystemCPUs) on a node.
func (c *factChecker) kubeletCPUs() {
	if c.site == nil || c.site.Spec.Kubernetes == nil || !c.t.known || !isKubeNode(c.site, c.h) {
		return
	}
	k := c.site.Spec.Kubernetes
	if n := k.Node(c.name); n.ReservedCPUs != "" {
		i := slices.IndexFunc(k.Nodes, func(n api.KubernetesNode) bool { return n.Host == c.name })
		c.cpus(api.Elem("site.spec.kubernetes.nodes", c.name, i)+".reservedCPUs", "reservedCPUs", n.ReservedCPUs)
		return
	}
	if _, d := vswitch(c.site, c.h, c.nets); d.Enabled {
		c.cpus("site.spec.kubernetes.dpdkReservedCPUs", "dpdkReservedCPUs", k.DPDKReservedCPUs)
	}
}

// isKubeNode is the Kubernetes topology's rule for who runs kubelet: the first two
// controllers and every worker that is neither a controller nor the witness.
func isKubeNode(site *api.Site, h api.Host) bool {
	ctl := site.Spec.Controllers
	if i := slices.Index(ctl, h.Metadata.Name); i >= 0 {
		return i < 2
	}
	return slices.Contains(h.Spec.Roles, api.RoleWorker) && h.Metadata.Name != site.Spec.Witness
}

// hugepages checks declared reservations name NUMA nodes and page sizes the host has.
func (c *factChecker) hugepages() {
	var sizes []string
	for _, s := range c.facts.HugepageSizes {
		sizes = append(sizes, s.Size)
	}
	for i, p := range c.h.Spec.Hugepages {
		pp := api.Elem(c.hp+".spec.hugepages", "", i)
		if kb, ok := api.HugepageSizeKB(p.Size); ok && len(sizes) > 0 && !slices.Contains(sizes, strconv.Itoa(kb)+"kB") {
			c.add(pp+".size", "host %s has hugepage sizes %s; %s is not one of them", c.name, strings.Join(sizes, ", "), p.Size)
		}
		if p.Node != nil && c.t.known {
			if _, ok := c.t.nodes[*p.Node]; !ok {
				c.add(pp+".node", "host %s reports %s; node %d is not one of them", c.name, c.t.nodesDesc(), *p.Node)
			}
		}
	}
}

// interfaces checks every ethernet interface, which Plinth configures but never
// creates, is among the host's links: by MAC when it sets one, else by name.
func (c *factChecker) interfaces() {
	if len(c.facts.Links) == 0 { // a real host has lo at least: no link facts
		return
	}
	for i, in := range c.h.Spec.Interfaces {
		if in.Type != "" && in.Type != api.InterfaceEthernet {
			continue
		}
		ip := api.Elem(c.hp+".spec.interfaces", "", i)
		if in.MAC != "" {
			if !slices.ContainsFunc(c.facts.Links, func(l hostspec.LinkFact) bool { return strings.EqualFold(l.MAC, in.MAC) }) {
				c.add(ip+".mac", "host %s has no link with MAC %s; its links: %s", c.name, in.MAC, c.links(true))
			}
			continue
		}
		if !c.hasLink(in.Name) {
			c.add(ip+".name", "host %s has no link named %q; an ethernet interface must exist already (its links: %s)", c.name, in.Name, c.links(false))
		}
	}
}

// ovsPorts checks the OVS system ports and bond members (existing Linux interfaces)
// that are neither declared under interfaces (Plinth makes those first) nor made by
// OVS itself exist on the host.
func (c *factChecker) ovsPorts() {
	if len(c.facts.Links) == 0 {
		return
	}
	made := map[string]bool{}
	for _, in := range c.h.Spec.Interfaces {
		made[in.Name] = true
	}
	var hostBridges []api.OVSBridge
	if c.h.Spec.OVS != nil {
		hostBridges = c.h.Spec.OVS.Bridges
	}
	type source struct {
		path    string
		bridges []api.OVSBridge
	}
	sources := []source{{c.hp + ".spec.ovs.bridges", hostBridges}}
	if c.site.Spec.OVS != nil {
		sources = append([]source{{"site.spec.ovs.bridges", c.site.Spec.OVS.Bridges}}, sources...)
	}
	for _, src := range sources {
		for _, b := range src.bridges {
			made[b.Name] = true
			for _, p := range b.Ports {
				if api.OVSInterfaceType(p.OVSInterface) == api.OVSPortInternal {
					made[p.Name] = true
				}
			}
		}
	}
	check := func(path string, in api.OVSInterface) {
		if api.OVSInterfaceType(in) == api.OVSPortSystem && !made[in.Name] && !c.hasLink(in.Name) {
			c.add(path, "host %s has no link named %q for this system port; declare it under %s.spec.interfaces or use an existing link (its links: %s)", c.name, in.Name, c.hp, c.links(false))
		}
	}
	for si, src := range sources {
		for i, b := range src.bridges {
			bp := api.Elem(src.path, b.Name, i)
			for j, p := range b.Ports {
				if si == 0 && len(sources) == 2 && overridden(hostBridges, b.Name, p.Name) {
					continue
				}
				pp := api.Elem(bp+".ports", p.Name, j)
				if p.Bond == nil {
					check(pp+".name", p.OVSInterface)
					continue
				}
				for k, m := range p.Bond.Members {
					check(api.Elem(pp+".bond.members", m.Name, k)+".name", m)
				}
			}
		}
	}
}

// overridden reports whether the host's bridges replace port port of bridge bridge.
func overridden(host []api.OVSBridge, bridge, port string) bool {
	for _, b := range host {
		if b.Name == bridge && slices.ContainsFunc(b.Ports, func(p api.OVSPort) bool { return p.Name == port }) {
			return true
		}
	}
	return false
}

func (c *factChecker) hasLink(name string) bool {
	return slices.ContainsFunc(c.facts.Links, func(l hostspec.LinkFact) bool { return l.Name == name })
}

// links lists the host's links for a message, with MACs when asked, lo left out.
func (c *factChecker) links(withMAC bool) string {
	const most = 16
	var out []string
	for _, l := range c.facts.Links {
		if l.Name == "lo" {
			continue
		}
		if len(out) == most {
			out = append(out, "…")
			break
		}
		s := l.Name
		if withMAC && l.MAC != "" {
			s += " (" + l.MAC + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none but lo"
	}
	return strings.Join(out, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pluralY(n int) string {
	if n == 1 {
		return "y"
	}
	return "ies"
}
