package state

import (
	"fmt"
	"testing"

	"github.com/plinth-dev/plinth/internal/sitetest"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// A Kubernetes site converging step by step — dependencies releasing their
// dependents, a failure, a retry, drift and its repair — keeps every host's step
// tally and the state counts equal to counting the records again (checkWatch does
// after every command), and its conditions follow: Degraded on the failure,
// Drifted until the repair.
func TestTalliesFollowASiteConverging(t *testing.T) {
	m, err := api.Decode("site.yaml", []byte(sitetest.Kube("ctl-0", "w-1", "w-2")))
	if err != nil {
		t.Fatal(err)
	}
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: *m})
	hosts := []string{"ctl-0", "w-1", "w-2"}
	for _, h := range hosts {
		enrolled(l, h)
	}
	failedOnce := false
	for round := 0; ; round++ {
		if round > 100 {
			t.Fatalf("no convergence: %v", l.view().StepCounts())
		}
		var ready []plan.Record
		for _, r := range l.view().Steps("") {
			if r.State == plan.Ready || r.State == plan.Running || r.State == plan.Failed {
				ready = append(ready, r)
			}
		}
		if len(ready) == 0 {
			break
		}
		run := fmt.Sprintf("run-%d", round)
		for _, r := range ready {
			if r.State == plan.Failed {
				l.must(CmdStepRetry, StepRetry{ID: r.ID})
				continue
			}
			l.must(CmdStepStart, StepStart{ID: r.ID, Host: r.Host, InputsHash: r.InputsHash, RunID: run})
			res := driver.Result{Changes: []string{"done"}}
			if !failedOnce && r.Host == "w-1" {
				failedOnce = true
				res = driver.Result{Error: "boom", Retryable: true}
				l.must(CmdStepResult, StepResult{ID: r.ID, Host: r.Host, InputsHash: r.InputsHash, RunID: run, Result: res})
				h, _ := l.view().Host("w-1")
				if c := plan.Find(h.Host.Status.Conditions, api.ConditionDegraded); c == nil || c.Reason != "StepFailing" {
					t.Fatalf("w-1 Degraded after a failure: %+v", c)
				}
				continue
			}
			l.must(CmdStepResult, StepResult{ID: r.ID, Host: r.Host, InputsHash: r.InputsHash, RunID: run, Result: res})
		}
	}
	counts := l.view().StepCounts()
	if len(counts) != 1 || counts[plan.Succeeded] == 0 {
		for _, r := range l.view().Steps("") {
			if r.State != plan.Succeeded {
				t.Logf("%s %s held=%q deps=%v", r.ID, r.State, r.Held, r.Deps)
			}
		}
		t.Fatalf("step counts once converged: %v", counts)
	}
	ctl := l.view().Steps("ctl-0")
	if len(ctl) < len(hosts)+1 {
		t.Fatalf("ctl-0 holds %d steps; want one per node and its own", len(ctl))
	}
	// Drift on the controller, then its repair.
	r := ctl[len(ctl)-1]
	l.must(CmdStepDrift, StepDrift{ID: r.ID, Host: r.Host, InputsHash: r.InputsHash, Changes: []string{"label gone"}})
	drift := func(want string) {
		t.Helper()
		h, _ := l.view().Host("ctl-0")
		if c := plan.Find(h.Host.Status.Conditions, api.ConditionDrifted); c == nil || c.Status != want {
			t.Fatalf("ctl-0 Drifted: %+v; want %s", c, want)
		}
	}
	drift(api.ConditionTrue)
	r, _ = l.view().Step(r.ID)
	if r.State != plan.Ready {
		t.Fatalf("drifted %s is %s; want Ready to repair it", r.ID, r.State)
	}
	l.must(CmdStepStart, StepStart{ID: r.ID, Host: r.Host, InputsHash: r.InputsHash, RunID: "repair"})
	l.must(CmdStepResult, StepResult{ID: r.ID, Host: r.Host, InputsHash: r.InputsHash, RunID: "repair", Result: driver.Result{Changes: []string{"label"}}})
	drift(api.ConditionFalse)
	if !failedOnce {
		t.Fatal("the walk failed no step")
	}
	// A decoded snapshot counts the same.
	data, err := l.s.Export()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	l.s.mu.RLock()
	defer l.s.mu.RUnlock()
	for n, tl := range l.s.t.tallies {
		if d := dec.tallies[n]; d == nil || !d.Equal(tl) {
			t.Fatalf("host %s: decoded tally differs", n)
		}
	}
}
