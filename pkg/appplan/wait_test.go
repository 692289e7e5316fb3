package appplan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

func record(host, kind, name string, state plan.State, inputs any) plan.Record {
	raw, _ := json.Marshal(inputs)
	return plan.Record{Step: plan.Step{ID: plan.StepID(host, kind, name), Host: host, Kind: kind, Inputs: raw}, State: state}
}

func TestWait(t *testing.T) {
	f := facts()
	computeLabel := map[string]string{"openstack-compute-node": "enabled"}
	nodes := []Node{
		{Name: "compute-1", Labels: computeLabel, Ready: true},
		{Name: "compute-0", Labels: computeLabel, Ready: true},
		{Name: "compute-2", Labels: computeLabel, Ready: false},
		{Name: "controller-0", Labels: map[string]string{"openstack-control-plane": "enabled"}, Ready: true},
	}
	steps := []plan.Record{
		record("controller-0", cephspec.KindUser, "kube-rbd", plan.Succeeded, nil),
		record("controller-0", cephspec.KindUser, "glance", plan.Running, nil),
		record("controller-0", cephspec.KindPool, "images", plan.Succeeded, nil),
		record("controller-0", cephspec.KindPool, "vms", plan.Failed, nil),
		record("compute-0", ovsspec.KindDPDK, "", plan.Succeeded, ovsspec.DPDKInputs{Enabled: true}),
		record("compute-1", ovsspec.KindDPDK, "", plan.Blocked, ovsspec.DPDKInputs{Enabled: true}),
		record("compute-2", ovsspec.KindDPDK, "", plan.Failed, ovsspec.DPDKInputs{}), // no DPDK: not waited for
	}
	charts := map[string]api.ChartStatus{
		"demo/web":  {Chart: "web", State: api.ChartDeployed},
		"demo/db":   {Chart: "db", State: api.ChartApplying},
		"infra/dns": {Chart: "dns", State: api.ChartFailed},
	}
	o := Observed{Nodes: nodes, Steps: steps, Charts: charts}
	nodesGate := func(label string, min int) api.Gate {
		return api.Gate{NodesLabelled: &api.NodesGate{Label: label, Min: min}}
	}
	for _, tc := range []struct {
		name  string
		gates []api.Gate
		obs   Observed
		want  string
	}{
		{"no gates", nil, o, ""},
		{"nodes met", []api.Gate{nodesGate("openstack-compute-node=enabled", 2)}, o, ""},
		{"nodes default min", []api.Gate{nodesGate("openstack-control-plane", 0)}, o, ""},
		{"nodes short", []api.Gate{nodesGate("openstack-compute-node=enabled", 3)}, o,
			"3 Ready nodes labelled openstack-compute-node=enabled (have 2: compute-0, compute-1)"},
		{"nodes none", []api.Gate{nodesGate("sriov=enabled", 1)}, o, "1 Ready node labelled sriov=enabled (have 0)"},
		{"wrong value", []api.Gate{nodesGate("openstack-compute-node=disabled", 1)}, o, "1 Ready node labelled openstack-compute-node=disabled (have 0)"},
		{"users met", []api.Gate{{CephUsers: []string{"kube-rbd"}}}, o, ""},
		{"user running", []api.Gate{{CephUsers: []string{"kube-rbd", "glance"}}}, o, "ceph.user glance on controller-0 (Running)"},
		{"user not planned", []api.Gate{{CephUsers: []string{"swift"}}}, o, "ceph.user swift (not planned: the site declares no such user)"},
		{"pools", []api.Gate{{CephPools: []string{"images", "vms"}}}, o, "ceph.pool vms on controller-0 (Failed)"},
		{"dpdk", []api.Gate{{DPDK: true}}, o, "ovs.dpdk on compute-1 (Blocked)"},
		{"dpdk met", []api.Gate{{DPDK: true}}, Observed{Steps: steps[4:5]}, ""},
		{"dpdk none enabled", []api.Gate{{DPDK: true}}, Observed{Steps: steps[6:]}, "ovs.dpdk (no host has DPDK enabled)"},
		{"chart met", []api.Gate{{Chart: "web"}}, o, ""},
		{"chart applying", []api.Gate{{Chart: "db"}}, o, "chart demo/db (applying)"},
		{"other app chart", []api.Gate{{Chart: "infra/dns"}}, o, "chart infra/dns (failed)"},
		{"chart not applied", []api.Gate{{Chart: "infra/ntp"}}, o, "chart infra/ntp (not applied)"},
		{"several, in order", []api.Gate{{Chart: "db"}, nodesGate("openstack-compute-node=enabled", 2), {CephUsers: []string{"glance"}}}, o,
			"chart demo/db (applying); ceph.user glance on controller-0 (Running)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Wait("demo", api.ChartGroup{Name: "g", Gates: tc.gates}, f, tc.obs)
			if got != tc.want {
				t.Errorf("Wait = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckSite(t *testing.T) {
	app := &api.Application{Metadata: api.ObjectMeta{Name: "demo"}, Spec: api.ApplicationSpec{Groups: []api.ChartGroup{{
		Name: "top",
		Gates: []api.Gate{
			{CephPools: []string{"images", "gold"}},
			{CephUsers: []string{"kube-rbd", "swift"}},
			{DPDK: true},
		},
	}}}}
	got := func(f SiteFacts) string {
		var lines []string
		for _, e := range CheckSite("demo.yaml", app, f) {
			lines = append(lines, e.Error())
		}
		return strings.Join(lines, "\n")
	}
	if s := got(facts()); s != `demo.yaml: applications[demo].spec.groups[top].gates[0].cephPools[1]: the site declares no pool "gold", so the group would wait forever; site pools are kube-rbd, images, volumes, vms, backups
demo.yaml: applications[demo].spec.groups[top].gates[1].cephUsers[1]: the site declares no user "swift", so the group would wait forever; site users are kube-rbd, glance, cinder, nova` {
		t.Errorf("CheckSite:\n%s", s)
	}
	f := facts()
	f.Site.Spec.Ceph = nil
	f.Site.Spec.OVS.DPDK = false
	s := got(f)
	for _, want := range []string{
		"gates[0].cephPools[0]: the site declares no ceph", "gates[1].cephUsers[1]: the site declares no ceph",
		"gates[2].dpdk: no host of the site runs OVS-DPDK",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("CheckSite without ceph or DPDK:\n%s\nwant ...%s", s, want)
		}
	}
}
