package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/plinth-dev/plinth/pkg/plan"
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
	before, err := cloneTables(s.t)
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	after, err := cloneTables(before)
	if err != nil {
		return nil, err
	}
	tmp := &Store{t: after, log: s.log}
	resp, _ := tmp.dispatch(after.Index+1, c)
	if err, ok := resp.(error); ok && err != nil {
		return nil, err
	}
	return Changes(View{before}, View{tmp.t}), nil
}

// cloneTables deep-copies the state through its snapshot encoding.
func cloneTables(t *tables) (*tables, error) {
	shallow := *t
	shallow.Archives = nil // immutable by digest: shared, not copied
	data, err := json.Marshal(struct {
		Version int     `json:"v"`
		Tables  *tables `json:"tables"`
	}{snapshotVersion, &shallow})
	if err != nil {
		return nil, fmt.Errorf("state: copy: %w", err)
	}
	c, err := decodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	maps.Copy(c.Archives, t.Archives)
	return c, nil
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
	for _, h := range after.Hosts() {
		prev, ok := before.Host(h.Name)
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
	for _, h := range before.Hosts() {
		if _, ok := after.Host(h.Name); !ok && h.Declared {
			out = append(out, "- host "+h.Name)
		}
	}
	prevAllocs := before.Allocations()
	for _, a := range after.Allocations() {
		if !slices.Contains(prevAllocs, a) {
			out = append(out, fmt.Sprintf("+ address %s from network %s for host %s", a.Address, a.Network, a.Host))
		}
	}
	nextAllocs := after.Allocations()
	for _, a := range prevAllocs {
		if !slices.Contains(nextAllocs, a) {
			out = append(out, fmt.Sprintf("- address %s from network %s for host %s", a.Address, a.Network, a.Host))
		}
	}
	current := map[string]plan.Record{}
	for _, r := range before.Steps("") {
		current[r.ID] = r
	}
	next := map[string]plan.Record{}
	for _, r := range after.Steps("") {
		next[r.ID] = r
		c, had := current[r.ID]
		switch {
		case !had:
			out = append(out, fmt.Sprintf("+ step %s: %s", r.ID, string(r.Inputs)))
		case c.InputsHash != r.InputsHash:
			out = append(out, fmt.Sprintf("~ step %s: inputs %s -> %s: %s", r.ID, c.InputsHash, r.InputsHash, string(r.Inputs)))
		}
	}
	for _, r := range before.Steps("") {
		if _, ok := next[r.ID]; !ok {
			out = append(out, "- step "+r.ID)
		}
	}
	out = append(out, appChanges(before, after)...)
	if len(out) == 0 {
		out = []string{"no changes"}
	}
	return out
}
