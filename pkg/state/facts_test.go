package state

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// reportLinks reports facts of a one-node, four-CPU host with the given links.
func reportLinks(l *log, host string, links ...string) {
	l.t.Helper()
	f := hostspec.Facts{NUMANodes: []hostspec.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}}, Links: []hostspec.LinkFact{{Name: "lo"}}}
	for _, n := range links {
		f.Links = append(f.Links, hostspec.LinkFact{Name: n, Kind: "device"})
	}
	raw, err := json.Marshal(f)
	if err != nil {
		l.t.Fatal(err)
	}
	l.must(CmdReportFacts, ReportFacts{Host: host, Facts: raw, Hash: f.Hash()})
}

func condition(v View, host, typ string) api.Condition {
	h, _ := v.Host(host)
	if c := plan.Find(h.Host.Status.Conditions, typ); c != nil {
		return *c
	}
	return api.Condition{}
}

func hasEvent(v View, reason, object string) bool {
	for _, e := range v.Events(0) {
		if e.Reason == reason && e.Object == object {
			return true
		}
	}
	return false
}

// With facts known, an apply the host's facts make impossible is refused whole, with
// the file and field path, and the dry run says the same.
func TestApplyAgainstKnownFactsIsRefused(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1")})
	enrolled(l, "w1")
	reportLinks(l, "w1", "eth1")
	before := cloneTables(l.view().t)

	m := manifest("c0", "w1")
	m.Hosts[1].Spec.Interfaces[0].Name = "eth9"
	data, _ := Encode(CmdApplyManifest, l.clock, ApplyManifest{File: "site.yaml", Manifest: m})
	_, derr := l.s.DryRun(data)
	aerr := l.apply(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
	var fe api.FieldError
	if !errors.As(aerr, &fe) || fe.File != "site.yaml" || fe.Path != "hosts[w1].spec.interfaces[0].name" ||
		!strings.Contains(fe.Msg, `host w1 has no link named "eth9"`) || !strings.Contains(fe.Msg, "its links: eth1") {
		t.Fatalf("apply: %v (%+v)", aerr, fe)
	}
	if derr == nil || derr.Error() != aerr.Error() {
		t.Fatalf("dry run and apply must refuse alike:\n dry:   %v\n apply: %v", derr, aerr)
	}
	after := l.view()
	if c := Changes(View{before}, after); len(c) != 1 || c[0] != "no changes" || len(after.Events(0)) != len(View{before}.Events(0)) {
		t.Fatalf("a refused apply changed the state: %q", c)
	}
	// A host that has reported no facts is not checked at apply.
	m = manifest("c0", "w1", "w2")
	m.Hosts[2].Spec.Interfaces[0].Name = "eth9"
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
}

// Facts that arrive after the apply and make the stored spec impossible hold the
// host's steps (none is handed out) under an InvalidSpec condition naming the field;
// fixing the manifest, or facts that fit, releases them.
func TestFactsArrivingLaterHoldTheHost(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1")})
	enrolled(l, "c0")
	enrolled(l, "w1")
	if st, _ := l.view().Step("w1/host.network"); st.State != plan.Ready {
		t.Fatalf("before facts: %s", st.State)
	}
	reportLinks(l, "c0", "eth1")
	reportLinks(l, "w1", "ens3") // w1 has no eth1

	v := l.view()
	inv := condition(v, "w1", api.ConditionInvalidSpec)
	if inv.Status != api.ConditionTrue || !strings.Contains(inv.Message, `hosts[w1].spec.interfaces[0].name: host w1 has no link named "eth1"`) {
		t.Fatalf("InvalidSpec = %+v", inv)
	}
	if r := condition(v, "w1", api.ConditionReady); r.Status != api.ConditionFalse || r.Reason != "InvalidSpec" {
		t.Fatalf("Ready = %+v", r)
	}
	if c := condition(v, "c0", api.ConditionInvalidSpec); c.Status != api.ConditionFalse {
		t.Fatalf("c0 InvalidSpec = %+v", c)
	}
	site, _ := v.Site()
	if c := plan.Find(site.Site.Status.Conditions, api.ConditionInvalidSpec); c == nil || c.Status != api.ConditionTrue || c.Reason != "HostsAffected" {
		t.Fatalf("site InvalidSpec = %+v", c)
	}
	if !hasEvent(v, "InvalidSpec", "host/w1") {
		t.Fatal("no InvalidSpec event")
	}
	for _, st := range v.Steps("w1") {
		if st.Runnable(l.clock) || st.Held == "" {
			t.Fatalf("step %s is handed out: %s held %q", st.ID, st.State, st.Held)
		}
	}
	st, _ := v.Step("w1/host.network")
	if err := l.apply(CmdStepStart, StepStart{ID: st.ID, Host: "w1", InputsHash: st.InputsHash}); err == nil {
		t.Fatal("a held step was started")
	}
	if st, _ := v.Step("c0/host.network"); st.State != plan.Ready || st.Held != "" {
		t.Fatalf("the other host's step: %s held %q", st.State, st.Held)
	}

	// An apply that leaves the problem as it is (a label) is not refused by it, and
	// the host stays held.
	m := manifest("c0", "w1")
	m.Hosts[0].Metadata.Labels = map[string]string{"rack": "r1"}
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
	if st, _ := l.view().Step("w1/host.network"); st.State != plan.Pending || st.Held == "" {
		t.Fatalf("after an unrelated apply: %s held %q", st.State, st.Held)
	}

	// Fixing the manifest releases the host.
	m.Hosts[1].Spec.Interfaces[0].Name = "ens3"
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
	v = l.view()
	if c := condition(v, "w1", api.ConditionInvalidSpec); c.Status != api.ConditionFalse {
		t.Fatalf("after the fix: InvalidSpec = %+v", c)
	}
	if st, _ := v.Step("w1/host.network"); st.State != plan.Ready || st.Held != "" {
		t.Fatalf("after the fix: %s held %q", st.State, st.Held)
	}
	if !hasEvent(v, "SpecFitsFacts", "host/w1") {
		t.Fatal("no SpecFitsFacts event")
	}

	// Facts that change under a stored spec hold it, and facts that fit again release it.
	reportLinks(l, "w1", "ens4")
	if st, _ := l.view().Step("w1/host.network"); st.State != plan.Pending || st.Held == "" {
		t.Fatalf("after ens3 went: %s held %q", st.State, st.Held)
	}
	reportLinks(l, "w1", "ens3", "ens4")
	if st, _ := l.view().Step("w1/host.network"); st.State != plan.Ready || st.Held != "" {
		t.Fatalf("after ens3 came back: %s held %q", st.State, st.Held)
	}
}

// A site change can make or unmake a problem of a host the apply leaves as it is
// (here a node's reservedCPUs in site.spec.kubernetes): every host's verdict is
// checked again then, not only the hosts the file declares anew.
func TestSiteChangeRechecksUntouchedHosts(t *testing.T) {
	l := newLog(t)
	m := manifest("c0", "w1")
	m.Site.Spec.Kubernetes = &api.KubernetesSpec{Nodes: []api.KubernetesNode{{Host: "w1", ReservedCPUs: "7"}}}
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
	enrolled(l, "w1")
	reportLinks(l, "w1", "eth1") // CPUs 0-3: no CPU 7
	if c := condition(l.view(), "w1", api.ConditionInvalidSpec); c.Status != api.ConditionTrue {
		t.Fatalf("before the fix: InvalidSpec = %+v", c)
	}
	m.Site.Spec.Kubernetes.Nodes[0].ReservedCPUs = "1"
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m})
	if c := condition(l.view(), "w1", api.ConditionInvalidSpec); c.Status != api.ConditionFalse {
		t.Fatalf("after the site's fix: InvalidSpec = %+v", c)
	}
}
