package coordinator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// An agent that holds its answer at index N and asks for a delta gets only the steps
// that changed after N, the rest by name; without the parameter, or from an index
// the coordinator has not applied, it gets everything. Every coordinator answers alike.
func TestAgentStepsDelta(t *testing.T) {
	c := newCluster(t)
	a := c.enrol("node-1")
	site := `apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: node-1}
spec:
  roles: [worker]
  managementAddress: 127.0.0.1
  sysctls: {net.ipv4.ip_forward: "1"}
  hugepages: [{size: 2Mi, count: 1}]
`
	c.apply(site)
	get := func(i int, index uint64, delta bool) (wire.AgentSteps, uint64) {
		t.Helper()
		path := client.Blocking(wire.PathAgentSteps, index, 300*time.Millisecond)
		if delta {
			path += "&" + wire.QueryDelta + "=1"
		}
		var out wire.AgentSteps
		idx, err := a.clients[i].Do(c.ctx, "GET", path, nil, &out)
		if err != nil {
			t.Fatal(err)
		}
		return out, idx
	}
	ids := func(sts []wire.AgentStep) []string {
		var out []string
		for _, st := range sts {
			out = append(out, st.ID)
		}
		return out
	}
	var full wire.AgentSteps
	var at uint64
	for i := range c.apis {
		var last uint64
		deadline := time.Now().Add(20 * time.Second)
		for {
			full, at = get(i, 0, false)
			if len(full.Steps) >= 2 && at == last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("coordinator %d: steps %v", i, ids(full.Steps))
			}
			last = at
			time.Sleep(200 * time.Millisecond)
		}
	}
	all := ids(full.Steps)

	for i := range c.apis {
		d, idx := get(i, at, true)
		if d.Since != at || len(d.Steps) != 0 || !slices.Equal(d.Unchanged, all) || idx != at {
			t.Fatalf("coordinator %d, nothing changed: since %d, steps %v, unchanged %v, index %d (want since %d, unchanged %v)", i, d.Since, ids(d.Steps), d.Unchanged, idx, at, all)
		}
		if d, _ := get(i, at, false); d.Since != 0 || len(d.Steps) != len(all) {
			t.Fatalf("coordinator %d, no delta asked: %+v", i, d)
		}
		if d, _ := get(i, at+1_000_000, true); d.Since != 0 || len(d.Steps) != len(all) {
			t.Fatalf("coordinator %d, delta from an index not applied: since %d, %d steps", i, d.Since, len(d.Steps))
		}
	}

	moved := all[0]
	if _, err := a.clients[0].Do(c.ctx, "POST", wire.PathAgentStart, wire.StepReport{ID: moved, InputsHash: full.Steps[0].InputsHash, RunID: "r1"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range c.apis {
		var d wire.AgentSteps
		deadline := time.Now().Add(10 * time.Second)
		for d, _ = get(i, at, true); len(d.Steps) == 0; d, _ = get(i, at, true) {
			if time.Now().After(deadline) {
				t.Fatalf("coordinator %d: the start of %s never showed", i, moved)
			}
		}
		if d.Since != at || fmt.Sprint(ids(d.Steps)) != fmt.Sprint([]string{moved}) || !slices.Equal(d.Unchanged, all[1:]) {
			t.Fatalf("coordinator %d after one start: since %d, steps %v, unchanged %v", i, d.Since, ids(d.Steps), d.Unchanged)
		}
		if d.Steps[0].State != "Running" || len(d.Steps[0].Inputs) == 0 {
			t.Fatalf("coordinator %d: changed step sent as %+v", i, d.Steps[0])
		}
	}
}
