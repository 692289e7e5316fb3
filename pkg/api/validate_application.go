package api

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Helm's and Kubernetes' limits an application's names must fit.
const (
	// MaxReleaseNameLength is Helm's limit on a release name (it suffixes it in the
	// names of the objects it keeps).
	MaxReleaseNameLength = 53
	// MaxChartTimeoutSeconds bounds a chart's wait.timeoutSeconds.
	MaxChartTimeoutSeconds = 3600
	// MaxMinReadySeconds bounds a chart's wait.minReadySeconds.
	MaxMinReadySeconds = 600
	// MaxNodesGateMin bounds a nodesLabelled gate's min.
	MaxNodesGateMin = 1000
	// maxSecretKeyLength is Kubernetes' limit on a Secret's data key.
	maxSecretKeyLength = 253
)

var secretKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// ValidateApplication checks one application's meaning (Decode checked its shape) and
// returns every problem found. Defaulted and undefaulted applications are both
// accepted. It needs nothing but the application: what the site must provide for
// it (the Ceph pools and users its gates name, DPDK hosts) is checked against the
// site's state by appplan.CheckSite, at upload and at apply.
func ValidateApplication(file string, a *Application) ErrorList {
	v := &validator{file: file}
	v.application(a, 0)
	return v.errs
}

func (v *validator) application(a *Application, i int) {
	v.doc = a.docIndex
	root := index("applications", key(a.Metadata.Name, i))
	v.name(root+".metadata.name", a.Metadata.Name, "application")
	v.labels(root+".metadata.labels", a.Metadata.Labels, "Plinth")
	spec := root + ".spec"
	v.passwords(spec+".passwords", a.Spec.Passwords)

	groups := a.Spec.Groups
	if len(groups) == 0 {
		v.add(spec+".groups", "required: at least one chart group, e.g. [{name: base, charts: [{name: web, source: {archive: web-0.1.0.tgz}}]}]")
		return
	}
	// Where each chart is declared, to refuse a second declaration and to order
	// chart gates; releases by namespace/release, which Helm keeps unique.
	type place struct {
		group int
		path  string
	}
	charts := map[string]place{}
	releases := map[string]string{}
	groupAt := map[string]int{}
	total := 0
	for gi, g := range groups {
		gp := index(spec+".groups", key(g.Name, gi))
		v.name(gp+".name", g.Name, "chart group")
		if first, dup := groupAt[g.Name]; dup && g.Name != "" {
			v.add(gp+".name", "duplicate group name %q (also groups[%d]); group names must be unique in the application", g.Name, first)
		} else {
			groupAt[g.Name] = gi
		}
		if len(g.Charts) == 0 {
			v.add(gp+".charts", "required: at least one chart; drop the empty group")
		}
		total += len(g.Charts)
		for ci, c := range g.Charts {
			cp := index(gp+".charts", key(c.Name, ci))
			v.name(cp+".name", c.Name, "chart")
			if first, dup := charts[c.Name]; dup && c.Name != "" {
				v.add(cp+".name", "chart %q is declared twice (also at %s); a chart is installed once, so it belongs in one group", c.Name, first.path)
			} else if c.Name != "" {
				charts[c.Name] = place{gi, cp}
			}
			v.chart(cp, c, releases)
		}
	}
	if total > MaxChartsPerApp {
		v.add(spec+".groups", "%d charts; an application may have at most %d: split it into several applications", total, MaxChartsPerApp)
	}
	// Gates last: a chart gate refers to the charts collected above.
	for gi, g := range groups {
		gp := index(spec+".groups", key(g.Name, gi))
		for j, gate := range g.Gates {
			p := index(gp+".gates", strconv.Itoa(j))
			ref, ok := v.gate(p, gate)
			if !ok || ref == "" {
				continue
			}
			app, chart, other := strings.Cut(ref, "/")
			if !other {
				app, chart = a.Metadata.Name, ref
			}
			if app != a.Metadata.Name {
				continue // another application's chart: checked when this one waits for it
			}
			at, ok := charts[chart]
			switch {
			case !ok:
				v.add(p+".chart", "no chart %q in application %q; valid charts are %s", chart, app, strings.Join(sortedNames(charts), ", "))
			case at.group == gi:
				v.add(p+".chart", "chart %q is in this group (%q): a group waiting for its own chart would never start; move the chart to an earlier group", chart, g.Name)
			case at.group > gi:
				v.add(p+".chart", "chart %q is in a later group (%q): groups run in order, so this group would wait forever; move the chart to an earlier group or the gate to a later one", chart, groups[at.group].Name)
			}
		}
	}
}

// chart checks one chart's release, namespace, source, wait and remediation.
// releases maps "namespace/release" to the path that declared it first.
func (v *validator) chart(p string, c Chart, releases map[string]string) {
	rel, relPath := orDefault(c.Release, c.Name), p+".release"
	if c.Release == "" {
		relPath = p + ".name" // the release is named after the chart
	}
	switch {
	case rel == "":
	case !isDNSLabel(rel):
		v.add(relPath, "%q is not a valid Helm release name: %s", clip(rel), labelRule)
	case len(rel) > MaxReleaseNameLength:
		v.add(relPath, "release name %q is %d characters; Helm allows at most %d: set a shorter release", rel, len(rel), MaxReleaseNameLength)
	}
	ns := orDefault(c.Namespace, DefaultChartNamespace)
	if !isDNSLabel(ns) {
		v.add(p+".namespace", "%q is not a valid namespace: %s", clip(ns), labelRule)
	}
	if rel != "" {
		k := ns + "/" + rel
		if first, dup := releases[k]; dup {
			v.add(relPath, "release %q in namespace %q is also %s's; Helm release names are unique per namespace: set release", rel, ns, first)
		} else {
			releases[k] = p
		}
	}
	v.chartSource(p+".source", c.Source)
	v.oneOf(p+".wait.for", c.Wait.For, true, WaitFors...)
	if n := c.Wait.TimeoutSeconds; n != 0 && (n < 1 || n > MaxChartTimeoutSeconds) {
		v.add(p+".wait.timeoutSeconds", "%d is out of range; valid: 1..%d seconds (0 means the default, %d)", n, MaxChartTimeoutSeconds, DefaultChartTimeout)
	}
	if n := c.Wait.MinReadySeconds; n < 0 || n > MaxMinReadySeconds {
		v.add(p+".wait.minReadySeconds", "%d is out of range; valid: 0..%d seconds", n, MaxMinReadySeconds)
	}
	v.oneOf(p+".remediation", c.Remediation, true, Remediations...)
	// Protected means the release is never reinstalled (nor uninstalled) to recover;
	// asking for reinstall as well is a contradiction, so say so rather than pick one.
	if c.Protected && c.Remediation == RemediateReinstall {
		v.add(p+".remediation", "reinstall contradicts protected: true (a protected release is kept for inspection, never reinstalled); use rollback or drop protected")
	}
}

// chartSource checks that exactly one of archive, oci and repo is set, and its form.
func (v *validator) chartSource(p string, s ChartSource) {
	var set []string
	for _, f := range []struct{ name, val string }{{"archive", s.Archive}, {"oci", s.OCI}, {"repo", s.Repo}} {
		if f.val != "" {
			set = append(set, f.name)
		}
	}
	switch len(set) {
	case 0:
		v.add(p, "required: one of archive (a .tgz uploaded with the application), oci (oci://REGISTRY/PATH:TAG) or repo (a chart repository URL, with chart and version)")
		return
	case 1:
	default:
		v.add(p, "sets %s; set exactly one of archive, oci or repo", strings.Join(set, " and "))
		return
	}
	switch {
	case s.Archive != "":
		a := s.Archive
		switch {
		case strings.ContainsAny(a, `/\`) || a == "." || a == "..":
			v.add(p+".archive", "%q is a path; name the archive by its file name (e.g. web-0.1.0.tgz), which app upload reads next to the application file", clip(a))
		case !strings.HasSuffix(a, ".tgz") || len(a) == len(".tgz"):
			v.add(p+".archive", "%q is not a chart archive name; want a file name ending .tgz (helm package writes NAME-VERSION.tgz)", clip(a))
		}
	case s.OCI != "":
		if rest, ok := strings.CutPrefix(s.OCI, "oci://"); !ok || rest == "" || strings.ContainsAny(rest, " \t") {
			v.add(p+".oci", "%q is not an OCI reference; want oci://REGISTRY/PATH[:TAG], e.g. oci://registry.example/charts/keystone:0.3.1", clip(s.OCI))
		}
	case s.Repo != "":
		u, err := url.Parse(s.Repo)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(p+".repo", "%q is not a chart repository URL; want http(s)://HOST/PATH, e.g. https://charts.example/stable", clip(s.Repo))
		}
		if s.Chart == "" {
			v.add(p+".chart", "required with repo: the chart's name in the repository, e.g. keystone")
		}
	}
	if s.Repo == "" {
		if s.Chart != "" {
			v.add(p+".chart", "only with repo: an archive or OCI reference already names its chart")
		}
		if s.Version != "" {
			v.add(p+".version", "only with repo: an archive has its version in it, an OCI reference in its tag")
		}
	}
}

// gate checks that a gate sets exactly one field, and that field. It returns the
// chart a chart gate names, for the caller to place.
func (v *validator) gate(p string, g Gate) (chart string, ok bool) {
	var set []string
	if g.NodesLabelled != nil {
		set = append(set, GateNodesLabelled)
	}
	if len(g.CephPools) > 0 {
		set = append(set, GateCephPools)
	}
	if len(g.CephUsers) > 0 {
		set = append(set, GateCephUsers)
	}
	if g.DPDK {
		set = append(set, GateDPDK)
	}
	if g.Chart != "" {
		set = append(set, GateChart)
	}
	switch len(set) {
	case 0:
		v.add(p, "empty gate: set one of %s", strings.Join(GateNames, ", "))
		return "", false
	case 1:
	default:
		v.add(p, "sets %s; a gate is one condition: set exactly one of %s and write the others as separate gates", strings.Join(set, " and "), strings.Join(GateNames, ", "))
		return "", false
	}
	switch {
	case g.NodesLabelled != nil:
		n := g.NodesLabelled
		if _, err := ParseNodeLabel(n.Label); err != nil {
			v.add(p+".nodesLabelled.label", "%v", err)
		}
		if n.Min != 0 && (n.Min < 1 || n.Min > MaxNodesGateMin) {
			v.add(p+".nodesLabelled.min", "%d is out of range; valid: 1..%d nodes (0 means the default, %d)", n.Min, MaxNodesGateMin, DefaultNodesGateMin)
		}
	case len(g.CephPools) > 0:
		v.gateNames(p+"."+GateCephPools, g.CephPools, "Ceph pool")
	case len(g.CephUsers) > 0:
		v.gateNames(p+"."+GateCephUsers, g.CephUsers, "cephx user")
	case g.Chart != "":
		app, chart, other := strings.Cut(g.Chart, "/")
		if !other {
			app, chart = "", app
		}
		if (other && !isDNSLabel(app)) || !isDNSLabel(chart) {
			v.add(p+".chart", "%q is not a chart reference; want CHART (this application's) or APP/CHART (another's), each a name: %s", clip(g.Chart), labelRule)
			return "", false
		}
		return g.Chart, true
	}
	return "", true
}

func (v *validator) gateNames(p string, names []string, what string) {
	for i, n := range names {
		ip := index(p, strconv.Itoa(i))
		switch {
		case n == "":
			v.add(ip, "required: the %s name", what)
		case slices.Index(names, n) < i:
			v.add(ip, "%q is listed twice", clip(n))
		}
	}
}

// passwords checks generated password names: each becomes a key of the
// "<application>-passwords" Secret.
func (v *validator) passwords(p string, names []string) {
	for i, n := range names {
		ip := index(p, strconv.Itoa(i))
		switch {
		case n == "":
			v.add(ip, "required: the password's name, e.g. admin")
		case len(n) > maxSecretKeyLength || !secretKeyRE.MatchString(n):
			v.add(ip, "%q is not a valid Secret data key: at most %d of [-._a-zA-Z0-9]", clip(n), maxSecretKeyLength)
		case slices.Index(names, n) < i:
			v.add(ip, "%q is listed twice", clip(n))
		}
	}
}

// NodeLabel is a parsed nodesLabelled gate label.
type NodeLabel struct {
	Key, Value string
	// AnyValue is set for "key" (any value); "key=" asks for the empty value.
	AnyValue bool
}

// Matches reports whether labels carry the label.
func (l NodeLabel) Matches(labels map[string]string) bool {
	v, ok := labels[l.Key]
	return ok && (l.AnyValue || v == l.Value)
}

// String renders the label as written.
func (l NodeLabel) String() string {
	if l.AnyValue {
		return l.Key
	}
	return l.Key + "=" + l.Value
}

// ParseNodeLabel parses a nodesLabelled gate's "key=value" or "key" (any value), by
// Kubernetes' label syntax (the same rules as a Host's labels).
func ParseNodeLabel(s string) (NodeLabel, error) {
	k, val, hasValue := strings.Cut(s, "=")
	switch {
	case s == "":
		return NodeLabel{}, fmt.Errorf("required: a node label, key=value or key (any value), e.g. openstack-compute-node=enabled")
	case !validLabelKey(k):
		return NodeLabel{}, fmt.Errorf("%q: key %q is not a valid label key: [prefix/]name, the name at most 63 of [A-Za-z0-9_.-] starting and ending alphanumeric, the prefix a DNS name of at most 253", clip(s), clip(k))
	case hasValue && val != "" && !validLabelValue(val):
		return NodeLabel{}, fmt.Errorf("%q: value %q is not a valid label value: at most 63 of [A-Za-z0-9_.-], starting and ending alphanumeric, or empty", clip(s), clip(val))
	}
	return NodeLabel{Key: k, Value: val, AnyValue: !hasValue}, nil
}

func sortedNames[T any](m map[string]T) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
