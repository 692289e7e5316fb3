package driver

import (
	"context"
	"encoding/json"
	"fmt"
)

// Executor runs steps for the agent. The long-running agent holds one without
// linking any driver: pkg/driverexec runs them in drivers processes (plinth-drivers,
// plinth-drivers-ceph), so the agent's memory does not pay for Kubernetes,
// containerd, OVS and Ceph code while the host is idle. A Registry is the in-process
// Executor (tests, the scale harness, and each drivers process itself).
type Executor interface {
	// Kinds lists the step kinds this executor runs, sorted.
	Kinds() []string
	// Run drives one step through observe → diff → apply → verify. A failure of any
	// kind (no driver, a panic, a crashed process) is in the Result, never a panic.
	Run(ctx context.Context, kind string, inputs json.RawMessage) Result
	// Check observes and diffs each probe without applying: one Finding per probe, in
	// order. An error means no finding can be trusted (cancelled, process failed).
	Check(ctx context.Context, probes []Probe) ([]Finding, error)
}

// Probe is one finished step to re-observe for drift.
type Probe struct {
	Kind   string          `json:"kind"`
	Inputs json.RawMessage `json:"inputs"`
}

// Finding is what re-observing one Probe found: the drifted changes, or why the
// host could not be observed.
type Finding struct {
	Changes []string `json:"changes,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// NoDriver is the error of a step whose kind no driver here runs (one wording for
// every Executor).
func NoDriver(kind string) string { return fmt.Sprintf("no driver for kind %s on this agent", kind) }

// Run is the in-process Executor's Run: the kind's driver through Run, with a
// missing driver or a driver panic turned into a failed result.
func (r *Registry) Run(ctx context.Context, kind string, inputs json.RawMessage) (res Result) {
	d, ok := r.Get(kind)
	if !ok {
		return Result{Error: NoDriver(kind)}
	}
	defer func() {
		if p := recover(); p != nil {
			res = Result{Error: fmt.Sprintf("%s: driver panicked: %v", kind, p)}
		}
	}()
	return Run(ctx, d, inputs)
}

// Check is the in-process Executor's Check. It stops at a cancelled ctx.
func (r *Registry) Check(ctx context.Context, probes []Probe) ([]Finding, error) {
	out := make([]Finding, len(probes))
	for i, p := range probes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = r.check(ctx, p)
	}
	return out, nil
}

func (r *Registry) check(ctx context.Context, p Probe) (f Finding) {
	d, ok := r.Get(p.Kind)
	if !ok {
		return Finding{Error: NoDriver(p.Kind)}
	}
	defer func() {
		if v := recover(); v != nil {
			f = Finding{Error: fmt.Sprintf("%s: driver panicked: %v", p.Kind, v)}
		}
	}()
	changes, err := Check(ctx, d, p.Inputs)
	if err != nil {
		return Finding{Error: err.Error()}
	}
	return Finding{Changes: changes}
}
