package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// DryRun applies one encoded command (Encode) with the FSM's own code to a copy of
// the state and describes what it would change; the store is untouched. A dry run
// of an apply therefore shows exactly what the apply does (a label change, an
// allocation, every step added, re-run or removed), and refuses what it refuses.
func (s *Store) DryRun(data []byte) ([]string, error) {
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("state: undecodable command: %w", err)
	}
	s.mu.RLock()
	var before *tables
	if c.Type != CmdApplyManifest { // a manifest's answer is its Plan
		before = planBase(s.t)
	}
	after := cloneTables(s.t)
	s.mu.RUnlock()
	tmp := &Store{t: after, log: s.log}
	resp, _ := tmp.dispatch(after.Index+1, c)
	if err, ok := resp.(error); ok && err != nil {
		return nil, err
	}
	if p, ok := resp.(Plan); ok {
		return p, nil
	}
	return Changes(View{before}, View{tmp.t}), nil
}

// planBase copies what Changes reads of t, shallowly: record structs (whose
// scalars it compares) and step records by value, not what they point to, which
// commands replace rather than change. One deep copy of the tables fewer per apply.
func planBase(t *tables) *tables {
	b := &tables{
		Hosts:       make(map[string]*HostRecord, len(t.Hosts)),
		Steps:       maps.Clone(t.Steps),
		Allocations: slices.Clone(t.Allocations),
		Apps:        make(map[string]*AppRecord, len(t.Apps)),
	}
	if t.Site != nil {
		site := *t.Site
		b.Site = &site
	}
	for n, h := range t.Hosts {
		h := *h
		b.Hosts[n] = &h
	}
	for n, r := range t.Apps {
		r := copyApp(r)
		b.Apps[n] = &r
	}
	return b
}

func setOf[T comparable](l []T) map[T]bool {
	m := make(map[T]bool, len(l))
	for _, x := range l {
		m[x] = true
	}
	return m
}

// cloneTables deep-copies the state's records (deepCopy) and rebuilds what is
// derived from them, as a decoded snapshot does, keeping what no record carries:
// when steps were added or removed, and removals the watch index saw. Archives
// are immutable by digest: the copy shares them.
func cloneTables(t *tables) *tables {
	c := newTables()
	dst, src := reflect.ValueOf(c).Elem(), reflect.ValueOf(t).Elem()
	typ := src.Type()
	for i := range src.NumField() {
		if f := typ.Field(i); f.IsExported() && f.Name != "Archives" && !src.Field(i).IsZero() {
			deepCopy(dst.Field(i), src.Field(i))
		}
	}
	maps.Copy(c.Archives, t.Archives)
	c.derive()
	// What derive cannot know from the records, the original does.
	c.secretsChanged, c.driftChanged = t.secretsChanged, t.driftChanged
	c.stepSet, c.stepSetFloor = maps.Clone(t.stepSet), t.stepSetFloor
	if c.stepSet == nil {
		c.stepSet = map[string]uint64{}
	}
	for h, i := range t.watch {
		c.watch[h] = max(c.watch[h], i)
	}
	return c
}

// Changes describes what differs from before to after in the declared site: the
// site's and hosts' generations, pool allocations, and steps added, re-run or
// removed, and applications uploaded, updated or deleted. It is the plan `apply`
// and `app upload` print.
func Changes(before, after View) []string {
	var out []string
	old, hadSite := before.Site()
	if site, ok := after.Site(); ok {
		name := site.Site.Metadata.Name
		switch {
		case !hadSite:
			out = append(out, "+ site "+name)
		case old.Site.Metadata.Name != name:
			out = append(out, fmt.Sprintf("~ site %s -> %s: renamed (generation %d -> %d)", old.Site.Metadata.Name, name, old.Site.Metadata.Generation, site.Site.Metadata.Generation))
		case old.Site.Metadata.Generation != site.Site.Metadata.Generation:
			out = append(out, fmt.Sprintf("~ site %s: spec changed (generation %d -> %d)", name, old.Site.Metadata.Generation, site.Site.Metadata.Generation))
		}
	}
	// Read in place (Changes only reads): at a thousand hosts, copying every host
	// and step record out of both states was most of an apply's dry run.
	for _, name := range slices.Sorted(maps.Keys(after.t.Hosts)) {
		h := after.t.Hosts[name]
		prev, ok := before.t.Hosts[name]
		switch {
		case !h.Declared:
			if ok && prev.Declared {
				out = append(out, "- host "+h.Name)
			}
		case !ok || !prev.Declared:
			out = append(out, "+ host "+h.Name)
		case prev.Host.Metadata.Generation != h.Host.Metadata.Generation:
			what := "spec changed"
			if prev.SpecHash == h.SpecHash {
				what = "labels changed"
			}
			out = append(out, fmt.Sprintf("~ host %s: %s (generation %d -> %d)", h.Name, what, prev.Host.Metadata.Generation, h.Host.Metadata.Generation))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before.t.Hosts)) {
		if _, ok := after.t.Hosts[name]; !ok && before.t.Hosts[name].Declared {
			out = append(out, "- host "+name)
		}
	}
	prevAllocs := setOf(before.t.Allocations)
	nextAllocs := setOf(after.t.Allocations)
	for _, a := range after.t.Allocations {
		if !prevAllocs[a] {
			out = append(out, fmt.Sprintf("+ address %s from network %s for host %s", a.Address, a.Network, a.Host))
		}
	}
	for _, a := range before.t.Allocations {
		if !nextAllocs[a] {
			out = append(out, fmt.Sprintf("- address %s from network %s for host %s", a.Address, a.Network, a.Host))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after.t.Steps)) {
		r := after.t.Steps[id]
		c, had := before.t.Steps[id]
		switch {
		case !had:
			out = append(out, fmt.Sprintf("+ step %s: %s", r.ID, string(r.Inputs)))
		case c.InputsHash != r.InputsHash:
			out = append(out, fmt.Sprintf("~ step %s: inputs %s -> %s: %s", r.ID, c.InputsHash, r.InputsHash, string(r.Inputs)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(before.t.Steps)) {
		if _, ok := after.t.Steps[id]; !ok {
			out = append(out, "- step "+id)
		}
	}
	out = append(out, appChanges(before, after)...)
	if len(out) == 0 {
		out = []string{"no changes"}
	}
	return out
}
