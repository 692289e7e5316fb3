package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRegateSomeMatchesRegate: on gated records, changing one record's state and
// regating only it and its dependents moves exactly what a full Regate moves.
func TestRegateSomeMatchesRegate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	states := []State{Pending, Ready, Running, Succeeded, Failed, Blocked}
	for round := range 500 {
		recs := map[string]Record{}
		n := 2 + rng.IntN(30)
		for i := range n {
			r := Record{Step: Step{ID: fmt.Sprintf("s%02d", i)}, State: states[rng.IntN(len(states))]}
			for j := range i {
				if rng.IntN(4) == 0 {
					r.Deps = append(r.Deps, fmt.Sprintf("s%02d", j))
				}
			}
			if rng.IntN(10) == 0 {
				r.Held = "held"
			}
			recs[r.ID] = r
		}
		gate(recs) // what every command leaves behind
		id := fmt.Sprintf("s%02d", rng.IntN(n))
		r := recs[id]
		r.State = states[rng.IntN(len(states))]
		recs[id] = r
		full, some := maps.Clone(recs), maps.Clone(recs)
		want := Regate(full)
		var got []string
		for _, g := range RegateSome(some, append([]string{id}, Dependents(some)[id]...), Unmet(some)) {
			got = append(got, g.ID)
			some[g.ID] = g
		}
		if !slices.Equal(want, got) || !maps.EqualFunc(full, some, func(a, b Record) bool { return a.State == b.State }) {
			t.Fatalf("round %d: changed %s: Regate moved %v, RegateSome %v", round, id, want, got)
		}
	}
}
