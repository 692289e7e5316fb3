package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/stepkind"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Runnable returns the steps the agent should run at now, deepest first (what most
// of the site waits for), else in the order given: those plan.Record.Runnable accepts
// (Ready, Running — a run cut short by a crash — and Failed once RetryAt has passed).
func Runnable(steps []wire.AgentStep, now time.Time) []wire.AgentStep {
	var out []wire.AgentStep
	for _, s := range steps {
		if (plan.Record{State: s.State, RetryAt: s.RetryAt}).Runnable(now) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b wire.AgentStep) int { return b.Depth - a.Depth })
	return out
}

// nextWait is how long a blocking query may wait: at most limit, and no longer than
// until the earliest future retry of a Failed step, so retries run on time without
// a change on the coordinator to wake the query.
func nextWait(steps []wire.AgentStep, now time.Time, limit time.Duration) time.Duration {
	w := limit
	for _, s := range steps {
		if s.State == plan.Failed && s.RetryAt.After(now) {
			// A little past RetryAt, so the step is due when the answer arrives.
			w = min(w, s.RetryAt.Sub(now)+50*time.Millisecond)
		}
	}
	return w
}

// outcome of one step run, for the loop to decide what to do next.
type outcome int

const (
	ranStep  outcome = iota // ended without a new result recorded (shutdown, already recorded)
	recorded                // the coordinator recorded the result: that write wakes the loop's query
	stale                   // the coordinator's view moved on: refetch soon
	rejected                // the coordinator refused a report: refetch after a pause
)

// stepSlots bounds how many steps one agent runs at once. Runnable steps have their
// dependencies done, so independent ones overlap (a host imports the bundle's images
// while its etcd member starts); steps of one kind still run one at a time unless the
// step kind table says the kind is Concurrent (kube.labels: one per node).
const stepSlots = 3

// concurrentSlots bounds the runs of Concurrent kinds, beside stepSlots: the first
// controller labels every node, and at three at a time a site of a thousand nodes
// waited on it long after the nodes were done. Each run is its own small API call
// (and its own driver process), so eight overlap safely.
const concurrentSlots = 8

// busyWait bounds a blocking query while steps run, a second guard (after the
// query a refused or stale run cuts short) against waiting out a full query for a
// change that never comes.
const busyWait = 2 * time.Second

// stepsQuery is the loop's blocking query in flight: it runs on while the loop
// starts steps, so a run's end never closes its connection mid-request.
type stepsQuery struct {
	cancel context.CancelFunc
	done   chan fetched // one answer, then closed
}

type fetched struct {
	steps wire.AgentSteps
	index uint64
	err   error
	woken bool      // cut short by a run's end, not failed
	asked time.Time // when it was sent: the answer is no older
}

func (a *agent) startFetch(ctx context.Context, index uint64, wait time.Duration) *stepsQuery {
	fctx, cancel := context.WithCancel(ctx)
	q := &stepsQuery{cancel: cancel, done: make(chan fetched, 1)}
	asked := time.Now()
	go func() {
		defer close(q.done)
		steps, idx, err := a.fetchSteps(fctx, index, wait)
		q.done <- fetched{steps: steps, index: idx, err: err, woken: fctx.Err() != nil && ctx.Err() == nil, asked: asked}
	}()
	return q
}

// stepLoop delivers results left over from a previous run, then follows this host's
// steps with blocking queries and runs those that are runnable, up to stepSlots at a
// time, in the order given. Every run and query it starts ends before it returns.
func (a *agent) stepLoop(ctx context.Context) error {
	a.replayPending(ctx)
	var index uint64
	bo := newBackoff(time.Second, 30*time.Second)
	runs := newStepRuns()
	defer runs.wait()
	var q *stepsQuery
	defer func() {
		if q != nil {
			q.cancel()
			<-q.done
		}
	}()
	recheck := false // a runnable step was held back: ask again soon
	var held answer  // which answer a.snap is
	for ctx.Err() == nil {
		snap, have := a.snapshot()
		if q == nil {
			wait := stepsWait
			if have {
				wait = nextWait(snap.Steps, time.Now(), stepsWait)
			}
			if runs.busy() || recheck {
				wait = min(wait, busyWait)
			}
			q = a.startFetch(ctx, index, wait)
			// A run that ends unrecorded (refused, stale) changed nothing that would
			// answer the query, so it cuts the query short for a fresh answer.
			runs.onDone(q.cancel)
		}
		// A run that ended frees a slot or its kind for a step the answer held lists
		// as runnable: look again at once. Its recorded result answers the query
		// in flight, which runs on.
		select {
		case <-ctx.Done():
			return nil
		case <-runs.kicks():
			if !have {
				continue
			}
		case f := <-q.done:
			runs.onDone(nil)
			q = nil
			switch {
			case f.err != nil && ctx.Err() != nil:
				return nil
			case f.err != nil && f.woken && have:
				// look again at the answer we have
			case f.err != nil && f.woken:
				continue
			case f.err != nil:
				a.log.Warn("fetch steps failed; retrying", "err", f.err)
				bo.wait(ctx)
				continue
			default:
				bo.reset()
				idx := f.index
				if idx < index { // the coordinators' state went back (restore): start over
					idx = 0
					runs.forgetRuns()
				}
				index = idx
				a.setSnapshot(f.steps)
				a.markReady()
				snap, held = f.steps, answer{index: f.index, asked: f.asked}
			}
		}
		recheck = false
		if pause := runs.paused(); pause > 0 {
			sleep(ctx, pause)
			continue
		}
		for _, st := range Runnable(snap.Steps, time.Now()) {
			if !runs.start(st, held) {
				recheck = true
				continue
			}
			go func() {
				o, at := a.runStep(ctx, st)
				defer runs.done(st, o, at)
				switch o {
				case rejected:
					runs.pause(30 * time.Second)
				case stale:
					runs.pause(time.Second)
				}
			}()
		}
	}
	return nil
}

// stepRuns tracks the steps an agent is running: at most stepSlots (and
// concurrentSlots of Concurrent kinds), never the same step twice, never two of one
// kind that is not Concurrent (a driver instance serves one run at a time).
type stepRuns struct {
	mu     sync.Mutex
	ids    map[string]bool
	conc   int // runs of Concurrent kinds among ids
	kinds  map[string]int
	ran    map[string]runMark // the last run of each step here
	until  time.Time          // no new runs before this (the coordinator refused a report)
	cut    func()             // called when a run ends unrecorded (cancels the loop's query)
	kick   chan struct{}      // a run ended since the loop last looked
	active sync.WaitGroup
}

// onDone sets what a run that ends unrecorded calls (nil: nothing).
func (r *stepRuns) onDone(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = f
}

// kicks delivers one value after any number of runs ended since it was last taken.
func (r *stepRuns) kicks() <-chan struct{} { return r.kick }

// concurrent reports whether steps of kind may run beside each other (the table says).
func concurrent(kind string) bool {
	k, ok := stepkind.Lookup(kind)
	return ok && k.Concurrent
}

func newStepRuns() *stepRuns {
	return &stepRuns{ids: map[string]bool{}, kinds: map[string]int{}, ran: map[string]runMark{}, kick: make(chan struct{}, 1)}
}

// start claims st for a run, unless it runs already, its kind is busy (and not
// Concurrent), every slot is
// taken, runs are paused, or the answer listing it may predate the end of its last
// run here (it would list the step Ready or Running, not the run's result).
func (r *stepRuns) start(st wire.AgentStep, ans answer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	conc := concurrent(st.Kind)
	full := len(r.ids)-r.conc >= stepSlots || (r.kinds[st.Kind] > 0 && !conc)
	if conc {
		full = r.conc >= concurrentSlots
	}
	if r.ids[st.ID] || full || time.Now().Before(r.until) || r.ran[st.ID].after(ans) {
		return false
	}
	if conc {
		r.conc++
	}
	r.ids[st.ID] = true
	r.kinds[st.Kind]++
	r.active.Add(1)
	return true
}

// forgetRuns drops the run marks: the coordinators' state went back (restore), so
// their indexes say nothing about the answers to come.
func (r *stepRuns) forgetRuns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.ran)
}

// answer says which answer to a steps query a decision is made from.
type answer struct {
	index uint64    // the answer's X-Plinth-Index
	asked time.Time // when its query was sent
}

// runMark is how a step's last run here ended. An answer at the log index of its
// recorded result, or later, shows that result; one below may still list the step
// Ready or Running (a follower that has not applied it yet). A run whose result
// was not recorded, or a coordinator that does not say the index, leaves the
// rule by time: the answer must be asked for after the run ended.
type runMark struct {
	index uint64
	ended time.Time
}

func (m runMark) after(ans answer) bool {
	if m.index > 0 {
		return m.index > ans.index
	}
	return m.ended.After(ans.asked)
}

// done releases st's claim after a run that ended with o (its result recorded at
// log index at, 0 if unknown) and kicks the loop to look again. A run that ended
// unrecorded also cuts the loop's query short: nothing it changed would answer it.
func (r *stepRuns) done(st wire.AgentStep, o outcome, at uint64) {
	r.mu.Lock()
	delete(r.ids, st.ID)
	if concurrent(st.Kind) {
		r.conc--
	}
	if o == recorded && at > 0 {
		r.ran[st.ID] = runMark{index: at}
	} else {
		r.ran[st.ID] = runMark{ended: time.Now()}
	}
	if r.kinds[st.Kind]--; r.kinds[st.Kind] <= 0 {
		delete(r.kinds, st.Kind)
	}
	var cut func()
	if o != recorded {
		cut = r.cut
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	if cut != nil {
		cut()
	}
	r.active.Done()
}

func (r *stepRuns) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids) > 0
}

// pause holds new runs back for d: the rest of the last answer may be out of date.
func (r *stepRuns) pause(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until = later(r.until, time.Now().Add(d))
}

func (r *stepRuns) paused() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Until(r.until)
}

func (r *stepRuns) wait() { r.active.Wait() }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (a *agent) fetchSteps(ctx context.Context, index uint64, wait time.Duration) (wire.AgentSteps, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+15*time.Second)
	defer cancel()
	path := client.Blocking(wire.PathAgentSteps, index, wait)
	prev, have := a.snapshot()
	if index > 0 && have {
		// a.snap is the answer at index (stepLoop sets both together): ask for a delta.
		path += "&" + wire.QueryDelta + "=1&" + wire.QuerySparse + "=1"
	}
	var out wire.AgentSteps
	idx, err := a.client().Do(ctx, "GET", path, nil, &out)
	if err != nil {
		return out, 0, fmt.Errorf("agent: fetch steps: %w", err)
	}
	if out.Host != "" && out.Host != a.name {
		return out, 0, fmt.Errorf("agent: fetch steps: coordinator answered for host %q, not %q", out.Host, a.name)
	}
	if out.Since != 0 {
		if index == 0 {
			return out, 0, fmt.Errorf("agent: fetch steps: a delta answer (since %d) to a query for all steps", out.Since)
		}
		merged, ok := mergeSteps(prev, out, index)
		if !ok {
			a.log.Warn("a delta answer did not fit the steps held; fetching them all")
			return a.fetchSteps(ctx, 0, wait)
		}
		out = merged
	}
	a.gossipKeysChanged(ctx, out.GossipKeysVersion)
	return out, idx, nil
}

// mergeSteps applies a delta answer to prev, the full answer at index: the steps it
// sends, and prev's copy of each it names unchanged, in the coordinators' order (by
// ID). False if the delta is not against index or names a step prev lacks.
func mergeSteps(prev, delta wire.AgentSteps, index uint64) (wire.AgentSteps, bool) {
	if delta.Since != index {
		return wire.AgentSteps{}, false
	}
	if delta.Sparse {
		steps, ok := mergeSparse(prev.Steps, delta.Steps, delta.Withheld)
		if !ok {
			return wire.AgentSteps{}, false
		}
		delta.Steps, delta.Since, delta.Sparse, delta.Withheld = steps, 0, false, nil
		return delta, true
	}
	held := make(map[string]wire.AgentStep, len(prev.Steps))
	for _, st := range prev.Steps {
		held[st.ID] = st
	}
	steps := make([]wire.AgentStep, 0, len(delta.Steps)+len(delta.Unchanged))
	steps = append(steps, delta.Steps...)
	for _, id := range delta.Unchanged {
		st, ok := held[id]
		if !ok {
			return wire.AgentSteps{}, false
		}
		steps = append(steps, st)
	}
	slices.SortFunc(steps, func(a, b wire.AgentStep) int { return strings.Compare(a.ID, b.ID) })
	delta.Steps, delta.Since, delta.Unchanged = steps, 0, nil
	return delta, true
}

// mergeSparse is prev, sorted by ID, with each step of changed in place of or
// beside prev's copy and the withheld ones left out, in one pass: the first
// controller of a large site holds a step per node and most deltas change one.
// False if changed or withheld is out of ID order (the coordinators send both in
// it) or names a step twice.
func mergeSparse(prev, changed []wire.AgentStep, withheld []string) ([]wire.AgentStep, bool) {
	for i := 1; i < len(changed); i++ {
		if changed[i-1].ID >= changed[i].ID {
			return nil, false
		}
	}
	if !slices.IsSorted(withheld) {
		return nil, false
	}
	byID := func(a, b wire.AgentStep) int { return strings.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(prev, byID) {
		prev = slices.SortedFunc(slices.Values(prev), byID)
	}
	out := make([]wire.AgentStep, 0, len(prev)+len(changed))
	i, j, k := 0, 0, 0
	for i < len(prev) || j < len(changed) {
		var st wire.AgentStep
		switch {
		case j == len(changed) || (i < len(prev) && prev[i].ID < changed[j].ID):
			st = prev[i]
			i++
		case i == len(prev) || changed[j].ID < prev[i].ID:
			st = changed[j]
			j++
		default: // the same step: the delta's copy
			st = changed[j]
			i, j = i+1, j+1
		}
		for k < len(withheld) && withheld[k] < st.ID {
			k++
		}
		if k < len(withheld) && withheld[k] == st.ID {
			continue
		}
		out = append(out, st)
	}
	return out, true
}

func (a *agent) snapshot() (wire.AgentSteps, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.snap == nil {
		return wire.AgentSteps{}, false
	}
	return *a.snap, true
}

func (a *agent) setSnapshot(s wire.AgentSteps) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.snap == nil || a.snap.DriftCheckSeconds != s.DriftCheckSeconds {
		select {
		case a.intervalChanged <- struct{}{}:
		default:
		}
	}
	a.snap = &s
}

// startGrace is how long a run goes unreported. A run that ends sooner is reported
// by its result alone (wire.StepReport.Unstarted): one write on the coordinators
// instead of two, and no wake-up of this host's query for the start. A longer run
// reports its start when the grace ends, so the site shows it Running.
const startGrace = time.Second

// runStep runs the step, telling the coordinator it started if it outlasts
// startGrace, and reports the result. A step listed Running (a run cut short
// here) is claimed first: its old run's claim would make a result alone stale.
// A recorded result comes with its log index (0: the coordinator did not say).
func (a *agent) runStep(ctx context.Context, st wire.AgentStep) (outcome, uint64) {
	runID := newRunID()
	log := a.log.With("step", st.ID, "kind", st.Kind, "inputsHash", st.InputsHash, "run", runID)
	rep := wire.StepReport{ID: st.ID, InputsHash: st.InputsHash, RunID: runID}
	var late *lateStart
	if st.State == plan.Running {
		if _, err := a.postStart(ctx, rep, nil); err != nil {
			return refusedStart(ctx, log, err), 0
		}
	} else {
		late = a.startLate(ctx, rep)
	}
	a.drift.forget(st.ID)
	log.Info(LogRunStarted, "attempt", st.Attempts+1)
	began := time.Now()
	res := a.execute(ctx, st)
	took := time.Since(began)
	// Every run that started ends in the log, whatever becomes of its report: it
	// changed the host even if the coordinator refuses its start below.
	switch {
	case ctx.Err() != nil:
		// Not the step's failure: it stays as it was and runs again after restart.
		log.Info(LogRunInterrupted)
	case res.OK():
		log.Info(LogRunSucceeded, "changes", len(res.Changes), "took", took.Round(time.Millisecond))
	default:
		// Driver errors are written for reports (the coordinator shows them too).
		log.Warn(LogRunFailed, "err", res.Error, "retryable", res.Retryable, "took", took.Round(time.Millisecond))
	}
	started := late == nil
	if late != nil {
		var err error
		if started, err = late.end(); err != nil {
			return refusedStart(ctx, log, err), 0
		}
	}
	if ctx.Err() != nil {
		return ranStep, 0
	}
	p := Pending{ID: st.ID, Kind: st.Kind, InputsHash: st.InputsHash, RunID: runID, Result: res}
	if !started {
		p.Unstarted, p.Took = true, took
	}
	// A quick run's result goes to disk only if its first delivery fails or the
	// agent stops: lost in a crash, it costs a re-run of an idempotent step that
	// took under startGrace. A longer run's, or one with outputs, is written first.
	if took >= startGrace || len(res.Outputs) > 0 {
		p = a.persist(log, p)
	}
	return a.deliver(ctx, log, p, false)
}

// persist writes p durably before it is reported again, returning it with its Seq;
// on failure p is returned as it was (and reported all the same: losing the file
// only loses crash safety, not the result).
func (a *agent) persist(log *slog.Logger, p Pending) Pending {
	saved, err := a.pending.Put(p)
	if err != nil {
		log.Error("could not persist result before reporting it", "err", err)
		return p
	}
	return saved
}

// refusedStart is how a run whose start the coordinator did not record ends.
func refusedStart(ctx context.Context, log *slog.Logger, err error) outcome {
	switch {
	case ctx.Err() != nil:
		return ranStep
	case client.StatusOf(err) == http.StatusConflict || client.StatusOf(err) == http.StatusNotFound:
		log.Info("step changed on the coordinator before it started; refetching", "reason", err)
		return stale
	default:
		log.Error("coordinator refused the start of a step", "err", err)
		return rejected
	}
}

// postStart reports a run's start, retrying while no coordinator can take it, until
// over closes (nil: never). It returns whether the start was recorded; an error is
// a refusal or the end of ctx. Given up because the run is over, the start is
// uncertain: the result then starts the run too (plan.Ran accepts either).
func (a *agent) postStart(ctx context.Context, rep wire.StepReport, over <-chan struct{}) (bool, error) {
	bo := newBackoff(500*time.Millisecond, 15*time.Second)
	for {
		_, err := a.do(ctx, "POST", wire.PathAgentStart, rep, nil)
		if err == nil {
			return true, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return false, err
		}
		a.log.Warn("coordinator unavailable; retrying", "path", wire.PathAgentStart, "err", err)
		select {
		case <-over:
			return false, nil
		default:
		}
		if !bo.wait(ctx) {
			return false, ctx.Err()
		}
	}
}

// lateStart reports a run's start once the run outlasts startGrace. The run's
// owner calls end, which waits for a report under way.
type lateStart struct {
	timer  *time.Timer
	over   chan struct{} // closed by end
	done   chan struct{} // closed when a report that began has ended
	posted bool
	err    error
}

func (a *agent) startLate(ctx context.Context, rep wire.StepReport) *lateStart {
	l := &lateStart{over: make(chan struct{}), done: make(chan struct{})}
	began := time.Now()
	l.timer = time.AfterFunc(startGrace, func() {
		defer close(l.done)
		rep.Took = time.Since(began)
		l.posted, l.err = a.postStart(ctx, rep, l.over)
	})
	return l
}

// end says the run is over. It returns whether the coordinator recorded its start,
// or why it refused it; a start not yet due is never sent.
func (l *lateStart) end() (bool, error) {
	close(l.over)
	if l.timer.Stop() {
		return false, nil
	}
	<-l.done
	return l.posted, l.err
}

// newRunID names one run of a step: the coordinator counts its result once.
func newRunID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "" // unnamed runs still work, without the duplicate guard
	}
	return hex.EncodeToString(b)
}

// execute runs the step with its driver. A drift check in progress is cut short
// first: a step never waits behind a check of the host it is about to change.
func (a *agent) execute(ctx context.Context, st wire.AgentStep) driver.Result {
	a.cancelCheck()
	a.execMu.RLock() // steps share it; a drift check takes it alone
	defer a.execMu.RUnlock()
	return a.cfg.Drivers.Run(ctx, st.Kind, st.Inputs)
}

// deliver reports a result until a coordinator accepts or refuses it, then forgets
// it. A result not yet on disk (a quick run's) is written there before a retry or
// when the agent stops. After an uncertain attempt (network error, no leader) or on
// replay after a restart, it first asks whether the step still waits for this
// result (awaitsResult), so a result the leader already committed is not counted
// twice. It returns how delivery ended and a recorded result's log index.
func (a *agent) deliver(ctx context.Context, log *slog.Logger, p Pending, verify bool) (outcome, uint64) {
	bo := newBackoff(500*time.Millisecond, 30*time.Second)
	done := func() {
		if p.Seq == 0 { // never written
			return
		}
		if err := a.pending.Delete(p.ID, p.Seq); err != nil {
			log.Error("could not remove delivered result", "err", err)
		}
	}
	for {
		if verify {
			waiting, err := a.awaitsResult(ctx, p)
			switch {
			case ctx.Err() != nil:
				return ranStep, 0
			case client.StatusOf(err) == http.StatusNotFound:
				log.Info("step no longer exists; dropping its result")
				done()
				return stale, 0
			case err != nil:
				log.Warn("cannot check step state; retrying", "err", err)
				bo.wait(ctx)
				continue
			case !waiting:
				log.Info("result already recorded or superseded; not sent again")
				done()
				return ranStep, 0
			}
		}
		at, err := a.do(ctx, "POST", wire.PathAgentResult, p.Report(), nil)
		switch {
		case err == nil:
			log.Info("result reported", "ok", p.Result.OK())
			if p.Result.OK() {
				// The coordinator now holds these inputs applied and no drift: a first
				// check that finds nothing has nothing to tell it.
				a.drift.record(p.ID, p.InputsHash, nil)
			}
			done()
			return recorded, at
		case ctx.Err() != nil:
			if p.Seq == 0 {
				a.persist(log, p)
			}
			return ranStep, 0 // stays pending; replayed at start-up
		case client.StatusOf(err) == http.StatusConflict:
			log.Info("result is stale (inputs or state changed); dropped", "reason", err)
			done()
			return stale, 0
		case !retryable(err):
			log.Error("coordinator refused the result; dropped", "err", err)
			done()
			return rejected, 0
		}
		log.Warn("result not delivered; retrying", "err", err)
		if p.Seq == 0 {
			p = a.persist(log, p)
		}
		if !bo.wait(ctx) {
			return ranStep, 0
		}
		verify = true
	}
}

// awaitsResult asks the coordinator whether the step still waits for p: it is
// Running with p's inputs, or, for a run whose start was not recorded, in any state
// a run may end from (a Failed step may hold p's own result already: the run ID
// makes a second delivery count once).
func (a *agent) awaitsResult(ctx context.Context, p Pending) (bool, error) {
	var st wire.AgentStep
	if _, err := a.do(ctx, "GET", wire.PathAgentSteps+"/"+p.ID, nil, &st); err != nil {
		return false, err
	}
	if st.InputsHash != p.InputsHash {
		return false, nil
	}
	if p.Unstarted {
		return st.State == plan.Ready || st.State == plan.Running || st.State == plan.Failed, nil
	}
	return st.State == plan.Running, nil
}

// replayPending delivers results a previous run persisted but may not have reported,
// oldest first, before any new step runs.
func (a *agent) replayPending(ctx context.Context) {
	ps, err := a.pending.List()
	if err != nil {
		a.log.Error("some pending results cannot be read; they are kept for inspection", "dir", a.pending.dir, "err", err)
	}
	for _, p := range ps {
		if ctx.Err() != nil {
			return
		}
		log := a.log.With("step", p.ID, "kind", p.Kind, "inputsHash", p.InputsHash)
		log.Info("replaying result persisted before a restart")
		a.deliver(ctx, log, p, true)
	}
}
