package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type log struct {
	t     *testing.T
	s     *Store
	idx   uint64
	cmds  [][]byte
	clock time.Time
	fast  bool // benchmarks: skip the per-command watch check (it walks the state)
}

func newLog(t *testing.T) *log { return &log{t: t, s: New(nil), clock: t0} }

// apply encodes and applies a command, returning the FSM's refusal if any.
func (l *log) apply(typ string, body any) error {
	l.t.Helper()
	if err, ok := l.answer(typ, body).(error); ok {
		return err
	}
	return nil
}

// answer encodes and applies a command, returning the FSM's answer.
func (l *log) answer(typ string, body any) any {
	l.t.Helper()
	l.clock = l.clock.Add(time.Second)
	data, err := Encode(typ, l.clock, body)
	if err != nil {
		l.t.Fatal(err)
	}
	l.idx++
	l.cmds = append(l.cmds, data)
	resp := l.s.Apply(&raft.Log{Index: l.idx, Type: raft.LogCommand, Data: data})
	// Every host record the command wrote reached the watch index (hostWritten and
	// stepWritten are the only ways in; a write that bypasses them would leave its
	// blocking queries asleep).
	if !l.fast {
		l.checkWatch(typ)
		l.checkVerdicts(typ)
	}
	return resp
}

// checkVerdicts: every host's stored facts verdict is what checking its declaration
// against its facts gives now. Commands recompute only the hosts they may change (an
// apply, those it declares anew); a verdict left stale would hold or free the wrong
// host's steps.
func (l *log) checkVerdicts(typ string) {
	l.t.Helper()
	l.s.mu.RLock()
	defer l.s.mu.RUnlock()
	var site *api.Site
	if l.s.t.Site != nil {
		s := l.s.t.Site.Site
		site = &s
	}
	for n, rec := range l.s.t.Hosts {
		want := ""
		if f, ok := hostFacts(rec); ok && rec.Declared {
			want = describe(plan.CheckFacts(site, rec.Host, f))
		}
		if rec.Invalid != want {
			l.t.Errorf("%s at %d: host %s's stored verdict %q, a full check gives %q", typ, l.idx, n, rec.Invalid, want)
		}
	}
}

func (l *log) checkWatch(typ string) {
	l.s.mu.RLock()
	for n, h := range l.s.t.Hosts {
		if h.ModifyIndex == l.idx && l.s.t.watch[n] != l.idx {
			l.t.Errorf("%s: host %s written at %d but its watch index is %d", typ, n, l.idx, l.s.t.watch[n])
		}
	}
	for _, r := range l.s.t.Steps {
		if r.ModifyIndex == l.idx && l.s.t.watch[r.Host] != l.idx {
			l.t.Errorf("%s: step %s written at %d but its host's watch index is %d", typ, r.ID, l.idx, l.s.t.watch[r.Host])
		}
	}
	// The tallies and state counts the FSM moves record by record are what
	// counting every record again gives (a write that bypasses writeStep would
	// leave a host's conditions reading a step as it was).
	want := &tables{Steps: l.s.t.Steps}
	want.indexHostSteps()
	for n := range mapsUnion(want.tallies, l.s.t.tallies) {
		w, g := want.tallies[n], l.s.t.tallies[n]
		if w == nil {
			w = &plan.StepTally{}
		}
		if g == nil {
			g = &plan.StepTally{}
		}
		if !g.Equal(w) {
			l.t.Errorf("%s: host %s's step tally %+v; counted again %+v", typ, n, *g, *w)
		}
	}
	if got, want := (View{l.s.t}).StepCounts(), (View{want}).StepCounts(); !maps.Equal(got, want) {
		l.t.Errorf("%s: step counts %v; counted again %v", typ, got, want)
	}
	if l.s.t.unmet != nil {
		want := plan.Unmet(l.s.t.Steps)
		for id := range mapsUnion(want, l.s.t.unmet) {
			if g, w := l.s.t.unmet[id], want[id]; g != w {
				l.t.Errorf("%s: step %s has %d unmet dependencies by the count kept, %d counted again", typ, id, g, w)
			}
		}
	}
	// What changed since any index is what walking the host's steps finds.
	v := View{l.s.t}
	for host := range l.s.t.hostSteps {
		for _, since := range []uint64{0, l.idx / 2, l.idx - 1, l.idx} {
			var got, walked []string
			v.EachHostStepChangedSince(host, since, func(r plan.Record) { got = append(got, r.ID) })
			v.EachHostStep(host, func(r plan.Record) {
				if r.ModifyIndex > since || (secretsChangedAfter(l.s.t, since) && hasSecretRefs(&r)) {
					walked = append(walked, r.ID)
				}
			})
			if !slices.Equal(got, walked) {
				l.t.Errorf("%s: host %s's steps changed since %d: %v; walking them finds %v", typ, host, since, got, walked)
			}
		}
	}
	l.s.mu.RUnlock()
}

// secretsChangedAfter says whether the log wrote or removed a secret after since,
// as far as the records show (a removal shows only as the command's wake-all).
func secretsChangedAfter(t *tables, since uint64) bool {
	for _, s := range t.Secrets {
		if s.Index > since {
			return true
		}
	}
	return t.secretsChanged > since
}

func mapsUnion[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func (l *log) must(typ string, body any) {
	l.t.Helper()
	if err := l.apply(typ, body); err != nil {
		l.t.Fatalf("%s: %v", typ, err)
	}
}

func manifest(hosts ...string) api.Manifest {
	m := api.Manifest{Site: &api.Site{
		TypeMeta: api.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSite},
		Metadata: api.ObjectMeta{Name: "lab"},
		Spec:     api.SiteSpec{Controllers: []string{hosts[0]}},
	}}
	for i, h := range hosts {
		role := api.RoleWorker
		if i == 0 {
			role = api.RoleController
		}
		m.Hosts = append(m.Hosts, api.Host{
			TypeMeta: api.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindHost},
			Metadata: api.ObjectMeta{Name: h},
			Spec: api.HostSpec{Roles: []string{role}, ManagementAddress: "10.0.0." + string(rune('1'+i)),
				Interfaces: []api.Interface{{Name: "eth1", MTU: 1500}}},
		})
	}
	return m
}

func (l *log) view() (out View) {
	l.s.Read(func(v View) { out = View{v.t} })
	return out
}

func enrolled(l *log, host string) {
	l.t.Helper()
	l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t-" + host, SecretHash: "h", Name: host, Role: "agent", Expires: l.clock.Add(time.Hour)}})
	l.must(CmdEnroll, Enroll{TokenID: "t-" + host, SecretHash: "h", Name: host, Role: "agent", Serial: "s-" + host, NotAfter: l.clock.Add(24 * time.Hour)})
	l.must(CmdSetReachable, SetReachable{Host: host, Status: api.ConditionTrue, Reason: "GossipAlive"})
}

func TestManifestGenerationsAndSteps(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1")})
	v := l.view()
	h, _ := v.Host("w1")
	if h.Host.Metadata.Generation != 1 || len(v.Steps("")) != 2 {
		t.Fatalf("generation %d, %d steps", h.Host.Metadata.Generation, len(v.Steps("")))
	}
	// The same manifest again changes nothing.
	before := l.s.Index()
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1")})
	if h2, _ := l.view().Host("w1"); h2.Host.Metadata.Generation != 1 || h2.ModifyIndex > before {
		t.Fatalf("unchanged spec bumped generation/index: %+v", h2)
	}
	// A changed spec bumps only that host and re-plans only its step.
	m := manifest("c0", "w1")
	m.Hosts[1].Spec.Interfaces[0].MTU = 9000
	m.Site = nil
	l.must(CmdApplyManifest, ApplyManifest{Manifest: m})
	v = l.view()
	w1, _ := v.Host("w1")
	c0, _ := v.Host("c0")
	if w1.Host.Metadata.Generation != 2 || c0.Host.Metadata.Generation != 1 {
		t.Fatalf("generations c0=%d w1=%d", c0.Host.Metadata.Generation, w1.Host.Metadata.Generation)
	}
	if w1.Host.Status.ObservedGeneration != 2 {
		t.Fatalf("observedGeneration %d", w1.Host.Status.ObservedGeneration)
	}
}

func TestInvalidManifestIsRefusedWholesale(t *testing.T) {
	l := newLog(t)
	m := manifest("c0", "w1")
	m.Hosts[1].Spec.Interfaces[0].MTU = 70000
	err := l.apply(CmdApplyManifest, ApplyManifest{File: "bad.yaml", Manifest: m})
	var el api.ErrorList
	if !errors.As(err, &el) || !strings.Contains(err.Error(), "mtu") {
		t.Fatalf("want a field error, got %v", err)
	}
	if len(l.view().Hosts()) != 0 {
		t.Fatal("half-applied manifest")
	}
}

func TestEnrollIsSingleUseAndChecked(t *testing.T) {
	l := newLog(t)
	l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t1", SecretHash: "good", Name: "w1", Role: "agent", Expires: l.clock.Add(time.Minute)}})
	tests := []struct {
		name   string
		body   Enroll
		reason string
	}{
		{"unknown token", Enroll{TokenID: "nope", SecretHash: "good", Name: "w1", Role: "agent"}, "UnknownToken"},
		{"bad secret", Enroll{TokenID: "t1", SecretHash: "bad", Name: "w1", Role: "agent"}, "BadSecret"},
		{"wrong host", Enroll{TokenID: "t1", SecretHash: "good", Name: "w2", Role: "agent"}, "WrongHost"},
		{"wrong role", Enroll{TokenID: "t1", SecretHash: "good", Name: "w1", Role: "coordinator"}, "WrongRole"},
	}
	for _, tt := range tests {
		err := l.apply(CmdEnroll, tt.body)
		var ee *EnrolError
		if !errors.As(err, &ee) || ee.Reason != tt.reason {
			t.Errorf("%s: want %s, got %v", tt.name, tt.reason, err)
		}
	}
	l.must(CmdEnroll, Enroll{TokenID: "t1", SecretHash: "good", Name: "w1", Role: "agent", Serial: "s1"})
	err := l.apply(CmdEnroll, Enroll{TokenID: "t1", SecretHash: "good", Name: "w1", Role: "agent", Serial: "s2"})
	var ee *EnrolError
	if !errors.As(err, &ee) || ee.Reason != "TokenUsed" {
		t.Fatalf("second use: %v", err)
	}
	l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t2", SecretHash: "x", Name: "w2", Role: "agent", Expires: l.clock.Add(time.Second)}})
	l.clock = l.clock.Add(time.Minute)
	if err := l.apply(CmdEnroll, Enroll{TokenID: "t2", SecretHash: "x", Name: "w2", Role: "agent"}); !errors.As(err, &ee) || ee.Reason != "TokenExpired" {
		t.Fatalf("expired: %v", err)
	}
	if h, ok := l.view().Host("w1"); !ok || !h.Enrolled {
		t.Fatal("enrolment not recorded")
	}
	var refusals int
	for _, e := range l.view().Events(0) {
		if e.Type == EventWarning && strings.Contains(e.Message, "refused") {
			refusals++
		}
	}
	if refusals != 6 {
		t.Fatalf("want an event per refusal (6), got %d", refusals)
	}
}

func TestStepLifecycleAndConditions(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0")})
	enrolled(l, "c0")
	id := "c0/host.network"
	st, _ := l.view().Step(id)
	if st.State != plan.Ready {
		t.Fatalf("state %s", st.State)
	}
	// Another host's agent cannot report for this step.
	if err := l.apply(CmdStepStart, StepStart{ID: id, Host: "w9", InputsHash: st.InputsHash}); err == nil {
		t.Fatal("cross-host start accepted")
	}
	l.must(CmdStepStart, StepStart{ID: id, Host: "c0", InputsHash: st.InputsHash})
	l.must(CmdStepResult, StepResult{ID: id, Host: "c0", InputsHash: st.InputsHash, Result: driver.Result{Error: "boom", Retryable: true}})
	host, _ := l.view().Host("c0")
	ready := plan.Find(host.Host.Status.Conditions, api.ConditionReady)
	if ready.Status != api.ConditionFalse || !strings.Contains(ready.Message, "host c0 step host.network: failed") {
		t.Fatalf("Ready after failure: %+v", ready)
	}
	l.must(CmdStepResult, StepResult{ID: id, Host: "c0", InputsHash: st.InputsHash, Result: driver.Result{Changes: []string{"mtu"}}})
	site, _ := l.view().Site()
	if r := plan.Find(site.Site.Status.Conditions, api.ConditionReady); r.Status != api.ConditionTrue {
		t.Fatalf("site Ready: %+v", r)
	}
	// A stale result (old inputs) is refused.
	if err := l.apply(CmdStepResult, StepResult{ID: id, Host: "c0", InputsHash: "old", Result: driver.Result{}}); err == nil {
		t.Fatal("stale result accepted")
	}
	// Drift under the repair policy re-runs the step.
	l.must(CmdStepDrift, StepDrift{ID: id, Host: "c0", InputsHash: st.InputsHash, Changes: []string{"mtu 1500 -> 1400"}})
	st, _ = l.view().Step(id)
	host, _ = l.view().Host("c0")
	if st.State != plan.Ready || plan.Find(host.Host.Status.Conditions, api.ConditionDrifted).Status != api.ConditionTrue {
		t.Fatalf("drift: %s", st.State)
	}
	// Unreachable hosts are not Ready and say why.
	l.must(CmdSetReachable, SetReachable{Host: "c0", Status: api.ConditionFalse, Reason: "GossipDead", Message: "membership declared the agent dead"})
	host, _ = l.view().Host("c0")
	if r := plan.Find(host.Host.Status.Conditions, api.ConditionReady); r.Reason != "Unreachable" {
		t.Fatalf("unreachable: %+v", r)
	}
}

func TestUnknownAndNewerCommandsAreRefused(t *testing.T) {
	s := New(nil)
	if err, _ := s.ApplyCommand(1, []byte(`{"type":"Teleport","v":1,"body":{}}`)).(error); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown: %v", err)
	}
	if err, _ := s.ApplyCommand(2, []byte(`{"type":"Noop","v":99,"body":{}}`)).(error); err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("newer: %v", err)
	}
	if err, _ := s.ApplyCommand(3, []byte(`not json`)).(error); err == nil {
		t.Fatal("garbage accepted")
	}
}

// A run whose start was never recorded (it ended within the agent's start grace)
// is started and finished by its result: one command, which moves the step and
// its conditions as start and result did, counts once when delivered twice, and
// never takes over a run another start claimed.
func TestUnstartedResult(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0")})
	enrolled(l, "c0")
	id := "c0/host.network"
	st, _ := l.view().Step(id)
	res := StepResult{ID: id, Host: "c0", InputsHash: st.InputsHash, RunID: "r1", Result: driver.Result{Changes: []string{"mtu"}}, Unstarted: true, Took: 300 * time.Millisecond}
	l.must(CmdStepResult, res)
	r, _ := l.view().Step(id)
	if r.State != plan.Succeeded || r.FinishedRunID != "r1" || !r.FinishedAt.Equal(l.clock) || !r.StartedAt.Equal(l.clock.Add(-300*time.Millisecond)) {
		t.Fatalf("after a result alone: %s, run %q, started %v finished %v (now %v)", r.State, r.FinishedRunID, r.StartedAt, r.FinishedAt, l.clock)
	}
	site, _ := l.view().Site()
	if c := plan.Find(site.Site.Status.Conditions, api.ConditionReconciling); c.Status != api.ConditionFalse {
		t.Fatalf("site Reconciling after the only step ran: %+v", c)
	}
	l.must(CmdStepResult, res) // delivered twice
	if again, _ := l.view().Step(id); again.ModifyIndex != r.ModifyIndex {
		t.Fatalf("a second delivery changed the step (index %d -> %d)", r.ModifyIndex, again.ModifyIndex)
	}

	l.must(CmdStepDrift, StepDrift{ID: id, Host: "c0", InputsHash: st.InputsHash, Changes: []string{"mtu 1500 -> 1400"}})
	l.must(CmdStepStart, StepStart{ID: id, Host: "c0", InputsHash: st.InputsHash, RunID: "r2", Took: time.Second})
	if r, _ := l.view().Step(id); r.State != plan.Running || !r.StartedAt.Equal(l.clock.Add(-time.Second)) {
		t.Fatalf("late start: %s, started %v (now %v)", r.State, r.StartedAt, l.clock)
	}
	other := res
	other.RunID = "r3"
	if err := l.apply(CmdStepResult, other); err == nil {
		t.Fatal("a result alone took over another run's claim")
	}
	res.RunID = "r2"
	l.must(CmdStepResult, res) // the claimed run, its start uncertain to the agent
	if r, _ := l.view().Step(id); r.State != plan.Succeeded || r.FinishedRunID != "r2" {
		t.Fatalf("claimed run's result: %s, run %q", r.State, r.FinishedRunID)
	}
}

// Determinism: the same log applied to two stores, and a snapshot restored into a
// third, give byte-identical state — every table is in the snapshot.
func TestDeterminismAndSnapshotRoundTrip(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1", "w2")})
	enrolled(l, "c0")
	enrolled(l, "w1")
	l.must(CmdReportFacts, ReportFacts{Host: "w1", Facts: []byte(`{"cpus":2}`), Hash: "f1"})
	l.must(CmdPutSecret, PutSecret{Secret: SecretRecord{Name: "gossip-key", Ciphertext: []byte{1, 2, 3}}})
	l.must(CmdAddCoordinator, AddCoordinator{Coordinator: Coordinator{Name: "c0", RaftAddr: "a", APIAddr: "b"}})
	st, _ := l.view().Step("w1/host.network")
	l.must(CmdStepStart, StepStart{ID: st.ID, Host: "w1", InputsHash: st.InputsHash})
	l.must(CmdRenewIdentity, RenewIdentity{Name: "w1", Role: "agent", OldSerial: "s-w1", Serial: "s-w1b", NotAfter: l.clock.Add(48 * time.Hour)})
	_ = l.apply(CmdEnroll, Enroll{TokenID: "zzz"})

	replay := New(nil)
	for i, c := range l.cmds {
		replay.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c})
	}
	a, _ := l.s.Export()
	b, _ := replay.Export()
	if !bytes.Equal(a, b) {
		t.Fatalf("replay diverged:\n%s\n%s", a, b)
	}
	c, _ := snapshotRoundTrip(t, l.s).Export()
	if !bytes.Equal(a, c) {
		t.Fatalf("restore differs:\n%s\n%s", a, c)
	}
	for _, table := range []string{`"hosts"`, `"tokens"`, `"identities"`, `"steps"`, `"secrets"`, `"events"`, `"coordinators"`, `"site"`} {
		if !strings.Contains(string(c), table) {
			t.Errorf("snapshot lacks table %s", table)
		}
	}
}

func TestEventsAreBounded(t *testing.T) {
	l := newLog(t)
	// Past the bound, past a trim (MaxEvents+eventSlack) and between trims.
	for _, total := range []int{MaxEvents + 50, MaxEvents + eventSlack + 1, 3*MaxEvents + 7} {
		for int(l.view().t.NextEventID) < total {
			l.must(CmdRecordEvent, RecordEvent{Event: Event{Type: EventNormal, Object: "x", Reason: "R", Message: "m"}})
		}
		evs := l.view().Events(0)
		if len(evs) != MaxEvents || evs[0].ID != uint64(total-MaxEvents+1) || evs[len(evs)-1].ID != uint64(total) {
			t.Fatalf("after %d: %d events, ids %d..%d", total, len(evs), evs[0].ID, evs[len(evs)-1].ID)
		}
		if n := len(l.s.t.Events); n > MaxEvents+eventSlack {
			t.Fatalf("after %d: table holds %d events", total, n)
		}
		var after []Event
		snapshotRoundTrip(t, l.s).Read(func(v View) { after = v.Events(0) })
		if len(after) != MaxEvents || after[0].ID != evs[0].ID {
			t.Fatalf("after %d: restored %d events from %d", total, len(after), after[0].ID)
		}
	}
}

type memSink struct{ bytes.Buffer }

// snapshotRoundTrip persists a Raft snapshot of s and restores it into a new store.
func snapshotRoundTrip(t *testing.T, s *Store) *Store {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return restored
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }

func TestExpiredTokensDroppedAtMostHourly(t *testing.T) {
	l := newLog(t)
	create := func(id string, expires time.Time) {
		t.Helper()
		l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: id, SecretHash: "h", Name: "w-" + id, Role: "agent", Expires: expires}})
	}
	has := func(id string) bool { _, ok := l.view().Token(id); return ok }
	create("old", l.clock.Add(time.Minute)) // first create prunes (nothing yet)
	l.clock = l.clock.Add(tokenKeepExpired + time.Hour)
	create("a", l.clock.Add(time.Hour)) // an hour since the last prune: "old" goes
	if has("old") {
		t.Fatal("a token expired over a week ago survived a create")
	}
	create("stale", l.clock.Add(-tokenKeepExpired-time.Minute))
	create("b", l.clock.Add(time.Hour)) // within the hour: no scan
	if !has("stale") {
		t.Fatal("a create within the hour scanned the tokens")
	}
	l.clock = l.clock.Add(tokenPruneEvery)
	create("c", l.clock.Add(time.Hour))
	if has("stale") || !has("a") || !has("b") || !has("c") {
		t.Fatalf("after an hour: %+v", l.view().Tokens())
	}
	// Every replica decides the same: a copy replayed from the log agrees.
	r := newLog(t)
	for i, c := range l.cmds {
		r.s.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c})
	}
	if a, b := len(l.view().Tokens()), len(r.view().Tokens()); a != b {
		t.Fatalf("replay has %d tokens, the original %d", b, a)
	}
}

// An incremental refresh (a command about one host recomputes only that host) must
// leave every host's and the site's conditions exactly as a full recompute would.
func TestIncrementalRefreshMatchesFull(t *testing.T) {
	l := newLog(t)
	hosts := []string{"c0", "w1", "w2", "w3"}
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest(hosts...)})
	check := func(what string) {
		t.Helper()
		var full *tables
		l.s.Read(func(v View) {
			c := cloneTables(v.t)
			full = c
		})
		(&applier{t: full, idx: l.idx, now: l.clock}).refresh(false)
		for _, n := range hosts {
			h, _ := l.view().Host(n)
			want, _ := json.Marshal(full.Hosts[n].Host.Status.Conditions)
			got, _ := json.Marshal(h.Host.Status.Conditions)
			if string(got) != string(want) {
				t.Fatalf("after %s: host %s conditions\n got %s\nwant %s", what, n, got, want)
			}
		}
		want, _ := json.Marshal(full.Site.Site.Status.Conditions)
		got, _ := json.Marshal(l.view().t.Site.Site.Status.Conditions)
		if string(got) != string(want) {
			t.Fatalf("after %s: site conditions\n got %s\nwant %s", what, got, want)
		}
	}
	for _, n := range hosts {
		enrolled(l, n)
		check("enrol " + n)
	}
	for i, n := range hosts {
		id := n + "/host.network"
		st, _ := l.view().Step(id)
		l.must(CmdStepStart, StepStart{ID: id, Host: n, InputsHash: st.InputsHash})
		check("start " + id)
		res := driver.Result{Changes: []string{"mtu"}}
		if i == 1 {
			res = driver.Result{Error: "boom", Retryable: true}
		}
		l.must(CmdStepResult, StepResult{ID: id, Host: n, InputsHash: st.InputsHash, Result: res})
		check("result " + id)
		l.must(CmdReportFacts, ReportFacts{Host: n, Hash: "f" + n, Facts: json.RawMessage(`{"cpus":2}`)})
		check("facts " + n)
	}
	l.must(CmdSetReachable, SetReachable{Host: "w2", Status: api.ConditionFalse, Reason: "GossipDead", Message: "dead"})
	check("w2 unreachable")
	l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t-x", SecretHash: "h", Name: "x", Role: "agent", Expires: l.clock.Add(time.Hour)}})
	check("a token")
	// Enrolments are incremental too: a host the manifest does not declare, an
	// operator, and a declared host enrolling again with a certificate that outlives
	// its first.
	l.must(CmdEnroll, Enroll{TokenID: "t-x", SecretHash: "h", Name: "x", Role: "agent", Serial: "s-x", NotAfter: l.clock.Add(time.Hour)})
	check("enrol of an undeclared host")
	l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t-op", SecretHash: "h", Name: "w1", Role: "operator", Expires: l.clock.Add(time.Hour)}})
	l.must(CmdEnroll, Enroll{TokenID: "t-op", SecretHash: "h", Name: "w1", Role: "operator", Serial: "s-op", NotAfter: l.clock.Add(time.Hour)})
	check("enrol of an operator named like a host")
	l.must(CmdCreateToken, CreateToken{Token: TokenRecord{ID: "t-w3b", SecretHash: "h", Name: "w3", Role: "agent", Expires: l.clock.Add(time.Hour)}})
	l.must(CmdEnroll, Enroll{TokenID: "t-w3b", SecretHash: "h", Name: "w3", Role: "agent", Serial: "s-w3b", NotAfter: l.clock.Add(400 * 24 * time.Hour)})
	check("w3 enrolled again")
	if ready := plan.Find(l.view().t.Site.Site.Status.Conditions, api.ConditionReady); ready == nil || ready.Status != api.ConditionFalse {
		t.Fatalf("site Ready: %+v", ready)
	}
}

// Raft hands the FSM the entries it committed together: applied as batches (with
// entries that are not commands, and commands that fail, among them) they leave
// exactly the state, answers and wake-ups that applying them one by one does.
func TestApplyBatchMatchesOneByOne(t *testing.T) {
	l := newLog(t)
	hosts := []string{"c0", "w1", "w2"}
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest(hosts...)})
	for _, n := range hosts {
		enrolled(l, n)
	}
	for i, n := range hosts {
		id := n + "/host.network"
		st, _ := l.view().Step(id)
		l.must(CmdStepStart, StepStart{ID: id, Host: n, InputsHash: st.InputsHash})
		res := driver.Result{Changes: []string{"mtu"}}
		if i == 1 {
			res = driver.Result{Error: "boom", Retryable: true}
		}
		l.must(CmdStepResult, StepResult{ID: id, Host: n, InputsHash: st.InputsHash, Result: res})
	}
	_ = l.apply(CmdStepStart, StepStart{ID: "nope/host.network", Host: "nope"}) // refused
	var logs []*raft.Log
	for i, c := range l.cmds {
		logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Type: raft.LogCommand, Data: c})
		if i%4 == 0 {
			logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Type: raft.LogConfiguration})
		}
	}
	logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Type: raft.LogCommand, Data: []byte("not json")})

	one, batched := New(nil), New(nil)
	var want []any
	for _, e := range logs {
		want = append(want, one.Apply(e))
	}
	var got []any
	for i := 0; i < len(logs); i += 5 {
		got = append(got, batched.ApplyBatch(logs[i:min(i+5, len(logs))])...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("entry %d: answer %v, want %v", i+1, got[i], want[i])
		}
	}
	a, err := one.Export()
	if err != nil {
		t.Fatal(err)
	}
	b, err := batched.Export()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("batched state differs:\n%s\nwant\n%s", b, a)
	}

	// A host's blocking query wakes for a batch that changes it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	woke := make(chan struct{})
	at := batched.Index()
	go func() {
		batched.BlockHost(ctx, at, "w1", func(v View) uint64 { return v.HostWatch("w1") })
		close(woke)
	}()
	data, err := Encode(CmdReportFacts, l.clock, ReportFacts{Host: "w1", Facts: []byte(`{}`), Hash: "new"})
	if err != nil {
		t.Fatal(err)
	}
	noop, _ := Encode(CmdNoop, l.clock, struct{}{})
	batched.ApplyBatch([]*raft.Log{{Index: at + 1, Type: raft.LogCommand, Data: noop}, {Index: at + 2, Type: raft.LogCommand, Data: data}})
	select {
	case <-woke:
	case <-ctx.Done():
		t.Fatal("w1's blocking query did not wake")
	}
}
