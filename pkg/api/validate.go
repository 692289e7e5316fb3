package api

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Validate checks the manifest's meaning (Decode already checked its shape) and
// returns every problem found, never just the first. It works on defaulted and
// undefaulted manifests alike: zero values that Default would fill are accepted.
//
// Cross-references between the Site and Hosts are only checked when the manifest holds
// both; the coordinator checks them against its combined stored state with ValidateSet.
func (m *Manifest) Validate(file string) ErrorList {
	if m == nil {
		return nil
	}
	errs := ValidateSet(file, m.Site, m.Hosts)
	v := &validator{file: file}
	first := map[string]int{}
	for i := range m.Applications {
		a := &m.Applications[i]
		v.application(a, i)
		if n := a.Metadata.Name; n != "" {
			if doc, dup := first[n]; dup {
				v.add(index("applications", n)+".metadata.name",
					"application %q is declared twice in this file (documents %d and %d); declare each application once", n, doc, a.docIndex)
			} else {
				first[n] = a.docIndex
			}
		}
	}
	return append(errs, v.errs...)
}

// ValidateSet validates a site (may be nil) together with a set of hosts. Controller and
// witness references are resolved only when both a site and hosts are given; interface
// network references only when a site is given.
func ValidateSet(file string, site *Site, hosts []Host) ErrorList {
	v := &validator{file: file}
	if site != nil {
		v.site(site, hosts)
	}
	v.hosts(site, hosts)
	return v.errs
}

type validator struct {
	file string
	doc  int // document of the object being validated
	errs ErrorList
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, FieldError{File: v.file, Doc: v.doc, Path: path, Msg: fmt.Sprintf(format, args...)})
}

const labelRule = "use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"

// name checks a required DNS-1123 label.
func (v *validator) name(path, s, what string) {
	switch {
	case s == "":
		v.add(path, "required: the %s name", what)
	case !isDNSLabel(s):
		v.add(path, "%q is not a valid name: %s", clip(s), labelRule)
	}
}

// oneOf checks s against valid values; empty is accepted only when a default exists.
func (v *validator) oneOf(path, s string, emptyOK bool, valid ...string) {
	if (s == "" && emptyOK) || slices.Contains(valid, s) {
		return
	}
	if s == "" {
		v.add(path, "required: valid values are %s", strings.Join(valid, ", "))
		return
	}
	v.add(path, "%q is not valid; valid values are %s", clip(s), strings.Join(valid, ", "))
}

// mtu checks an MTU; zero means "unset" where zeroOK.
func (v *validator) mtu(path string, n int, zeroOK bool) {
	switch {
	case n == 0 && zeroOK:
	case n < 68:
		v.add(path, "%d is below 68", n)
	case n > 65535:
		v.add(path, "%d is above 65535", n)
	}
}

// ip parses a required IP address.
func (v *validator) ip(path, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		v.add(path, "%q is not a valid IP address (want e.g. 10.0.0.5 or fd00::5)", clip(s))
		return netip.Addr{}, false
	}
	return a, true
}

// cidr parses a network prefix, which must be canonical: 10.0.0.1/24 is almost always a
// typo for an address, and tools disagree on what it means.
func (v *validator) cidr(path, s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		v.add(path, "%q is not a valid CIDR (want e.g. 10.0.0.0/24 or fd00::/64)", clip(s))
		return netip.Prefix{}, false
	}
	if p.Masked() != p {
		v.add(path, "%s has host bits set; use %s", p, p.Masked())
		return netip.Prefix{}, false
	}
	return p, true
}

// --- Site ---

var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

func (v *validator) site(s *Site, hosts []Host) {
	v.doc = s.docIndex
	v.name("site.metadata.name", s.Metadata.Name, "site")
	v.labels("site.metadata.labels", s.Metadata.Labels, "Plinth")
	spec := &s.Spec
	v.controllers(spec, hosts)
	nets := v.networks(spec.Networks)
	v.policy(&spec.Policy)
	if spec.Kubernetes != nil {
		v.kubernetes(spec.Kubernetes, spec.Networks, nets)
		v.vipTaken("site.spec.kubernetes.controlPlaneVIP", spec.Kubernetes.ControlPlaneVIP, spec.Networks, hosts)
	}
	if spec.Ceph != nil {
		v.ceph(spec, hosts)
	}
	if spec.OVS != nil {
		v.ovs(spec.OVS)
	}
}

func (v *validator) controllers(spec *SiteSpec, hosts []Host) {
	const path = "site.spec.controllers"
	switch n := len(spec.Controllers); {
	case n == 0:
		v.add(path, "required: name 1 or 2 controller hosts")
	case n > 2:
		v.add(path, "%d controllers listed; a site has 1 or 2 (add a witness for quorum)", n)
	}
	// Resolve references only when the hosts are known.
	byName := map[string]*Host{}
	for i := range hosts {
		if _, dup := byName[hosts[i].Metadata.Name]; !dup {
			byName[hosts[i].Metadata.Name] = &hosts[i]
		}
	}
	resolve := len(hosts) > 0
	for i, c := range spec.Controllers {
		p := index(path, strconv.Itoa(i))
		if c == "" || !isDNSLabel(c) {
			v.name(p, c, "controller host")
			continue
		}
		if slices.Index(spec.Controllers, c) < i {
			v.add(p, "%q is listed twice", c)
			continue
		}
		if !resolve {
			continue
		}
		h, ok := byName[c]
		switch {
		case !ok:
			v.add(p, "no Host named %q; valid controller hosts are %s", c, listOr(controllerHosts(hosts)))
		case !slices.Contains(h.Spec.Roles, RoleController):
			v.add(p, "Host %q does not have role %s", c, RoleController)
		}
	}
	if w := spec.Witness; w != "" {
		const p = "site.spec.witness"
		switch _, ok := byName[w]; {
		case !isDNSLabel(w):
			v.name(p, w, "witness host")
		case slices.Contains(spec.Controllers, w):
			v.add(p, "%q is also a controller; the witness must be a third host", w)
		case resolve && !ok:
			v.add(p, "no Host named %q", w)
		}
	}
}

func controllerHosts(hosts []Host) []string {
	var names []string
	for _, h := range hosts {
		if slices.Contains(h.Spec.Roles, RoleController) {
			names = append(names, h.Metadata.Name)
		}
	}
	return names
}

// networks validates the site networks and returns their parsed prefixes (invalid
// ones are the zero Prefix) for later overlap checks.
func (v *validator) networks(nets []Network) []netip.Prefix {
	prefixes := make([]netip.Prefix, len(nets))
	seen := map[string]bool{}
	for i, n := range nets {
		p := index("site.spec.networks", key(n.Name, i))
		v.name(p+".name", n.Name, "network")
		if n.Name != "" && seen[n.Name] {
			v.add(p+".name", "duplicate network name %q; network names must be unique", n.Name)
		}
		seen[n.Name] = true
		v.oneOf(p+".role", n.Role, false, NetworkRoles...)
		if n.CIDR == "" {
			v.add(p+".cidr", "required: the network's CIDR, e.g. 10.0.0.0/24")
		} else if pfx, ok := v.cidr(p+".cidr", n.CIDR); ok {
			prefixes[i] = pfx
			for j := range i {
				if q := prefixes[j]; q.IsValid() && q.Overlaps(pfx) {
					v.add(p+".cidr", "%s overlaps network %q (%s)", pfx, nets[j].Name, q)
				}
			}
		}
		if n.Gateway != "" {
			if gw, ok := v.ip(p+".gateway", n.Gateway); ok && prefixes[i].IsValid() && !prefixes[i].Contains(gw) {
				v.add(p+".gateway", "%s is outside the network's cidr %s", gw, prefixes[i])
			}
		}
		if n.VLAN < 0 || n.VLAN > 4094 {
			v.add(p+".vlan", "%d is out of range; valid VLAN IDs are 1..4094 (0 for untagged)", n.VLAN)
		}
		v.mtu(p+".mtu", n.MTU, true)
		if n.Pool != nil {
			v.pool(p+".pool", n.Pool, prefixes[i])
		}
	}
	return prefixes
}

// pool checks an address pool: both ends inside the network's cidr, start <= end.
func (v *validator) pool(path string, pl *AddressPool, cidr netip.Prefix) {
	var ends [2]netip.Addr
	for i, f := range []struct{ name, s string }{{"start", pl.Start}, {"end", pl.End}} {
		fp := path + "." + f.name
		if f.s == "" {
			v.add(fp, "required: the %s of the range, e.g. 10.0.0.100", f.name)
			continue
		}
		a, ok := v.ip(fp, f.s)
		if !ok {
			continue
		}
		if a = a.Unmap(); cidr.IsValid() && !cidr.Contains(a) {
			v.add(fp, "%s is outside the network's cidr %s", a, cidr)
			continue
		}
		ends[i] = a
	}
	switch {
	case !ends[0].IsValid() || !ends[1].IsValid():
	case ends[0].Is4() != ends[1].Is4():
		v.add(path+".end", "%s is %s but start %s is %s", ends[1], family(ends[1]), ends[0], family(ends[0]))
	case ends[1].Less(ends[0]):
		v.add(path+".end", "%s is below start %s", ends[1], ends[0])
	}
}

func (v *validator) policy(p *Policy) {
	const path = "site.spec.policy"
	v.oneOf(path+".drift", p.Drift, true, DriftPolicies...)
	positive := func(field string, n, def int) {
		if n < 0 {
			v.add(path+"."+field, "%d must be positive (0 means the default, %d)", n, def)
		}
	}
	positive("driftCheckSeconds", p.DriftCheckSeconds, DefaultDriftCheckSeconds)
	positive("maxAttempts", p.MaxAttempts, DefaultMaxAttempts)
	positive("retryBaseSeconds", p.RetryBaseSeconds, DefaultRetryBaseSeconds)
	positive("retryMaxSeconds", p.RetryMaxSeconds, DefaultRetryMaxSeconds)
	base, max := orDefault(p.RetryBaseSeconds, DefaultRetryBaseSeconds), orDefault(p.RetryMaxSeconds, DefaultRetryMaxSeconds)
	if base > 0 && max > 0 && base > max {
		v.add(path+".retryBaseSeconds", "%d is above retryMaxSeconds (%d)", base, max)
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// listOr renders names for "valid values are ..." messages.
func listOr(names []string) string {
	if len(names) == 0 {
		return "none (no Host has role controller)"
	}
	return strings.Join(names, ", ")
}
