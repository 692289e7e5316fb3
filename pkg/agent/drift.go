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
// start-up, a run or a new hash — an empty list then clears stale drift), otherwise
// only when the findings changed.
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

// driftLoop re-observes finished steps every drift interval and reports drift. The
// interval is re-read every second, so a policy applied after start-up takes effect
// without waiting out the old interval.
func (a *agent) driftLoop(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.ready:
	}
	last := time.Now()
	for sleep(ctx, time.Second) {
		if time.Since(last) < a.driftInterval() {
			continue
		}
		if a.checkDrift(ctx) {
			last = time.Now()
		}
	}
	return nil
}

// errStepsRunning says a drift check gave way to running steps.
var errStepsRunning = errors.New("steps are running")

// checkDrift checks every finished step once. It gives way to running steps (false:
// try again in a second): a waiting check would hold every new run back behind a
// long one, and a host half way through a step is not drift.
func (a *agent) checkDrift(ctx context.Context) bool {
	snap, ok := a.snapshot()
	if !ok {
		return true
	}
	for _, st := range snap.Steps {
		if ctx.Err() != nil {
			return true
		}
		if !driftCheckable(st) {
			continue
		}
		d, ok := a.cfg.Registry.Get(st.Kind)
		if !ok {
			continue
		}
		log := a.log.With("step", st.ID, "kind", st.Kind, "inputsHash", st.InputsHash)
		changes, err := a.check(ctx, d, st)
		if errors.Is(err, errStepsRunning) {
			return false
		}
		if err != nil {
			log.Warn("drift check failed", "err", err)
			continue
		}
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

// check is driver.Check under the driver lock, with a panic turned into an error.
func (a *agent) check(ctx context.Context, d driver.Driver, st wire.AgentStep) (changes []string, err error) {
	if !a.execMu.TryLock() {
		return nil, errStepsRunning
	}
	defer a.execMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: driver panicked: %v", st.Kind, r)
		}
	}()
	return driver.Check(ctx, d, st.Inputs)
}
