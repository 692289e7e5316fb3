package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
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

// blockingChecks is an Executor whose drift checks last until cancelled; its runs
// return at once.
type blockingChecks struct{ checking chan struct{} }

func (blockingChecks) Kinds() []string { return []string{"test.kind"} }

func (blockingChecks) Run(context.Context, string, json.RawMessage) driver.Result {
	return driver.Result{Changes: []string{"ran"}}
}

func (b blockingChecks) Check(ctx context.Context, _ []driver.Probe) ([]driver.Finding, error) {
	close(b.checking)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A step that wants to run cuts a drift check short instead of waiting behind it
// (the check gives way: errStepsRunning, tried again a second later).
func TestStepCancelsDriftCheck(t *testing.T) {
	x := blockingChecks{checking: make(chan struct{})}
	a := &agent{cfg: Config{Drivers: x}}
	checked := make(chan error, 1)
	go func() {
		_, err := a.check(context.Background(), []driver.Probe{{Kind: "test.kind"}})
		checked <- err
	}()
	<-x.checking
	ran := make(chan driver.Result, 1)
	go func() { ran <- a.execute(context.Background(), wire.AgentStep{Kind: "test.kind"}) }()
	select {
	case err := <-checked:
		if !errors.Is(err, errStepsRunning) {
			t.Fatalf("check: %v, want errStepsRunning", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the drift check was not cancelled by the step")
	}
	select {
	case res := <-ran:
		if !res.OK() || len(res.Changes) != 1 {
			t.Fatalf("step: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the step waited behind the check")
	}
	// With a step running, a check does not start.
	a.execMu.RLock()
	if _, err := a.check(context.Background(), nil); !errors.Is(err, errStepsRunning) {
		t.Fatalf("check beside a running step: %v", err)
	}
	a.execMu.RUnlock()
}

// countingChecks is an Executor whose drift checks are counted and fail (so a
// pass posts nothing).
type countingChecks struct{ checks chan struct{} }

func (countingChecks) Kinds() []string { return []string{"test.kind"} }

func (countingChecks) Run(context.Context, string, json.RawMessage) driver.Result {
	return driver.Result{}
}

func (c countingChecks) Check(context.Context, []driver.Probe) ([]driver.Finding, error) {
	c.checks <- struct{}{}
	return nil, errors.New("counted")
}

// The drift loop sleeps out the interval the coordinators asked for, and a shorter
// one asked for later takes effect at once, not after the old one.
func TestDriftIntervalChangeTakesEffect(t *testing.T) {
	x := countingChecks{checks: make(chan struct{}, 16)}
	a := &agent{cfg: Config{Drivers: x}, log: slog.New(slog.DiscardHandler), ready: make(chan struct{}), intervalChanged: make(chan struct{}, 1)}
	steps := []wire.AgentStep{{ID: "h/test.kind", Kind: "test.kind", State: plan.Succeeded, InputsHash: "a", AppliedHash: "a"}}
	a.setSnapshot(wire.AgentSteps{Host: "h", Steps: steps, DriftCheckSeconds: 3600})
	close(a.ready)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.driftLoop(ctx) }()
	select {
	case <-x.checks:
		t.Fatal("a pass before the hour was out")
	case <-time.After(300 * time.Millisecond):
	}
	a.setSnapshot(wire.AgentSteps{Host: "h", Steps: steps, DriftCheckSeconds: 1})
	select {
	case <-x.checks:
	case <-time.After(3 * time.Second):
		t.Fatal("no pass after the interval became a second")
	}
	select {
	case <-x.checks:
	case <-time.After(3 * time.Second):
		t.Fatal("no second pass a second later")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("driftLoop: %v", err)
	}
}
