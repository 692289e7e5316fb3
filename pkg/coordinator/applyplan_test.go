package coordinator_test

import (
	"slices"
	"strings"
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
