package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// TestBlockHostWakesOnlyForItsHost: a query waiting on one host's steps is not
// woken by another host's reports, and is by its own (and by a manifest).
func TestBlockHostWakesOnlyForItsHost(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1", "w2")})
	for _, h := range []string{"c0", "w1", "w2"} {
		enrolled(l, h)
	}
	waiting := func(host string) chan struct{} {
		l.s.hostMu.Lock()
		defer l.s.hostMu.Unlock()
		return l.s.hostNotify[host]
	}
	done := make(chan struct{})
	var min uint64
	l.s.Read(func(v View) { min = v.HostWatch("w2") })
	go func() {
		defer close(done)
		l.s.BlockHost(context.Background(), min, "w2", func(v View) uint64 { return v.HostWatch("w2") })
	}()
	for waiting("w2") == nil {
		time.Sleep(time.Millisecond)
	}
	ch := waiting("w2")
	// w1 runs a step: start and result, facts, reachability.
	st, _ := l.view().Step("w1/host.network")
	l.must(CmdStepStart, StepStart{ID: st.ID, Host: "w1", InputsHash: st.InputsHash})
	l.must(CmdStepResult, StepResult{ID: st.ID, Host: "w1", InputsHash: st.InputsHash, Result: driver.Result{Changes: []string{"mtu"}}})
	l.must(CmdNoop, struct{}{})
	select {
	case <-ch:
		t.Fatal("w2's query was woken by commands about w1")
	case <-done:
		t.Fatal("w2's query returned on commands about w1")
	default:
	}
	if l.s.BlockStats().Wakeups != 0 {
		t.Fatalf("wake-ups %+v", l.s.BlockStats())
	}
	// w2's own step starts: its query answers.
	st, _ = l.view().Step("w2/host.network")
	l.must(CmdStepStart, StepStart{ID: st.ID, Host: "w2", InputsHash: st.InputsHash})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("w2's query not woken by its own step")
	}
	if bs := l.s.BlockStats(); bs.Wakeups != 1 || bs.Idle != 0 {
		t.Fatalf("wake-ups %+v, want exactly one", bs)
	}
}

// TestHostStepsIndexFollowsReplans: the per-host step index lists what a walk of
// every step finds, in ID order, after manifests drop and add a host and after a snapshot
// round trip.
func TestHostStepsIndexFollowsReplans(t *testing.T) {
	l := newLog(t)
	check := func(s *Store, what string) {
		t.Helper()
		s.Read(func(v View) {
			for _, h := range []string{"c0", "w1", "w2", "w3"} {
				var got []string
				v.EachHostStep(h, func(r plan.Record) { got = append(got, r.ID) })
				var want []string
				for _, r := range v.Steps(h) {
					want = append(want, r.ID)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s: host %s: index %v, steps %v", what, h, got, want)
				}
			}
		})
	}
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1", "w2")})
	check(l.s, "first manifest")
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1")})
	check(l.s, "w2 dropped")
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1", "w2")})
	check(l.s, "w2 back")
	check(snapshotRoundTrip(t, l.s), "after a snapshot")
}

// TestHostStepSetIndex: a host's step set index moves when, and only when, a
// step of the host is added or removed (not when one runs or its inputs change),
// and a decoded snapshot's floor stands in for the history it does not carry.
func TestHostStepSetIndex(t *testing.T) {
	l := newLog(t)
	hosts := []string{"c0", "w1", "w2", "w3"}
	sets := map[string]string{"c0": "[]", "w1": "[]", "w2": "[]", "w3": "[]"}
	idxs := map[string]uint64{}
	check := func(what string) {
		t.Helper()
		v := l.view()
		for _, h := range hosts {
			var ids []string
			v.EachHostStep(h, func(r plan.Record) { ids = append(ids, r.ID) })
			set, idx := fmt.Sprint(ids), v.HostStepSetIndex(h)
			switch {
			case set != sets[h] && idx != v.Index():
				t.Errorf("%s: %s's steps changed (%s -> %s) but its index is %d, not %d", what, h, sets[h], set, idx, v.Index())
			case set == sets[h] && idx != idxs[h]:
				t.Errorf("%s: %s's steps are as they were (%s) but its index moved %d -> %d", what, h, set, idxs[h], idx)
			}
			sets[h], idxs[h] = set, idx
		}
	}
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1", "w2")})
	check("first manifest")
	st, _ := l.view().Step("w1/host.network")
	l.must(CmdStepStart, StepStart{ID: st.ID, Host: "w1", InputsHash: st.InputsHash})
	l.must(CmdStepResult, StepResult{ID: st.ID, Host: "w1", InputsHash: st.InputsHash, Result: driver.Result{Changes: []string{"mtu"}}})
	check("a step ran")
	m := manifest("c0", "w1", "w2")
	m.Hosts[1].Spec.Interfaces[0].MTU = 9000
	l.must(CmdApplyManifest, ApplyManifest{Manifest: m})
	if r, _ := l.view().Step("w1/host.network"); r.InputsHash == st.InputsHash {
		t.Fatal("the MTU did not change w1's inputs")
	}
	check("inputs changed")
	l.must(CmdDeleteHost, DeleteHost{Name: "w2"})
	check("w2 deleted")
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1", "w2", "w3")})
	check("w2 back, w3 new")

	restored := snapshotRoundTrip(t, l.s)
	restored.Read(func(v View) {
		for _, h := range hosts {
			if got := v.HostStepSetIndex(h); got != v.Index() {
				t.Errorf("after a snapshot: %s's index is %d, not the snapshot's %d", h, got, v.Index())
			}
		}
	})
}

// TestManifestWakesOnlyTheHostsItChanged: a manifest wakes the blocking queries of
// the hosts whose record or steps it changed (every one of them), not the whole
// site; a change to what every agent's answer carries (the drift-check period)
// wakes all, and a manifest that changes nothing wakes none.
func TestManifestWakesOnlyTheHostsItChanged(t *testing.T) {
	l := newLog(t)
	hosts := []string{"c0", "w1", "w2", "w3"}
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest(hosts...)})
	for _, h := range hosts {
		enrolled(l, h)
	}
	// apply arms a waiting query per host, applies m and returns whose were woken.
	apply := func(m api.Manifest) map[string]bool {
		t.Helper()
		chans := map[string]<-chan struct{}{}
		l.s.hostMu.Lock()
		for _, h := range hosts {
			ch, ok := l.s.hostNotify[h]
			if !ok {
				ch = make(chan struct{})
				l.s.hostNotify[h] = ch
			}
			chans[h] = ch
		}
		l.s.hostMu.Unlock()
		l.must(CmdApplyManifest, ApplyManifest{Manifest: m})
		woken := map[string]bool{}
		for h, ch := range chans {
			select {
			case <-ch:
				woken[h] = true
			default:
			}
		}
		// Every host whose answer may differ was woken: its watch moved, or a
		// record or step of it was written at this index.
		v := l.view()
		for _, h := range hosts {
			changed := v.HostWatch(h) == v.Index() || v.DriftIndex() == v.Index()
			if r, ok := v.Host(h); ok && r.ModifyIndex == v.Index() {
				changed = true
			}
			v.EachHostStep(h, func(r plan.Record) {
				if r.ModifyIndex == v.Index() {
					if v.HostWatch(h) != v.Index() {
						t.Errorf("step %s written at %d but %s's watch is %d", r.ID, v.Index(), h, v.HostWatch(h))
					}
					changed = true
				}
			})
			if changed != woken[h] {
				t.Errorf("host %s: changed=%v woken=%v", h, changed, woken[h])
			}
		}
		return woken
	}
	m := manifest(hosts...)
	m.Hosts[1].Spec.Interfaces[0].MTU = 9000
	if got := apply(m); !maps.Equal(got, map[string]bool{"w1": true}) {
		t.Errorf("an MTU change on w1 woke %v, want w1 alone", got)
	}
	if got := apply(m); len(got) != 0 {
		t.Errorf("re-applying the same manifest woke %v", got)
	}
	m.Hosts[3].Metadata.Labels = map[string]string{"rack": "r2"}
	if got := apply(m); !got["w3"] || got["w1"] || got["w2"] {
		t.Errorf("a label on w3 woke %v", got)
	}
	m.Site.Spec.Policy.DriftCheckSeconds = 30
	if got := apply(m); len(got) != len(hosts) {
		t.Errorf("a new drift-check period woke %v, want every host", got)
	}
	if v := l.view(); v.DriftIndex() != v.Index() || v.DriftCheckSeconds() != 30 {
		t.Errorf("drift index %d at %d, period %d", v.DriftIndex(), v.Index(), v.DriftCheckSeconds())
	}
	r := snapshotRoundTrip(t, l.s)
	r.Read(func(v View) {
		if v.DriftIndex() < l.view().DriftIndex() {
			t.Errorf("after a snapshot the drift index went back: %d < %d", v.DriftIndex(), l.view().DriftIndex())
		}
	})
}
