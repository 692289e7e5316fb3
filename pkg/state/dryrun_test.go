package state

import (
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
)

// The dry run is the FSM's own apply on a copy: what it prints is what the apply
// then does, label changes included, and the store is untouched by it.
func TestDryRunIsTheApply(t *testing.T) {
	l := newLog(t)
	dry := func(m api.Manifest) ([]string, error) {
		t.Helper()
		data, err := Encode(CmdApplyManifest, l.clock, ApplyManifest{File: "site.yaml", Manifest: m})
		if err != nil {
			t.Fatal(err)
		}
		return l.s.DryRun(data)
	}
	first := poolManifest("c0", "w1")
	plan, err := dry(first)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(plan, "\n")
	for _, want := range []string{"+ site lab", "+ host c0", "+ host w1", "+ address 10.5.0.100 from network stor for host c0", "+ step c0/host.network: "} {
		if !strings.Contains(got, want) {
			t.Errorf("first plan lacks %q:\n%s", want, got)
		}
	}
	if _, ok := l.view().Site(); ok || len(l.view().Hosts()) != 0 {
		t.Fatal("a dry run changed the store")
	}
	// The apply answers with the plan it carried out: the dry run's, line for line.
	applied := func(m api.Manifest, want []string) {
		t.Helper()
		got, ok := l.answer(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: m}).(Plan)
		if !ok || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("the apply's answer is not its dry run's plan:\n apply: %q\n dry:   %q", got, want)
		}
	}
	applied(first, plan)
	if plan, err := dry(first); err != nil || strings.Join(plan, "\n") != "no changes" {
		t.Fatalf("re-apply plan: %q %v", plan, err)
	}

	// A label change alone: the spec hash is the same, yet the apply stores it.
	labelled := poolManifest("c0", "w1")
	labelled.Hosts[1].Metadata.Labels = map[string]string{"rack": "r2"}
	plan, err = dry(labelled)
	if err != nil || len(plan) != 1 || plan[0] != "~ host w1: labels changed (generation 1 -> 2)" {
		t.Fatalf("label change plan: %q %v", plan, err)
	}
	applied(labelled, plan)
	applied(labelled, []string{"no changes"})

	// Refused the same way the apply refuses it.
	bad := poolManifest("c0", "w1")
	bad.Hosts[1].Spec.Roles = []string{"dancer"}
	_, derr := dry(bad)
	aerr := l.apply(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: bad})
	if derr == nil || aerr == nil || derr.Error() != aerr.Error() {
		t.Fatalf("dry run and apply must refuse alike:\n dry:   %v\n apply: %v", derr, aerr)
	}
}

// A refused apply leaves no trace but the log index: no document, allocation, step
// or event changes (dispatch also runs manifest commands on a copy, so a replan that
// failed after the documents were stored could not leave them half applied).
func TestRefusedApplyChangesNothing(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: poolManifest("c0", "w1")})
	before := cloneTables(l.view().t)
	m := poolManifest("c0", "w1", "s2")
	m.Site.Spec.Networks[0].Pool = &api.AddressPool{Start: "10.5.0.100", End: "10.5.0.101"}
	m.Hosts[2].Spec.Interfaces[1] = api.Interface{Name: "eth2", Networks: []string{"stor"}, Addresses: []string{"10.5.0.101/24"}}
	m.Hosts[2].Metadata.Labels = map[string]string{"rack": "r9"}
	if err := l.apply(CmdApplyManifest, ApplyManifest{Manifest: m}); err == nil {
		t.Fatal("an overfull pool was accepted")
	}
	after := l.view()
	if c := Changes(View{before}, after); len(c) != 1 || c[0] != "no changes" || len(after.Events(0)) != len(View{before}.Events(0)) {
		t.Fatalf("a refused apply changed the state: %q", c)
	}
}
