package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// driftCheckable reports whether a step is finished with its current inputs, so
// re-observing it can find drift.
func driftCheckable(st wire.AgentStep) bool {
	return st.State == plan.Succeeded && st.AppliedHash != "" && st.AppliedHash == st.InputsHash
}

// driftMemo remembers what was last reported per step, so an unchanged finding is
// not posted every interval (each post is a Raft write and may add an event).
type driftMemo struct {
	mu   sync.Mutex
	last map[string]driftReport
}

type driftReport struct {
	hash    string
	changes []string
}

func newDriftMemo() *driftMemo { return &driftMemo{last: map[string]driftReport{}} }

// shouldReport decides whether a check's findings must be posted: always when the
// agent does not know what the coordinator holds for this step and inputs (after a
// start-up or a new hash — an empty list then clears stale drift), otherwise only
// when the findings changed. A run this agent reported as succeeded is known: the
// coordinator cleared the step's drift (record with no changes).
func (m *driftMemo) shouldReport(id, hash string, changes []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[id]
	return !ok || last.hash != hash || !slices.Equal(last.changes, changes)
}

func (m *driftMemo) record(id, hash string, changes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last[id] = driftReport{hash: hash, changes: slices.Clone(changes)}
}

// forget drops what is known about id: running a step clears its drift on the
// coordinator.
func (m *driftMemo) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, id)
}

// driftInterval is the check period the coordinators asked for.
func (a *agent) driftInterval() time.Duration {
	sec := api.DefaultDriftCheckSeconds // until the coordinators say
	if s, ok := a.snapshot(); ok && s.DriftCheckSeconds > 0 {
		sec = s.DriftCheckSeconds
	}
	return time.Duration(sec) * time.Second
}

// driftLoop re-observes finished steps every drift interval and reports drift. It
// sleeps until the next pass is due, and wakes when the coordinators ask for another
// interval, so a policy applied after start-up takes effect without waiting out the
// old one (an idle agent's timer wakes it once a pass, not once a second).
func (a *agent) driftLoop(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.ready:
	}
	last := time.Now()
	for {
		if wait := time.Until(last.Add(a.driftInterval())); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-a.intervalChanged:
				t.Stop()
				continue
			case <-t.C:
			}
		}
		if a.checkDrift(ctx) {
			last = time.Now()
		} else if !sleep(ctx, time.Second) {
			return nil
		}
	}
}

// errStepsRunning says a drift check gave way to running steps.
var errStepsRunning = errors.New("steps are running")

// checkDrift re-observes every finished step in one check (one process per drivers
// program for all of them). It gives way to steps (false: try again in a second):
// it does not start while one runs, and one that wants to start cancels it — a
// waiting check would hold new runs back, and a host half way through a step is
// not drift.
func (a *agent) checkDrift(ctx context.Context) bool {
	snap, ok := a.snapshot()
	if !ok {
		return true
	}
	kinds := a.cfg.Drivers.Kinds()
	var steps []wire.AgentStep
	var probes []driver.Probe
	for _, st := range snap.Steps {
		if driftCheckable(st) && slices.Contains(kinds, st.Kind) {
			steps = append(steps, st)
			probes = append(probes, driver.Probe{Kind: st.Kind, Inputs: st.Inputs})
		}
	}
	if len(probes) == 0 {
		return true
	}
	findings, err := a.check(ctx, probes)
	switch {
	case errors.Is(err, errStepsRunning) || ctx.Err() != nil:
		return false
	case err != nil:
		a.log.Warn("drift check failed", "steps", len(probes), "err", err)
		return true
	}
	for i, st := range steps {
		if ctx.Err() != nil {
			return true
		}
		log := a.log.With("step", st.ID, "kind", st.Kind, "inputsHash", st.InputsHash)
		if findings[i].Error != "" {
			log.Warn("drift check failed", "err", findings[i].Error)
			continue
		}
		changes := findings[i].Changes
		if !a.drift.shouldReport(st.ID, st.AppliedHash, changes) {
			continue
		}
		rep := wire.StepReport{ID: st.ID, InputsHash: st.AppliedHash, Changes: changes}
		_, err = a.do(ctx, "POST", wire.PathAgentDrift, rep, nil)
		switch {
		case err == nil:
			a.drift.record(st.ID, st.AppliedHash, changes)
			if len(changes) > 0 {
				log.Warn("drift reported", "changes", len(changes))
			}
		case client.StatusOf(err) == http.StatusConflict:
			a.drift.forget(st.ID) // the step moved on; the next snapshot tells how
		case ctx.Err() == nil:
			log.Warn("could not report drift; trying again next interval", "err", err)
		}
	}
	return true
}

// check runs the drivers' Check holding the driver lock alone; a step that starts
// meanwhile cancels it (errStepsRunning).
func (a *agent) check(ctx context.Context, probes []driver.Probe) ([]driver.Finding, error) {
	if !a.execMu.TryLock() {
		return nil, errStepsRunning
	}
	defer a.execMu.Unlock()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.checkMu.Lock()
	a.stopCheck = func() { cancel(errStepsRunning) }
	a.checkMu.Unlock()
	defer func() {
		a.checkMu.Lock()
		a.stopCheck = nil
		a.checkMu.Unlock()
	}()
	out, err := a.cfg.Drivers.Check(cctx, probes)
	if cause := context.Cause(cctx); cause != nil && ctx.Err() == nil {
		return nil, cause
	}
	if err == nil && len(out) != len(probes) {
		err = fmt.Errorf("drivers answered %d findings for %d steps", len(out), len(probes))
	}
	return out, err
}

// cancelCheck cuts the drift check in progress short, if any.
func (a *agent) cancelCheck() {
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	if a.stopCheck != nil {
		a.stopCheck()
	}
}
