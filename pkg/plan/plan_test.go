package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func step(id string, hash string, deps ...string) Step {
	h, _, _ := strings.Cut(id, "/")
	return Step{ID: id, Host: h, Kind: "k." + id[len(h)+1:], InputsHash: hash, Deps: deps}
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name    string
		desired []Step
		prev    map[string]Record
		want    map[string]State
		changed []string
	}{
		{
			name:    "new steps without deps are ready, with deps pending",
			desired: []Step{step("a/x", "1"), step("a/y", "1", "a/x")},
			want:    map[string]State{"a/x": Ready, "a/y": Pending},
			changed: []string{"a/x", "a/y"},
		},
		{
			name:    "dependency done unblocks dependent",
			desired: []Step{step("a/x", "1"), step("a/y", "1", "a/x")},
			prev: map[string]Record{
				"a/x": {Step: step("a/x", "1"), State: Succeeded, AppliedHash: "1"},
				"a/y": {Step: step("a/y", "1", "a/x"), State: Pending},
			},
			want:    map[string]State{"a/x": Succeeded, "a/y": Ready},
			changed: []string{"a/y"},
		},
		{
			name:    "changed inputs re-run the step and gate its dependents",
			desired: []Step{step("a/x", "2"), step("a/y", "1", "a/x")},
			prev: map[string]Record{
				"a/x": {Step: step("a/x", "1"), State: Succeeded, AppliedHash: "1"},
				"a/y": {Step: step("a/y", "1", "a/x"), State: Ready},
			},
			want:    map[string]State{"a/x": Ready, "a/y": Pending},
			changed: []string{"a/x", "a/y"},
		},
		{
			name:    "unchanged succeeded steps stay and nothing changes",
			desired: []Step{step("a/x", "1"), step("b/x", "1")},
			prev: map[string]Record{
				"a/x": {Step: step("a/x", "1"), State: Succeeded, AppliedHash: "1"},
				"b/x": {Step: step("b/x", "1"), State: Succeeded, AppliedHash: "1"},
			},
			want: map[string]State{"a/x": Succeeded, "b/x": Succeeded},
		},
		{
			name:    "steps no longer desired are dropped",
			desired: []Step{step("a/x", "1")},
			prev: map[string]Record{
				"a/x": {Step: step("a/x", "1"), State: Succeeded},
				"b/x": {Step: step("b/x", "1"), State: Ready},
			},
			want:    map[string]State{"a/x": Succeeded},
			changed: []string{"b/x"},
		},
		{
			name:    "blocked step with new inputs starts over",
			desired: []Step{step("a/x", "2")},
			prev:    map[string]Record{"a/x": {Step: step("a/x", "1"), State: Blocked, Attempts: 5}},
			want:    map[string]State{"a/x": Ready},
			changed: []string{"a/x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := Reconcile(tt.desired, tt.prev)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d records, want %d", len(got), len(tt.want))
			}
			for id, st := range tt.want {
				if got[id].State != st {
					t.Errorf("%s: state %s, want %s", id, got[id].State, st)
				}
			}
			if strings.Join(changed, ",") != strings.Join(tt.changed, ",") {
				t.Errorf("changed %v, want %v", changed, tt.changed)
			}
			if r, ok := got["a/x"]; ok && r.InputsHash == "2" && r.Attempts != 0 {
				t.Errorf("attempts not reset: %d", r.Attempts)
			}
		})
	}
}

func TestFinishAndRetry(t *testing.T) {
	p := Policy{MaxAttempts: 3, RetryBase: 2 * time.Second, RetryMax: 5 * time.Second, RepairDrift: true}
	r := Record{Step: step("a/x", "h"), State: Running}
	fail := driver.Result{Error: "boom", Retryable: true}

	r, err := Finish(r, "h", "", fail, t0, p)
	if err != nil || r.State != Failed || r.Attempts != 1 || !r.RetryAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("first failure: %+v %v", r, err)
	}
	if r.Runnable(t0.Add(time.Second)) || !r.Runnable(t0.Add(2*time.Second)) {
		t.Fatalf("retry window wrong")
	}
	r, _ = Finish(r, "h", "", fail, t0, p)
	if r.State != Failed || !r.RetryAt.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("second failure: %+v", r)
	}
	r, _ = Finish(r, "h", "", fail, t0, p)
	if r.State != Blocked || r.Attempts != 3 {
		t.Fatalf("third failure should block: %+v", r)
	}
	if _, err := Finish(r, "h", "", fail, t0, p); err == nil {
		t.Fatal("result for a blocked step accepted")
	}
	r, err = Retry(r)
	if err != nil || r.State != Pending || r.Attempts != 0 {
		t.Fatalf("retry: %+v %v", r, err)
	}
	if _, err := Retry(Record{Step: step("a/x", "h"), State: Succeeded}); err == nil {
		t.Fatal("retry of a succeeded step accepted")
	}

	perm := Record{Step: step("a/x", "h"), State: Running}
	perm, _ = Finish(perm, "h", "", driver.Result{Error: "no such link"}, t0, p)
	if perm.State != Blocked {
		t.Fatalf("non-retryable failure should block at once: %+v", perm)
	}

	ok := Record{Step: step("a/x", "h"), State: Running, Attempts: 2}
	ok, _ = Finish(ok, "h", "", driver.Result{Changes: []string{"x"}}, t0, p)
	if ok.State != Succeeded || ok.AppliedHash != "h" || ok.Attempts != 0 {
		t.Fatalf("success: %+v", ok)
	}
	if again, err := Finish(ok, "h", "", driver.Result{}, t0, p); err != nil || again.State != Succeeded {
		t.Fatalf("repeated success report should be a no-op: %v", err)
	}
	if _, err := Finish(ok, "old", "", driver.Result{}, t0, p); err == nil {
		t.Fatal("stale result accepted")
	}
}

func TestBackoffCapped(t *testing.T) {
	p := Policy{RetryBase: time.Second, RetryMax: 10 * time.Second}
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		if got := p.Backoff(i + 1); got != want*time.Second {
			t.Errorf("attempt %d: %v, want %v", i+1, got, want*time.Second)
		}
	}
}

func TestDrift(t *testing.T) {
	r := Record{Step: step("a/x", "h"), State: Succeeded, AppliedHash: "h"}
	rep, _ := Drift(r, "h", []string{"mtu 1500 -> 1400"}, Policy{RepairDrift: false})
	if rep.State != Succeeded || len(rep.Drift) != 1 {
		t.Fatalf("report policy: %+v", rep)
	}
	fix, _ := Drift(r, "h", []string{"mtu"}, Policy{RepairDrift: true})
	if fix.State != Ready {
		t.Fatalf("repair policy should re-run: %+v", fix)
	}
	clear, _ := Drift(rep, "h", nil, Policy{})
	if clear.Drift != nil {
		t.Fatal("empty report should clear drift")
	}
	if _, err := Drift(Record{Step: step("a/x", "h"), State: Ready}, "h", nil, Policy{}); err == nil {
		t.Fatal("drift on an unfinished step accepted")
	}
}

func TestCheckDAG(t *testing.T) {
	if err := CheckDAG([]Step{step("a/x", "1", "a/y"), step("a/y", "1", "a/x")}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle not found: %v", err)
	}
	if err := CheckDAG([]Step{step("a/x", "1", "a/z")}); err == nil || !strings.Contains(err.Error(), "unknown step a/z") {
		t.Fatalf("unknown dep not found: %v", err)
	}
	if err := CheckDAG([]Step{step("a/x", "1"), step("a/y", "1", "a/x")}); err != nil {
		t.Fatal(err)
	}
}

func TestHostConditions(t *testing.T) {
	ok := Record{Step: step("h1/net", "1"), State: Succeeded}
	bad := Record{Step: step("h1/ovs", "1"), State: Blocked, Attempts: 5, LastResult: &driver.Result{Error: "dpdk_initialized=false"}}
	tests := []struct {
		name      string
		view      HostView
		ready     string
		reason    string
		msgSubstr string
	}{
		{"not enrolled", HostView{Name: "h1"}, api.ConditionFalse, "NotEnrolled", "waiting for its agent"},
		{"converged", HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionTrue, Steps: []Record{ok}}, api.ConditionTrue, "Converged", "all 1 steps"},
		{"blocked step named", HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionTrue, Steps: []Record{ok, bad}}, api.ConditionFalse, "StepBlocked", "host h1 step k.ovs: blocked after 5 attempt(s): dpdk_initialized=false"},
		{"unreachable wins", HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionFalse, ReachableMsg: "gossip: dead", Steps: []Record{ok}}, api.ConditionFalse, "Unreachable", "gossip: dead"},
		{"reachability unknown", HostView{Name: "h1", Enrolled: true, Steps: []Record{ok}}, api.ConditionUnknown, "ReachabilityUnknown", ""},
		{"dependencies named", HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionTrue, Steps: []Record{{Step: step("h1/lbl", "1", "n1/join", "n2/join"), State: Pending}}}, api.ConditionFalse, "Reconciling", "host h1 step k.lbl: Pending (waiting on [n1/join n2/join])"},
		{"many dependencies bounded", HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionTrue, Steps: []Record{{Step: step("h1/lbl", "1", "n1/join", "n2/join", "n3/join", "n4/join", "n5/join"), State: Pending}}}, api.ConditionFalse, "Reconciling", "host h1 step k.lbl: Pending (waiting on [n1/join n2/join n3/join] and 2 more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := HostConditions(tt.view, nil, t0)
			r := Find(cs, api.ConditionReady)
			if r == nil || r.Status != tt.ready || r.Reason != tt.reason || !strings.Contains(r.Message, tt.msgSubstr) {
				t.Fatalf("Ready = %+v", r)
			}
		})
	}
}

// Steps handed over out of ID order give the conditions of the same steps in order,
// and the caller's slice is left as it was.
func TestHostConditionsStepOrder(t *testing.T) {
	a := Record{Step: step("h1/a", "1"), State: Blocked, Attempts: 5, LastResult: &driver.Result{Error: "a broke"}}
	b := Record{Step: step("h1/b", "1"), State: Blocked, Attempts: 5, LastResult: &driver.Result{Error: "b broke"}}
	view := func(rs ...Record) HostView {
		return HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionTrue, Steps: rs}
	}
	reversed := []Record{b, a}
	got, want := HostConditions(view(reversed...), nil, t0), HostConditions(view(a, b), nil, t0)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("out of order:\n got %+v\nwant %+v", got, want)
	}
	if r := Find(got, api.ConditionReady); !strings.Contains(r.Message, "a broke") {
		t.Fatalf("Ready names %q, want the first step by ID", r.Message)
	}
	if reversed[0].ID != "h1/b" {
		t.Fatal("the caller's steps were reordered")
	}
}

func TestConditionTransitionTimeKept(t *testing.T) {
	v := HostView{Name: "h1", Enrolled: true, Reachable: api.ConditionTrue}
	first := HostConditions(v, nil, t0)
	later := HostConditions(v, first, t0.Add(time.Hour))
	if !Find(later, api.ConditionReady).LastTransitionTime.Equal(t0) {
		t.Fatal("unchanged condition got a new transition time")
	}
	v.Reachable = api.ConditionFalse
	moved := HostConditions(v, later, t0.Add(2*time.Hour))
	if !Find(moved, api.ConditionReady).LastTransitionTime.Equal(t0.Add(2 * time.Hour)) {
		t.Fatal("changed condition kept its old transition time")
	}
}

func TestSiteConditionsNameFirstHost(t *testing.T) {
	good := HostConditions(HostView{Name: "a", Enrolled: true, Reachable: api.ConditionTrue}, nil, t0)
	bad := HostConditions(HostView{Name: "compute-1", Enrolled: true, Reachable: api.ConditionTrue,
		Steps: []Record{{Step: step("compute-1/ovs.dpdk", "1"), State: Failed, Attempts: 1, LastResult: &driver.Result{Error: "dpdk_initialized=false"}}}}, nil, t0)
	cs := SiteConditions(1, "", api.SiteSpec{Controllers: []string{"a"}}, []NamedConditions{{"a", good}, {"compute-1", bad}}, SiteCerts{}, nil, t0)
	r := Find(cs, api.ConditionReady)
	if r.Status != api.ConditionFalse || !strings.Contains(r.Message, "host compute-1 step k.ovs.dpdk: failed") {
		t.Fatalf("site Ready = %+v", r)
	}
	all := SiteConditions(1, "", api.SiteSpec{Controllers: []string{"a"}}, []NamedConditions{{"a", good}}, SiteCerts{}, nil, t0)
	if Find(all, api.ConditionReady).Status != api.ConditionTrue {
		t.Fatal("site with all hosts ready is not Ready")
	}
}

func TestRenderNetwork(t *testing.T) {
	site := &api.Site{Spec: api.SiteSpec{Networks: []api.Network{{Name: "data", MTU: 9000}}}}
	h := api.Host{Metadata: api.ObjectMeta{Name: "h1"}, Spec: api.HostSpec{
		Interfaces: []api.Interface{{Name: "eth1", Networks: []string{"data"}, Addresses: []string{"10.0.0.2/24"}}},
		Routes:     []api.Route{{To: "10.1.0.0/16", Via: "10.0.0.1"}},
	}}
	steps, err := Render(site, []api.Host{h})
	if err != nil || len(steps) != 1 {
		t.Fatalf("render: %v %v", steps, err)
	}
	if s := string(steps[0].Inputs); !strings.Contains(s, `"mtu":9000`) || !strings.Contains(s, `"up":true`) {
		t.Fatalf("inputs: %s", s)
	}
	again, _ := Render(site, []api.Host{h})
	if again[0].InputsHash != steps[0].InputsHash {
		t.Fatal("render is not deterministic")
	}
	h.Spec.Interfaces[0].Addresses = []string{"10.0.0.3/24"}
	changed, _ := Render(site, []api.Host{h})
	if changed[0].InputsHash == steps[0].InputsHash {
		t.Fatal("changed address kept the same inputs hash")
	}
}

func TestFaultTolerance(t *testing.T) {
	tests := []struct {
		spec   api.SiteSpec
		status string
		reason string
	}{
		{api.SiteSpec{Controllers: []string{"c0", "c1"}, Witness: "w"}, api.ConditionTrue, "WitnessQuorum"},
		{api.SiteSpec{Controllers: []string{"c0", "c1"}}, api.ConditionFalse, "NoWitness"},
		{api.SiteSpec{Controllers: []string{"c0"}}, api.ConditionFalse, "SingleController"},
	}
	for _, tt := range tests {
		cs := SiteConditions(1, "", tt.spec, nil, SiteCerts{}, nil, t0)
		c := Find(cs, api.ConditionFaultTolerant)
		if c == nil || c.Status != tt.status || c.Reason != tt.reason {
			t.Errorf("%+v: FaultTolerant = %+v", tt.spec, c)
		}
	}
}

// A result delivered twice (the agent did not see the first answer) counts once, and
// a result from a run that was superseded by a newer start is stale.
func TestFinishCountsEachRunOnce(t *testing.T) {
	p := Policy{MaxAttempts: 5, RetryBase: time.Second, RetryMax: time.Minute}
	r, _ := Start(Record{Step: step("a/x", "h"), State: Ready}, "h", "run-1", t0)
	fail := driver.Result{Error: "boom", Retryable: true}
	r, err := Finish(r, "h", "run-1", fail, t0, p)
	if err != nil || r.Attempts != 1 {
		t.Fatalf("first delivery: %+v %v", r, err)
	}
	again, err := Finish(r, "h", "run-1", fail, t0, p)
	if err != nil || again.Attempts != 1 {
		t.Fatalf("second delivery of the same run counted again: attempts %d, %v", again.Attempts, err)
	}
	r, _ = Start(r, "h", "run-2", t0.Add(time.Second))
	if _, err := Finish(r, "h", "run-3", fail, t0, p); err == nil {
		t.Fatal("result of an unknown run accepted")
	}
}

// A run reported only by its result (it finished within the agent's start grace)
// starts and finishes the step in one change, counts once when delivered twice, and
// never takes over a run another start claimed.
func TestRanStartsAndFinishes(t *testing.T) {
	p := Policy{MaxAttempts: 2, RetryBase: time.Second, RetryMax: time.Minute}
	ok := driver.Result{Changes: []string{"c"}}
	fail := driver.Result{Error: "boom", Retryable: true}
	ready := Record{Step: step("a/x", "h"), State: Ready}
	now := t0.Add(time.Minute)
	tests := []struct {
		name      string
		r         Record
		hash, run string
		res       driver.Result
		took      time.Duration
		state     State
		attempts  int
		stale     bool
	}{
		{"ready, success", ready, "h", "r1", ok, 2 * time.Second, Succeeded, 0, false},
		{"ready, failure", ready, "h", "r1", fail, 0, Failed, 1, false},
		{"retry due, last attempt", Record{Step: step("a/x", "h"), State: Failed, Attempts: 1, RetryAt: now, RunID: "r0", FinishedRunID: "r0"}, "h", "r1", fail, 0, Blocked, 2, false},
		{"retry not due", Record{Step: step("a/x", "h"), State: Failed, Attempts: 1, RetryAt: now.Add(time.Second)}, "h", "r1", ok, 0, Failed, 1, true},
		{"running under this run (resumed)", Record{Step: step("a/x", "h"), State: Running, RunID: "r1"}, "h", "r1", ok, 0, Succeeded, 0, false},
		{"running under another run", Record{Step: step("a/x", "h"), State: Running, RunID: "r0"}, "h", "r1", ok, 0, Running, 0, true},
		{"old inputs", ready, "old", "r1", ok, 0, Ready, 0, true},
		{"pending", Record{Step: step("a/x", "h"), State: Pending}, "h", "r1", ok, 0, Pending, 0, true},
		{"succeeded since, other run", Record{Step: step("a/x", "h"), State: Succeeded, FinishedRunID: "r0"}, "h", "r1", ok, 0, Succeeded, 0, true},
		{"delivered twice", Record{Step: step("a/x", "h"), State: Succeeded, FinishedRunID: "r1", RunID: "r1"}, "h", "r1", ok, 0, Succeeded, 0, false},
		{"delivered twice after a failure", Record{Step: step("a/x", "h"), State: Failed, Attempts: 1, RetryAt: now.Add(time.Hour), FinishedRunID: "r1", RunID: "r1"}, "h", "r1", fail, 0, Failed, 1, false},
	}
	for _, tt := range tests {
		got, err := Ran(tt.r, tt.hash, tt.run, tt.res, tt.took, now, p)
		var se *StaleError
		if tt.stale != errors.As(err, &se) || (err != nil && !tt.stale) {
			t.Errorf("%s: err %v, want stale %v", tt.name, err, tt.stale)
			continue
		}
		if got.State != tt.state || got.Attempts != tt.attempts {
			t.Errorf("%s: state %s attempts %d, want %s %d", tt.name, got.State, got.Attempts, tt.state, tt.attempts)
		}
		if tt.stale || tt.r.FinishedRunID == tt.run {
			continue
		}
		if got.RunID != tt.run || got.FinishedRunID != tt.run || !got.FinishedAt.Equal(now) || !got.StartedAt.Equal(now.Add(-tt.took)) {
			t.Errorf("%s: run %q finished run %q, started %v finished %v", tt.name, got.RunID, got.FinishedRunID, got.StartedAt, got.FinishedAt)
		}
	}
}
