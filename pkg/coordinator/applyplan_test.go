package coordinator_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/plinth-dev/plinth/pkg/wire"
)

// An apply answers with what the FSM changed, whichever coordinator took it: a
// follower forwards the write and gets the plan back with the leader's answer.
func TestApplyAnswersWithItsPlan(t *testing.T) {
	c := newCluster(t)
	leader := c.leader()
	follower := 1 - leader // newCluster starts two coordinators
	site := `apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: node-1}
spec:
  roles: [worker]
  managementAddress: 127.0.0.1
  sysctls: {net.ipv4.ip_forward: "1"}
`
	apply := func(i int, yaml string) []string {
		t.Helper()
		var resp wire.ApplyResponse
		if _, err := c.admins[i].Do(c.ctx, "POST", wire.PathApply, wire.ApplyRequest{File: "site.yaml", YAML: yaml}, &resp); err != nil {
			t.Fatalf("apply through %d: %v", i, err)
		}
		if resp.DryRun || resp.Index == 0 {
			t.Fatalf("apply through %d answered %+v", i, resp)
		}
		return resp.Plan
	}
	if plan := apply(follower, site); !slices.Contains(plan, "+ host node-1") {
		t.Fatalf("plan of an apply through a follower: %q", plan)
	}
	changed := strings.Replace(site, `"1"`, `"0"`, 1)
	if plan := apply(leader, changed); len(plan) == 0 || !strings.Contains(strings.Join(plan, "\n"), "node-1/host.sysctl") {
		t.Fatalf("plan of a change through the leader: %q", plan)
	}
	if plan := apply(follower, changed); !slices.Equal(plan, []string{"no changes"}) {
		t.Fatalf("plan of a re-apply: %q", plan)
	}
}

// Applies racing through the leader, each file declaring both hosts with one of
// them changed. However they interleave, every apply succeeds and does what the
// file says on the state it lands on: in commit order, each one's plan changes
// exactly the hosts its file declares differently from the one before, and the
// state ends as the last one declares. An apply that left out a host another apply
// changed meanwhile (state.View.ApplyOf) is refused by the FSM and sent whole.
func TestRacingAppliesEndAsTheLastDeclares(t *testing.T) {
	c := newCluster(t)
	leader := c.leader()
	file := func(seq [2]int) string {
		host := func(name, addr string, seq int) string {
			return fmt.Sprintf("apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: %s, labels: {seq: %q}}\nspec:\n  roles: [worker]\n  managementAddress: %s\n", name, fmt.Sprint(seq), addr)
		}
		return host("node-a", "127.0.0.1", seq[0]) + "---\n" + host("node-b", "127.0.0.2", seq[1])
	}
	apply := func(seq [2]int, dryRun bool) wire.ApplyResponse {
		var resp wire.ApplyResponse
		if _, err := c.admins[leader].Do(c.ctx, "POST", wire.PathApply, wire.ApplyRequest{File: "site.yaml", YAML: file(seq), DryRun: dryRun}, &resp); err != nil {
			t.Errorf("apply %v: %v", seq, err)
		}
		return resp
	}
	type applied struct {
		index uint64
		seq   [2]int
		plan  []string
	}
	done := []applied{{index: apply([2]int{}, false).Index}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 1; i <= 15; i++ {
				var seq [2]int
				seq[w] = i
				resp := apply(seq, false)
				mu.Lock()
				done = append(done, applied{resp.Index, seq, resp.Plan})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(done, func(a, b applied) int { return cmp.Compare(a.index, b.index) })
	for i, a := range done[1:] {
		prev := done[i]
		var want []string
		for h, name := range []string{"node-a", "node-b"} {
			if a.seq[h] != prev.seq[h] {
				want = append(want, name)
			}
		}
		var got []string
		for _, line := range a.plan {
			if name, ok := strings.CutPrefix(line, "~ host "); ok {
				got = append(got, strings.SplitN(name, ":", 2)[0])
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("apply %v at index %d after %v: plan %q, want changes to %v", a.seq, a.index, prev.seq, a.plan, want)
		}
	}
	last := done[len(done)-1]
	if plan := apply(last.seq, true).Plan; !slices.Equal(plan, []string{"no changes"}) {
		t.Fatalf("the last apply %v (index %d) is not what the state declares: its dry run plans %q", last.seq, last.index, plan)
	}
}
