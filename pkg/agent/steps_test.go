package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func TestRunnable(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	steps := []wire.AgentStep{
		{ID: "h/pending", State: plan.Pending},
		{ID: "h/ready", State: plan.Ready},
		{ID: "h/succeeded", State: plan.Succeeded},
		{ID: "h/running", State: plan.Running}, // cut short by a crash: run again
		{ID: "h/failed-later", State: plan.Failed, RetryAt: now.Add(time.Second)},
		{ID: "h/failed-due", State: plan.Failed, RetryAt: now},
		{ID: "h/failed-past", State: plan.Failed, RetryAt: now.Add(-time.Minute)},
		{ID: "h/blocked", State: plan.Blocked},
		{ID: "h/ready-2", State: plan.Ready},
	}
	var got []string
	for _, s := range Runnable(steps, now) {
		got = append(got, s.ID)
	}
	want := "h/ready h/running h/failed-due h/failed-past h/ready-2" // the order given
	if strings.Join(got, " ") != want {
		t.Fatalf("Runnable = %v\nwant      %s", got, want)
	}
	if Runnable(nil, now) != nil {
		t.Fatal("Runnable(nil) is not empty")
	}
}

func TestNextWait(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	limit := 30 * time.Second
	for _, tc := range []struct {
		name  string
		steps []wire.AgentStep
		want  time.Duration
	}{
		{"nothing to retry", []wire.AgentStep{{State: plan.Ready}, {State: plan.Succeeded}}, limit},
		{"retry soon", []wire.AgentStep{{State: plan.Failed, RetryAt: now.Add(2 * time.Second)}}, 2*time.Second + 50*time.Millisecond},
		{"earliest wins", []wire.AgentStep{
			{State: plan.Failed, RetryAt: now.Add(9 * time.Second)},
			{State: plan.Failed, RetryAt: now.Add(3 * time.Second)},
		}, 3*time.Second + 50*time.Millisecond},
		{"retry after the limit", []wire.AgentStep{{State: plan.Failed, RetryAt: now.Add(time.Hour)}}, limit},
		{"already due is not waited for", []wire.AgentStep{{State: plan.Failed, RetryAt: now.Add(-time.Second)}}, limit},
		{"blocked has no timer", []wire.AgentStep{{State: plan.Blocked, RetryAt: now.Add(time.Second)}}, limit},
	} {
		if got := nextWait(tc.steps, now, limit); got != tc.want {
			t.Errorf("%s: nextWait = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	b := newBackoff(time.Second, 8*time.Second)
	var prev time.Duration
	for i := range 6 {
		d := b.next()
		if d > 8*time.Second || d < time.Second*3/4 {
			t.Fatalf("attempt %d: %v out of range", i, d)
		}
		if i > 0 && i < 3 && d < prev/2 {
			t.Fatalf("attempt %d: %v does not grow from %v", i, d, prev)
		}
		prev = d
	}
	b.reset()
	if d := b.next(); d > time.Second {
		t.Fatalf("after reset: %v", d)
	}
}

func TestStepRunsClaims(t *testing.T) {
	r := newStepRuns()
	asked := answer{index: 5, asked: time.Now()}
	a := wire.AgentStep{ID: "h/kube.etcd", Kind: "kube.etcd"}
	if !r.start(a, asked) || r.start(a, asked) {
		t.Fatal("a step must be claimed once")
	}
	if r.start(wire.AgentStep{ID: "h/kube.etcd/2", Kind: "kube.etcd"}, asked) {
		t.Fatal("two runs of one kind at once")
	}
	for i, kind := range []string{"images.import", "kube.binaries"} {
		if !r.start(wire.AgentStep{ID: "h/" + kind, Kind: kind}, asked) {
			t.Fatalf("slot %d refused", i+2)
		}
	}
	if r.start(wire.AgentStep{ID: "h/kube.vip", Kind: "kube.vip"}, asked) {
		t.Fatalf("more than %d runs at once", stepSlots)
	}
	// The coordinator recorded a's result at index 10: an answer below that may
	// still list it Ready or Running (a follower behind); one at 10 or later shows
	// the result, so one listing it runnable again (a Failed step due for retry)
	// may run it.
	r.done(a, recorded, 10)
	if r.start(a, answer{index: 9, asked: time.Now()}) {
		t.Fatal("an answer below the result's index must not run it again")
	}
	if !r.start(a, answer{index: 10, asked: asked.asked}) {
		t.Fatal("an answer at the result's index may run it again")
	}
	// A run whose result was not recorded (or whose index the coordinator did not
	// say): the answer must be asked for after the run ended.
	ended := time.Now()
	time.Sleep(time.Millisecond)
	r.done(a, stale, 0)
	if r.start(a, answer{index: 99, asked: ended}) {
		t.Fatal("an answer asked before the run ended must not run it again")
	}
	if !r.start(a, answer{asked: time.Now()}) {
		t.Fatal("an answer asked after the run ended may run it again")
	}
	r.done(a, recorded, 0)
	if r.start(a, answer{index: 99, asked: ended}) {
		t.Fatal("a recorded result without an index: an answer asked before the run ended must not run it again")
	}
	r.forgetRuns()
	if !r.start(a, answer{index: 1, asked: ended}) {
		t.Fatal("after a restore the marks are forgotten")
	}
	r.done(a, recorded, 0)
	r.pause(time.Hour)
	if r.start(wire.AgentStep{ID: "h/kube.vip", Kind: "kube.vip"}, answer{index: 100, asked: time.Now()}) || r.paused() <= 0 {
		t.Fatal("paused runs must not start")
	}
	for _, kind := range []string{"images.import", "kube.binaries"} {
		r.done(wire.AgentStep{ID: "h/" + kind, Kind: kind}, recorded, 1)
	}
	r.wait()
}

// Steps of a Concurrent kind (kube.labels, one per node) run side by side, up to
// concurrentSlots, beside the stepSlots of other kinds; the kind stays busy until
// the last of them ends.
func TestConcurrentKindRunsSideBySide(t *testing.T) {
	r := newStepRuns()
	asked := answer{index: 5, asked: time.Now()}
	var ls []wire.AgentStep
	for i := range concurrentSlots + 1 {
		ls = append(ls, wire.AgentStep{ID: fmt.Sprintf("c0/kube.labels/n%d", i), Kind: "kube.labels"})
	}
	for i, st := range ls[:concurrentSlots] {
		if !r.start(st, asked) {
			t.Fatalf("label run %d refused", i)
		}
	}
	if r.start(ls[concurrentSlots], asked) {
		t.Fatal("a concurrent kind took more than its slots")
	}
	others := []wire.AgentStep{{ID: "c0/kube.vip", Kind: "kube.vip"}, {ID: "c0/images.import", Kind: "images.import"}, {ID: "c0/kube.binaries", Kind: "kube.binaries"}}
	for _, st := range others {
		if !r.start(st, asked) {
			t.Fatalf("%s refused beside the label runs", st.ID)
		}
	}
	if r.start(wire.AgentStep{ID: "c0/kube.health", Kind: "kube.health"}, asked) {
		t.Fatalf("more than %d runs of other kinds", stepSlots)
	}
	r.done(ls[0], recorded, 1)
	r.done(ls[1], recorded, 1)
	if r.kinds["kube.labels"] != concurrentSlots-2 {
		t.Fatalf("kind count %d after two of %d ended", r.kinds["kube.labels"], concurrentSlots)
	}
	if !r.start(ls[concurrentSlots], asked) {
		t.Fatal("a freed label slot refused")
	}
	for _, st := range append(ls[2:], others...) {
		r.done(st, recorded, 1)
	}
	if _, busy := r.kinds["kube.labels"]; busy || r.conc != 0 || len(r.ids) != 0 {
		t.Fatalf("after the last run: kinds %v, concurrent %d, ids %v", r.kinds, r.conc, r.ids)
	}
	r.wait()
}

// TestRunEndKicksTheLoop: every run's end leaves one kick, so the loop looks again
// at the answer it has (a step of the same kind held back) instead of waiting out
// a query for a change that already happened. Only a run that ended unrecorded
// cuts the query in flight short; a recorded result answers it by itself.
func TestRunEndKicksTheLoop(t *testing.T) {
	r := newStepRuns()
	a := wire.AgentStep{ID: "h/kube.etcd/a", Kind: "kube.etcd"}
	b := wire.AgentStep{ID: "h/kube.etcd/b", Kind: "kube.etcd"}
	asked := answer{index: 5, asked: time.Now()}
	if !r.start(a, asked) || r.start(b, asked) {
		t.Fatal("want a started and b held back (same kind)")
	}
	cut := 0
	r.onDone(func() { cut++ })
	r.done(a, recorded, 1)
	if !kicked(r) {
		t.Fatal("a run's end left no kick")
	}
	if kicked(r) {
		t.Fatal("one run's end kicked twice")
	}
	if cut != 0 {
		t.Fatal("a recorded result cut the query short")
	}
	if !r.start(b, asked) {
		t.Fatal("b still held back after a ended")
	}
	r.done(b, stale, 0)
	if !kicked(r) || cut != 1 {
		t.Fatalf("a run that ended unrecorded: kicked and cut once, got cut %d", cut)
	}
	r.onDone(nil)
	r.wait()
}

func kicked(r *stepRuns) bool {
	select {
	case <-r.kicks():
		return true
	default:
		return false
	}
}

// A delta answer merges into the answer held at its index: sent steps replace, named
// ones are kept, others are gone; a delta against another index, or naming a step
// not held, is refused (the agent then asks for everything).
func TestMergeSteps(t *testing.T) {
	prev := wire.AgentSteps{Host: "h", Steps: []wire.AgentStep{
		{ID: "h/a", State: plan.Succeeded, Inputs: []byte(`{"a":1}`)},
		{ID: "h/b", State: plan.Ready, Inputs: []byte(`{"b":1}`)},
		{ID: "h/c", State: plan.Ready},
	}}
	delta := wire.AgentSteps{Host: "h", Since: 7, DriftCheckSeconds: 9,
		Steps:     []wire.AgentStep{{ID: "h/b", State: plan.Running, Inputs: []byte(`{"b":2}`)}, {ID: "h/0", State: plan.Ready}},
		Unchanged: []string{"h/a"}}
	got, ok := mergeSteps(prev, delta, 7)
	if !ok {
		t.Fatal("refused")
	}
	var ids []string
	for _, st := range got.Steps {
		ids = append(ids, st.ID+":"+string(st.State)+":"+string(st.Inputs))
	}
	if fmt.Sprint(ids) != `[h/0:Ready: h/a:Succeeded:{"a":1} h/b:Running:{"b":2}]` || got.Since != 0 || got.Unchanged != nil || got.DriftCheckSeconds != 9 {
		t.Fatalf("merged %v %+v", ids, got)
	}
	if _, ok := mergeSteps(prev, delta, 6); ok {
		t.Error("a delta against another index was merged")
	}
	delta.Unchanged = []string{"h/zz"}
	if _, ok := mergeSteps(prev, delta, 7); ok {
		t.Error("a delta naming a step not held was merged")
	}
}

func TestMergeSparseSteps(t *testing.T) {
	prev := wire.AgentSteps{Host: "h", Steps: []wire.AgentStep{
		{ID: "h/a", State: plan.Succeeded}, {ID: "h/b", State: plan.Ready}, {ID: "h/c", State: plan.Ready}, {ID: "h/d", State: plan.Pending},
	}}
	show := func(s wire.AgentSteps) string {
		var ids []string
		for _, st := range s.Steps {
			ids = append(ids, st.ID+":"+string(st.State))
		}
		return fmt.Sprint(ids)
	}
	for _, tc := range []struct {
		name     string
		prev     []wire.AgentStep
		changed  []wire.AgentStep
		withheld []string
		want     string // "" refused
	}{
		{name: "nothing changed", want: "[h/a:Succeeded h/b:Ready h/c:Ready h/d:Pending]"},
		{name: "one replaced", changed: []wire.AgentStep{{ID: "h/c", State: plan.Running}}, want: "[h/a:Succeeded h/b:Ready h/c:Running h/d:Pending]"},
		{name: "first and last replaced", changed: []wire.AgentStep{{ID: "h/a", State: plan.Ready}, {ID: "h/d", State: plan.Ready}}, want: "[h/a:Ready h/b:Ready h/c:Ready h/d:Ready]"},
		{name: "one no longer withheld", changed: []wire.AgentStep{{ID: "h/0", State: plan.Ready}, {ID: "h/bb", State: plan.Ready}, {ID: "h/z", State: plan.Ready}},
			want: "[h/0:Ready h/a:Succeeded h/b:Ready h/bb:Ready h/c:Ready h/d:Pending h/z:Ready]"},
		{name: "withheld dropped", withheld: []string{"h/a", "h/c", "h/zz"}, want: "[h/b:Ready h/d:Pending]"},
		{name: "withheld beats a sent copy", changed: []wire.AgentStep{{ID: "h/b", State: plan.Running}}, withheld: []string{"h/b"}, want: "[h/a:Succeeded h/c:Ready h/d:Pending]"},
		{name: "prev out of order", prev: []wire.AgentStep{{ID: "h/c", State: plan.Ready}, {ID: "h/a", State: plan.Ready}}, changed: []wire.AgentStep{{ID: "h/b", State: plan.Ready}}, want: "[h/a:Ready h/b:Ready h/c:Ready]"},
		{name: "changed out of order", changed: []wire.AgentStep{{ID: "h/c"}, {ID: "h/b"}}},
		{name: "changed twice", changed: []wire.AgentStep{{ID: "h/c"}, {ID: "h/c"}}},
		{name: "withheld out of order", withheld: []string{"h/c", "h/b"}},
	} {
		p := prev
		if tc.prev != nil {
			p.Steps = tc.prev
		}
		before := show(p)
		delta := wire.AgentSteps{Host: "h", Since: 7, Sparse: true, DriftCheckSeconds: 9, Steps: tc.changed, Withheld: tc.withheld}
		got, ok := mergeSteps(p, delta, 7)
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s: merged %s; want a refusal", tc.name, show(got))
		case tc.want != "" && !ok:
			t.Errorf("%s: refused", tc.name)
		case ok && (show(got) != tc.want || got.Since != 0 || got.Sparse || got.Withheld != nil || got.DriftCheckSeconds != 9):
			t.Errorf("%s: merged %s %+v; want %s", tc.name, show(got), got, tc.want)
		}
		if show(p) != before {
			t.Errorf("%s: the steps held changed: %s, were %s", tc.name, show(p), before)
		}
	}
}
