package agent

import (
	"testing"

	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func TestDriftCheckable(t *testing.T) {
	for _, tc := range []struct {
		st   wire.AgentStep
		want bool
	}{
		{wire.AgentStep{State: plan.Succeeded, InputsHash: "a", AppliedHash: "a"}, true},
		{wire.AgentStep{State: plan.Succeeded, InputsHash: "b", AppliedHash: "a"}, false}, // new inputs pending
		{wire.AgentStep{State: plan.Succeeded, InputsHash: "", AppliedHash: ""}, false},
		{wire.AgentStep{State: plan.Running, InputsHash: "a", AppliedHash: "a"}, false},
		{wire.AgentStep{State: plan.Failed, InputsHash: "a", AppliedHash: "a"}, false},
	} {
		if got := driftCheckable(tc.st); got != tc.want {
			t.Errorf("driftCheckable(%+v) = %v", tc.st, got)
		}
	}
}

// TestDriftReportDecision walks one step through the cases: what the agent posts
// and what it keeps quiet about.
func TestDriftReportDecision(t *testing.T) {
	m := newDriftMemo()
	const id = "h/host.network"
	mtu := []string{"mtu eth1: 9000 -> 1500"}
	both := []string{"mtu eth1: 9000 -> 1500", "addr 10.0.1.5/24 on eth1: missing"}
	steps := []struct {
		name    string
		hash    string
		changes []string
		post    bool
	}{
		{"unknown after start-up: post even nothing, clearing stale drift", "h1", nil, true},
		{"still nothing", "h1", nil, false},
		{"drift appears", "h1", mtu, true},
		{"same drift again", "h1", mtu, false},
		{"drift grows", "h1", both, true},
		{"drift fixed: clear it", "h1", nil, true},
		{"quiet again", "h1", nil, false},
		{"new applied inputs: unknown again", "h2", nil, true},
	}
	for _, s := range steps {
		got := m.shouldReport(id, s.hash, s.changes)
		if got != s.post {
			t.Fatalf("%s: shouldReport = %v, want %v", s.name, got, s.post)
		}
		if got {
			m.record(id, s.hash, s.changes)
		}
	}
	// Running the step clears drift on the coordinator: the next finding is news.
	m.record(id, "h2", mtu)
	m.forget(id)
	if !m.shouldReport(id, "h2", mtu) {
		t.Fatal("after forget, the same drift must be posted again")
	}
	// The memo keeps its own copy.
	m.record(id, "h2", mtu)
	mtu[0] = "changed"
	if m.shouldReport(id, "h2", []string{"mtu eth1: 9000 -> 1500"}) {
		t.Fatal("memo aliased the caller's slice")
	}
}
