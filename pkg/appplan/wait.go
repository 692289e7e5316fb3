package appplan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// Observed is what gates are checked against.
type Observed struct {
	Nodes []Node
	// Steps are the site's step records (plan.Record) — ceph.pool / ceph.user / ovs dpdk steps.
	Steps []plan.Record
	// Charts are the chart statuses of every application, keyed "APP/CHART".
	Charts map[string]api.ChartStatus
}

// Node is a Kubernetes node as a nodesLabelled gate sees it.
type Node struct {
	Name   string
	Labels map[string]string
	Ready  bool
}

// ChartKey is the key of a chart's status in Observed.Charts.
func ChartKey(app, chart string) string { return app + "/" + chart }

// Wait returns "" if every gate of group is met, else what the group waits for in
// words for the status ("2 Ready nodes labelled openstack-compute-node=enabled (have 1: compute-0)",
// "ceph.user glance on controller-0 (Running)", "chart demo/web (applying)"); several
// unmet gates are joined by "; ", in the group's order.
func Wait(app string, group api.ChartGroup, f SiteFacts, o Observed) string {
	steps := make(map[string]plan.Record, len(o.Steps))
	for _, r := range o.Steps {
		steps[r.ID] = r
	}
	var waits []string
	for _, g := range group.Gates {
		waits = append(waits, gateWait(app, g, f, o, steps)...)
	}
	return strings.Join(waits, "; ")
}

func gateWait(app string, g api.Gate, f SiteFacts, o Observed, steps map[string]plan.Record) []string {
	switch {
	case g.NodesLabelled != nil:
		n := g.NodesLabelled.Effective()
		l, err := api.ParseNodeLabel(n.Label)
		if err != nil {
			return []string{fmt.Sprintf("nodes labelled %s: %v", n.Label, err)}
		}
		var have []string
		for _, node := range o.Nodes {
			if node.Ready && l.Matches(node.Labels) {
				have = append(have, node.Name)
			}
		}
		if len(have) >= n.Min {
			return nil
		}
		slices.Sort(have)
		had := "have 0"
		if len(have) > 0 {
			had = fmt.Sprintf("have %d: %s", len(have), strings.Join(have, ", "))
		}
		return []string{fmt.Sprintf("%d Ready %s labelled %s (%s)", n.Min, plural(n.Min, "node"), l, had)}
	case len(g.CephPools) > 0:
		return cephWaits(f, cephspec.KindPool, g.CephPools, steps)
	case len(g.CephUsers) > 0:
		return cephWaits(f, cephspec.KindUser, g.CephUsers, steps)
	case g.DPDK:
		return dpdkWaits(o.Steps)
	case g.Chart != "":
		key := g.Chart
		if !strings.Contains(key, "/") {
			key = ChartKey(app, key)
		}
		st, ok := o.Charts[key]
		switch {
		case !ok:
			return []string{fmt.Sprintf("chart %s (not applied)", key)}
		case st.State != api.ChartDeployed:
			return []string{fmt.Sprintf("chart %s (%s)", key, st.State)}
		}
	}
	return nil
}

// cephWaits names the ceph.pool or ceph.user steps of names that have not succeeded.
func cephWaits(f SiteFacts, kind string, names []string, steps map[string]plan.Record) []string {
	host := ""
	if f.Site != nil {
		host = api.CephHost(&f.Site.Spec)
	}
	var out []string
	for _, n := range names {
		r, ok := steps[plan.StepID(host, kind, n)]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %s (not planned: the site declares no such %s)", kind, n, strings.TrimPrefix(kind, "ceph.")))
		case r.State != plan.Succeeded:
			out = append(out, fmt.Sprintf("%s %s on %s (%s)", kind, n, r.Host, r.State))
		}
	}
	return out
}

// dpdkWaits names the hosts whose DPDK-enabled ovs.dpdk step has not succeeded.
func dpdkWaits(records []plan.Record) []string {
	var out []string
	enabled := 0
	for _, r := range records {
		if r.Kind != ovsspec.KindDPDK {
			continue
		}
		var in ovsspec.DPDKInputs
		if err := json.Unmarshal(r.Inputs, &in); err != nil || !in.Enabled {
			continue
		}
		enabled++
		if r.State != plan.Succeeded {
			out = append(out, fmt.Sprintf("%s on %s (%s)", ovsspec.KindDPDK, r.Host, r.State))
		}
	}
	if enabled == 0 {
		return []string{ovsspec.KindDPDK + " (no host has DPDK enabled)"}
	}
	slices.Sort(out)
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// CheckSite returns what in app the site cannot satisfy: a cephPools/cephUsers gate naming
// a pool/user the site does not declare, a dpdk gate on a site without DPDK hosts (paths like
// applications[demo].spec.groups[top].gates[1].cephUsers[0]). Checked at upload (pkg/server); at apply a gate the site no longer meets just waits, saying so.
func CheckSite(file string, app *api.Application, f SiteFacts) api.ErrorList {
	var errs api.ErrorList
	add := func(path, format string, args ...any) {
		errs = append(errs, api.FieldError{File: file, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	c := cephFacts(f)
	root := "applications[" + app.Metadata.Name + "].spec.groups"
	for gi, g := range app.Spec.Groups {
		gname := g.Name
		if gname == "" {
			gname = strconv.Itoa(gi)
		}
		for j, gate := range g.Gates {
			p := root + "[" + gname + "].gates[" + strconv.Itoa(j) + "]"
			check := func(field, what string, names, have []string) {
				for i, n := range names {
					ip := p + "." + field + "[" + strconv.Itoa(i) + "]"
					switch {
					case !c.enabled:
						add(ip, "the site declares no ceph, so %s %q never becomes ready; add site.spec.ceph or drop the gate", what, n)
					case !slices.Contains(have, n):
						add(ip, "the site declares no %s %q, so the group would wait forever; site %ss are %s", what, n, what, strings.Join(have, ", "))
					}
				}
			}
			check(api.GateCephPools, "pool", gate.CephPools, c.pools)
			check(api.GateCephUsers, "user", gate.CephUsers, c.users)
			if gate.DPDK && len(plan.DPDKHosts(f.Site, f.Hosts)) == 0 {
				add(p+"."+api.GateDPDK, "no host of the site runs OVS-DPDK (site.spec.ovs.dpdk on a data host), so the group would wait forever; drop the gate or enable DPDK")
			}
		}
	}
	return errs
}
