package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// Policy is the site's retry and drift policy, with defaults applied.
type Policy struct {
	MaxAttempts int
	RetryBase   time.Duration
	RetryMax    time.Duration
	RepairDrift bool
}

// PolicyFrom converts the manifest's policy, its zero fields at api's defaults.
func PolicyFrom(p api.Policy) Policy {
	p = p.Effective()
	return Policy{
		MaxAttempts: p.MaxAttempts,
		RetryBase:   time.Duration(p.RetryBaseSeconds) * time.Second,
		RetryMax:    time.Duration(p.RetryMaxSeconds) * time.Second,
		RepairDrift: p.Drift != api.DriftReport,
	}
}

// Backoff is the wait before retry number attempts (1-based): base·2^(n-1), capped.
func (p Policy) Backoff(attempts int) time.Duration {
	d := p.RetryBase
	for i := 1; i < attempts && d < p.RetryMax; i++ {
		d *= 2
	}
	return min(d, p.RetryMax)
}

// CheckDAG reports a dependency on an unknown step or a cycle.
func CheckDAG(steps []Step) error {
	byID := make(map[string]Step, len(steps))
	for _, s := range steps {
		if _, dup := byID[s.ID]; dup {
			return fmt.Errorf("plan: step %s rendered twice", s.ID)
		}
		byID[s.ID] = s
	}
	const (
		visiting = 1
		done     = 2
	)
	mark := map[string]int{}
	var visit func(id string, path []string) error
	visit = func(id string, path []string) error {
		switch mark[id] {
		case visiting:
			return fmt.Errorf("plan: dependency cycle: %v", append(path, id))
		case done:
			return nil
		}
		mark[id] = visiting
		for _, d := range byID[id].Deps {
			if _, ok := byID[d]; !ok {
				return fmt.Errorf("plan: step %s depends on unknown step %s", id, d)
			}
			if err := visit(d, append(path, id)); err != nil {
				return err
			}
		}
		mark[id] = done
		return nil
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := visit(id, nil); err != nil {
			return err
		}
	}
	return nil
}

// Reconcile merges freshly rendered steps with the recorded ones: new steps start
// Pending, steps whose inputs changed start over, steps no longer desired are dropped,
// and dependency gating moves steps between Pending and Ready. It returns the new
// records and the sorted IDs whose record changed (including removed ones).
func Reconcile(desired []Step, prev map[string]Record) (map[string]Record, []string) {
	next := make(map[string]Record, len(desired))
	for _, d := range desired {
		r, ok := prev[d.ID]
		switch {
		case !ok:
			r = Record{Step: d, State: Pending}
		case r.InputsHash != d.InputsHash || r.Kind != d.Kind:
			r.Step = d
			r.State = Pending
			r.Attempts = 0
			r.RetryAt = time.Time{}
			r.Drift = nil
		default:
			r.Step = d
		}
		next[d.ID] = r
	}
	gate(next)
	var changed []string
	for id, r := range next {
		if old, ok := prev[id]; !ok || !sameRecord(old, r) {
			changed = append(changed, id)
		}
	}
	for id := range prev {
		if _, ok := next[id]; !ok {
			changed = append(changed, id)
		}
	}
	sort.Strings(changed)
	return next, changed
}

// gate moves Pending steps whose dependencies all succeeded to Ready, and Ready
// steps with an unfinished dependency back to Pending. A held step (see Hold) is not
// handed out: it stays Pending, and a Ready or Failed one goes back to Pending.
func gate(recs map[string]Record) {
	for id, r := range recs {
		if g, moved := gated(recs, r); moved {
			recs[id] = g
		}
	}
}

// gated is r after the gating rule: Ready once its dependencies succeeded and it is
// not held, back to Pending otherwise; a held Failed step waits as Pending.
func gated(recs map[string]Record, r Record) (Record, bool) {
	return gatedBy(r, depsDone(recs, r))
}

// gatedBy is gated with whether r's dependencies all succeeded already known.
func gatedBy(r Record, depsOK bool) (Record, bool) {
	ok := depsOK && r.Held == ""
	switch {
	case r.State == Pending && ok:
		r.State = Ready
	case r.State == Ready && !ok:
		r.State = Pending
	case r.State == Failed && r.Held != "":
		r.State = Pending
		r.RetryAt = time.Time{}
	default:
		return r, false
	}
	return r, true
}

func depsDone(recs map[string]Record, r Record) bool {
	for _, d := range r.Deps {
		if dep, ok := recs[d]; !ok || dep.State != Succeeded {
			return false
		}
	}
	return true
}

// Regate re-evaluates dependency gating after one step changed state and returns the
// IDs of the other records that moved.
func Regate(recs map[string]Record) []string {
	before := make(map[string]State, len(recs))
	for id, r := range recs {
		before[id] = r.State
	}
	gate(recs)
	var moved []string
	for id, r := range recs {
		if before[id] != r.State {
			moved = append(moved, id)
		}
	}
	sort.Strings(moved)
	return moved
}

// RegateSome is Regate for records known to be the only ones that can move: the
// dependents of the one record that changed state (and that record), when every
// other record was gated already. It returns those that move, as they become, in
// ID order, and leaves recs as it was: the caller writes them. Whether a record's
// dependencies all succeeded is read from unmet (see Unmet), not looked up one by
// one: a step that waits on every node of the site (the first controller's health
// check) is regated after each node's steps.
func RegateSome(recs map[string]Record, ids []string, unmet map[string]int) []Record {
	var moved []Record
	for _, id := range ids {
		if r, ok := recs[id]; ok {
			if g, changed := gatedBy(r, unmet[id] == 0); changed {
				moved = append(moved, g)
			}
		}
	}
	slices.SortFunc(moved, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(moved, func(a, b Record) bool { return a.ID == b.ID })
}

// Unmet counts, for each step with any, its dependencies that have not succeeded
// (or do not exist). A caller that keeps it moves a step's dependents' counts as
// the step enters or leaves Succeeded.
func Unmet(recs map[string]Record) map[string]int {
	out := map[string]int{}
	for id, r := range recs {
		for _, d := range r.Deps {
			if dep, ok := recs[d]; !ok || dep.State != Succeeded {
				out[id]++
			}
		}
	}
	return out
}

// Dependents maps each step ID to the IDs of the records that depend on it.
func Dependents(recs map[string]Record) map[string][]string {
	out := map[string][]string{}
	for id, r := range recs {
		for _, d := range r.Deps {
			out[d] = append(out[d], id)
		}
	}
	return out
}

// Hold keeps every step of the hosts in held (host -> why) from being handed out,
// and releases the steps of every other host: held steps stay or go back to Pending
// (a Running one finishes its run), released ones are gated again. It returns the
// sorted IDs of the records whose hold or state changed.
func Hold(recs map[string]Record, held map[string]string) []string {
	before := make(map[string]Record, len(recs))
	for id, r := range recs {
		before[id] = r
		if why := held[r.Host]; why != r.Held {
			r.Held = why
			recs[id] = r
		}
	}
	gate(recs)
	var moved []string
	for id, r := range recs {
		if b := before[id]; b.State != r.State || b.Held != r.Held {
			moved = append(moved, id)
		}
	}
	sort.Strings(moved)
	return moved
}

func sameRecord(a, b Record) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Kind == b.Kind && a.InputsHash == b.InputsHash && a.Held == b.Held &&
		slices.Equal(a.Deps, b.Deps) && a.State == b.State && a.Attempts == b.Attempts &&
		a.RetryAt.Equal(b.RetryAt) && slices.Equal(a.Drift, b.Drift)
}

// StaleError says a report was for inputs or a state the step no longer has.
type StaleError struct{ Msg string }

func (e *StaleError) Error() string { return e.Msg }

func stale(format string, args ...any) error { return &StaleError{fmt.Sprintf(format, args...)} }

// Start records that the agent began run runID of the step ("" for agents that do
// not name their runs).
func Start(r Record, inputsHash, runID string, now time.Time) (Record, error) {
	if inputsHash != r.InputsHash {
		return r, stale("step %s: started with inputs %s, current inputs are %s", r.ID, inputsHash, r.InputsHash)
	}
	if !r.Runnable(now) && r.State != Running {
		return r, stale("step %s: cannot start in state %s", r.ID, r.State)
	}
	r.State = Running
	r.StartedAt = now
	r.RunID = runID
	return r, nil
}

// Finish records the result of run runID: success, a retry after backoff, or Blocked
// once retries are exhausted or cannot help. The result of a run already recorded is
// a no-op; a result for a run other than the current one is stale.
func Finish(r Record, inputsHash, runID string, res driver.Result, now time.Time, p Policy) (Record, error) {
	if runID != "" && runID == r.FinishedRunID {
		return r, nil // delivered twice: counted once
	}
	if runID != "" && r.RunID != "" && runID != r.RunID {
		return r, stale("step %s: result of run %s, but run %s started since", r.ID, runID, r.RunID)
	}
	if inputsHash != r.InputsHash {
		return r, stale("step %s: result for inputs %s, current inputs are %s", r.ID, inputsHash, r.InputsHash)
	}
	switch r.State {
	case Ready, Running, Failed:
	case Succeeded:
		if res.OK() {
			return r, nil // a repeated report of the same success
		}
		return r, stale("step %s: failure reported for a step that already succeeded", r.ID)
	default:
		return r, stale("step %s: result arrived in state %s", r.ID, r.State)
	}
	res2 := res
	r.LastResult = &res2
	r.FinishedAt = now
	r.FinishedRunID = runID
	if res.OK() {
		r.State = Succeeded
		r.AppliedHash = inputsHash
		r.Attempts = 0
		r.RetryAt = time.Time{}
		r.Drift = nil
		return r, nil
	}
	r.Attempts++
	if !res.Retryable || r.Attempts >= p.MaxAttempts {
		r.State = Blocked
		r.RetryAt = time.Time{}
		return r, nil
	}
	r.State = Failed
	r.RetryAt = now.Add(p.Backoff(r.Attempts))
	return r, nil
}

// Ran records run runID that the agent never reported started, because it finished
// within the agent's start grace: Start and Finish in one change, so a quick step
// costs one write, not two. It began took before now. The run never takes over
// another's claim: a step Running under another run makes it stale, as it would
// make that run's start. The result of a run already recorded is a no-op.
func Ran(r Record, inputsHash, runID string, res driver.Result, took time.Duration, now time.Time, p Policy) (Record, error) {
	if runID != "" && runID == r.FinishedRunID {
		return r, nil // delivered twice: counted once
	}
	if r.State == Running && r.RunID != runID {
		return r, stale("step %s: result of run %s, but run %s is running", r.ID, runID, r.RunID)
	}
	r, err := Start(r, inputsHash, runID, now)
	if err != nil {
		return r, err
	}
	r.StartedAt = now.Add(-max(took, 0))
	return Finish(r, inputsHash, runID, res, now, p)
}

// Drift records what an agent's periodic check found. An empty list clears drift.
// With the repair policy a drifted step goes back to Ready.
func Drift(r Record, inputsHash string, changes []string, p Policy) (Record, error) {
	if r.State != Succeeded || inputsHash != r.AppliedHash {
		return r, stale("step %s: drift report for inputs %s in state %s", r.ID, inputsHash, r.State)
	}
	if len(changes) == 0 {
		r.Drift = nil
		return r, nil
	}
	r.Drift = slices.Clone(changes)
	if p.RepairDrift {
		r.State = Ready
	}
	return r, nil
}

// Retry puts a Failed or Blocked step back in line with a fresh attempt budget.
func Retry(r Record) (Record, error) {
	if r.State != Failed && r.State != Blocked {
		return r, fmt.Errorf("step %s is %s: only Failed or Blocked steps can be retried", r.ID, r.State)
	}
	r.State = Pending
	r.Attempts = 0
	r.RetryAt = time.Time{}
	return r, nil
}
