package api

import (
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// maxTable is the highest routing table ID Plinth accepts (the kernel's is uint32, but
// netlink libraries and iproute2 scripts commonly treat it as a signed int).
const maxTable = math.MaxInt32

// hosts validates each host and what must be unique across hosts.
func (v *validator) hosts(site *Site, hosts []Host) {
	var networks map[string]Network // nil: no site, references unchecked
	var netNames []string
	if site != nil {
		networks = map[string]Network{}
		for _, n := range site.Spec.Networks {
			if _, dup := networks[n.Name]; !dup {
				networks[n.Name] = n
			}
			netNames = append(netNames, n.Name)
		}
	}
	names := map[string]int{}       // host name -> document of first use
	mgmt := map[netip.Addr]string{} // management address -> host name
	for i := range hosts {
		h := &hosts[i]
		v.doc = h.docIndex
		p := index("hosts", key(h.Metadata.Name, i))
		v.name(p+".metadata.name", h.Metadata.Name, "host")
		if doc, dup := names[h.Metadata.Name]; dup && h.Metadata.Name != "" {
			msg := "duplicate host name %q; host names must be unique"
			if doc > 0 {
				msg += " (first in document " + strconv.Itoa(doc) + ")"
			}
			v.add(p+".metadata.name", msg, h.Metadata.Name)
		} else {
			names[h.Metadata.Name] = h.docIndex
		}

		v.roles(p+".spec.roles", h.Spec.Roles)
		v.labels(p+".metadata.labels", h.Metadata.Labels, "Plinth")
		v.labels(p+".spec.labels", h.Spec.Labels, "Kubernetes node")

		const what = "required: the IP address the coordinator reaches this host on"
		if a := h.Spec.ManagementAddress; a == "" {
			v.add(p+".spec.managementAddress", what)
		} else if addr, ok := v.ip(p+".spec.managementAddress", a); ok {
			addr = addr.Unmap()
			if other, dup := mgmt[addr]; dup {
				v.add(p+".spec.managementAddress", "%s is already the managementAddress of host %q", addr, other)
			} else {
				mgmt[addr] = h.Metadata.Name
			}
		}

		v.interfaces(p+".spec.interfaces", &h.Spec, networks, netNames)
		v.routes(p+".spec.routes", h.Spec.Routes)
		v.rules(p+".spec.rules", h.Spec.Rules)
		v.sysctls(p+".spec.sysctls", h.Spec.Sysctls)
		v.hugepages(p+".spec.hugepages", h.Spec.Hugepages)
		v.hostOVS(p+".spec.ovs", site, &h.Spec)
	}
	if site != nil {
		v.doc = site.docIndex
		v.poolCapacity(site, hosts)
	}
}

// MaxLabels bounds the labels of one object: more is a mistake, and each is copied
// into the replicated state and the node.
const MaxLabels = 64

// labels checks keys and values as Kubernetes does (a node refuses what it would
// reject later), so the error names the field now, not the API server later.
func (v *validator) labels(path string, labels map[string]string, what string) {
	if len(labels) > MaxLabels {
		v.add(path, "%d %s labels; at most %d are allowed", len(labels), what, MaxLabels)
		return
	}
	for _, k := range sortedKeys(labels) {
		p := index(path, mapKey(k))
		switch val := labels[k]; {
		case !validLabelKey(k):
			v.add(p, "%q is not a valid label key: [prefix/]name, the name at most 63 of [A-Za-z0-9_.-] starting and ending alphanumeric, the prefix a DNS name of at most 253", clip(k))
		case val != "" && !validLabelValue(val):
			v.add(p, "%q is not a valid label value: at most 63 of [A-Za-z0-9_.-], starting and ending alphanumeric, or empty", clip(val))
		}
	}
}

func (v *validator) roles(path string, roles []string) {
	if len(roles) == 0 {
		v.add(path, "required: at least one of %s", strings.Join(HostRoles, ", "))
		return
	}
	for i, r := range roles {
		p := index(path, strconv.Itoa(i))
		switch {
		case !slices.Contains(HostRoles, r):
			v.add(p, "%q is not a valid role; valid roles are %s", clip(r), strings.Join(HostRoles, ", "))
		case slices.Index(roles, r) < i:
			v.add(p, "%q is listed twice", r)
		}
	}
}

func (v *validator) interfaces(path string, h *HostSpec, networks map[string]Network, netNames []string) {
	ifaces := h.Interfaces
	names := map[string]int{}
	addrs := map[netip.Addr]int{} // address -> interface index, unique per host
	for i, in := range ifaces {
		p := index(path, strconv.Itoa(i))
		switch first, dup := names[in.Name]; {
		case in.Name == "":
			v.add(p+".name", "required: the Linux interface name, e.g. eno1")
		case !validIfName(in.Name):
			v.add(p+".name", "%q is not a valid interface name: at most 15 characters, no '/', ':' or whitespace", clip(in.Name))
		case dup:
			v.add(p+".name", "duplicate interface name %q (also interfaces[%d])", in.Name, first)
		default:
			names[in.Name] = i
		}
		if in.MAC != "" {
			if _, err := net.ParseMAC(in.MAC); err != nil {
				v.add(p+".mac", "%q is not a valid MAC address (want e.g. 52:54:00:12:34:56)", clip(in.MAC))
			}
		}
		v.mtu(p+".mtu", in.MTU, true)
		v.oneOf(p+".state", in.State, true, InterfaceStates...)
		for j, a := range in.Addresses {
			ap := index(p+".addresses", strconv.Itoa(j))
			pfx, err := netip.ParsePrefix(a)
			if err != nil {
				v.add(ap, "%q is not a valid address in CIDR notation (want e.g. 10.0.0.5/24)", clip(a))
				continue
			}
			addr := pfx.Addr().Unmap()
			if first, dup := addrs[addr]; dup {
				v.add(ap, "%s is already assigned to interfaces[%d]; addresses must be unique on a host", addr, first)
				continue
			}
			addrs[addr] = i
		}
		for j, n := range in.Networks {
			np := index(p+".networks", strconv.Itoa(j))
			_, known := networks[n]
			switch {
			case n == "":
				v.add(np, "required: the name of a site network")
			case networks == nil || known:
			case len(netNames) == 0:
				v.add(np, "no network named %q; the site declares no networks", clip(n))
			default:
				v.add(np, "no network named %q in the site; valid networks are %s", clip(n), strings.Join(netNames, ", "))
			}
		}
		v.interfaceType(p, &in)
	}
	v.carriedNetworks(path, h, networks)
	v.topology(path, ifaces, names, networks)
}

// validIfName applies the kernel's rules (dev_valid_name) plus no ':', which marks
// legacy aliases that Plinth does not manage.
func validIfName(s string) bool {
	if len(s) == 0 || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\r\v\f")
}

func (v *validator) routes(path string, routes []Route) {
	for i, r := range routes {
		p := index(path, strconv.Itoa(i))
		var to netip.Prefix
		switch {
		case r.To == "":
			v.add(p+".to", `required: "default" or a CIDR such as 10.1.0.0/16`)
		case r.To == "default":
		default:
			if _, err := netip.ParsePrefix(r.To); err != nil {
				v.add(p+".to", `%q is not valid; use "default" or a CIDR such as 10.1.0.0/16`, clip(r.To))
			} else {
				to, _ = v.cidr(p+".to", r.To)
			}
		}
		if r.Via != "" {
			if via, ok := v.ip(p+".via", r.Via); ok && to.IsValid() && via.Unmap().Is4() != to.Addr().Is4() {
				v.add(p+".via", "%s is %s but to (%s) is %s; the gateway must be of the same family", via, family(via.Unmap()), to, family(to.Addr()))
			}
		}
		if r.Via == "" && r.Dev == "" {
			v.add(p, "a route needs via or dev")
		}
		switch {
		case r.Metric < 0:
			v.add(p+".metric", "%d is below 0", r.Metric)
		case int64(r.Metric) > math.MaxUint32:
			v.add(p+".metric", "%d is above %d", r.Metric, uint32(math.MaxUint32))
		}
		v.mtu(p+".mtu", r.MTU, true)
		if r.Table < 0 || int64(r.Table) > maxTable {
			v.add(p+".table", "%d is out of range; valid tables are 0..%d (0 for main)", r.Table, maxTable)
		}
	}
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

type ruleKey struct {
	prio, table, mark  int
	from, to, iif, oif string
}

// rules checks routing policy rules.
func (v *validator) rules(path string, rules []Rule) {
	seen := map[ruleKey]int{}
	for i, r := range rules {
		p := index(path, strconv.Itoa(i))
		switch {
		case r.Priority == 0:
			v.add(p+".priority", "required: the rule's priority, 1..%d", maxRulePriority)
		case r.Priority < 0 || r.Priority > maxRulePriority:
			v.add(p+".priority", "%d is out of range; valid priorities are 1..%d (0, 32766 and 32767 hold the kernel's rules)", r.Priority, maxRulePriority)
		}
		switch {
		case r.Table == 0:
			v.add(p+".table", "required: the routing table to look up, 1..%d", maxTable)
		case r.Table < 0 || int64(r.Table) > maxTable:
			v.add(p+".table", "%d is out of range; valid tables are 1..%d", r.Table, maxTable)
		}
		var from, to netip.Prefix
		if r.From != "" {
			from, _ = v.cidr(p+".from", r.From)
		}
		if r.To != "" {
			to, _ = v.cidr(p+".to", r.To)
		}
		if from.IsValid() && to.IsValid() && from.Addr().Is4() != to.Addr().Is4() {
			v.add(p+".to", "%s is %s but from (%s) is %s", to, family(to.Addr()), from, family(from.Addr()))
		}
		for _, f := range []struct{ name, s string }{{"iif", r.IIF}, {"oif", r.OIF}} {
			if f.s != "" && !validIfName(f.s) {
				v.add(p+"."+f.name, "%q is not a valid interface name", clip(f.s))
			}
		}
		if r.FWMark < 0 || int64(r.FWMark) > math.MaxUint32 {
			v.add(p+".fwmark", "%d is out of range; valid marks are 0..%d", r.FWMark, uint32(math.MaxUint32))
		}
		k := ruleKey{r.Priority, r.Table, r.FWMark, r.From, r.To, r.IIF, r.OIF}
		if first, dup := seen[k]; dup {
			v.add(p, "the same rule as rules[%d]", first)
		} else {
			seen[k] = i
		}
	}
}
