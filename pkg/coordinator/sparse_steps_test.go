package coordinator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// A delta to an agent that takes sparse ones sends only what changed while the
// host's set of steps stays the same, and the full Unchanged list once a step of
// the host is added; an agent that does not ask gets the list as before.
func TestSparseStepDeltas(t *testing.T) {
	c := newCluster(t)
	ctl, _ := c.enrol("node-1"), c.enrol("node-2")
	c.apply(kubeSite)
	ask := func(index uint64, query string) (wire.AgentSteps, uint64) {
		t.Helper()
		var got wire.AgentSteps
		path := client.Blocking(wire.PathAgentSteps, index, 200*time.Millisecond) + query
		idx, err := ctl.clients[0].Do(c.ctx, "GET", path, nil, &got)
		if err != nil {
			t.Fatal(err)
		}
		return got, idx
	}
	var full wire.AgentSteps
	var at uint64
	var ready wire.AgentStep
	poll.Until(t, 20*time.Second, "a Ready step of node-1", func() error {
		full, at = ask(0, "")
		for _, st := range full.Steps {
			if st.State == plan.Ready && len(st.Inputs) > 0 {
				ready = st
				return nil
			}
		}
		return fmt.Errorf("none of %d steps is Ready", len(full.Steps))
	})
	const sparse = "&" + wire.QueryDelta + "=1&" + wire.QuerySparse + "=1"
	if _, err := ctl.clients[0].Do(c.ctx, "POST", wire.PathAgentStart, wire.StepReport{ID: ready.ID, InputsHash: ready.InputsHash, RunID: "run-1"}, nil); err != nil {
		t.Fatalf("start %s: %v", ready.ID, err)
	}
	var delta wire.AgentSteps
	poll.Until(t, 10*time.Second, "the start is in the answer", func() error {
		delta, _ = ask(at, sparse)
		if len(delta.Steps) == 0 {
			return fmt.Errorf("nothing changed after %d", at)
		}
		return nil
	})
	if !delta.Sparse || delta.Since != at || len(delta.Unchanged) != 0 || len(delta.Withheld) != 0 {
		t.Fatalf("not a sparse delta since %d: sparse %v since %d, %d unchanged, withheld %v", at, delta.Sparse, delta.Since, len(delta.Unchanged), delta.Withheld)
	}
	if len(delta.Steps) != 1 || delta.Steps[0].ID != ready.ID || delta.Steps[0].State != plan.Running {
		t.Fatalf("sparse delta sent %+v; want only %s, Running", delta.Steps, ready.ID)
	}
	if old, _ := ask(at, "&"+wire.QueryDelta+"=1"); old.Sparse || len(old.Unchanged) != len(full.Steps)-1 {
		t.Fatalf("a delta not asked to be sparse: sparse %v, %d unchanged of %d", old.Sparse, len(old.Unchanged), len(full.Steps))
	}

	// A third node gives the controller another label step: the set changed.
	c.apply(kubeSite + `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: node-3}
spec:
  roles: [worker]
  managementAddress: 172.20.0.4
  interfaces: [{name: eth1, networks: [cluster-host], allocate: true}]
`)
	full2, at2 := ask(0, "")
	poll.Until(t, 10*time.Second, "node-1 holds another step", func() error {
		full2, at2 = ask(0, "")
		if len(full2.Steps) <= len(full.Steps) {
			return fmt.Errorf("%d steps, as before", len(full2.Steps))
		}
		return nil
	})
	delta, _ = ask(at, sparse)
	if delta.Sparse || delta.Since != at {
		t.Fatalf("a delta across an added step: sparse %v since %d", delta.Sparse, delta.Since)
	}
	var ids []string
	for _, st := range delta.Steps {
		ids = append(ids, st.ID)
	}
	ids = append(ids, delta.Unchanged...)
	slices.Sort(ids)
	var want []string
	for _, st := range full2.Steps {
		want = append(want, st.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("delta names %v; the steps are %v", ids, want)
	}
	if later, _ := ask(at2, sparse); !later.Sparse {
		t.Fatalf("a delta after the added step is not sparse: %+v", later)
	}
}
