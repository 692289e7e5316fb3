package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// A tally moved record by record (Remove as it was, Add as it is) counts what
// tallying the records again does, whatever order the changes come in.
func TestTallyMovesMatchRecount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	states := []State{Pending, Ready, Running, Succeeded, Failed, Blocked}
	recs := make([]Record, 40)
	for i := range recs {
		recs[i] = Record{Step: Step{ID: fmt.Sprintf("h/s%02d", i), Host: "h"}, State: states[rng.IntN(len(states))]}
	}
	tl := TallyOf(recs)
	for range 2000 {
		i := rng.IntN(len(recs))
		next := recs[i]
		next.State = states[rng.IntN(len(states))]
		next.Drift = nil
		if rng.IntN(4) == 0 {
			next.Drift = []string{"x"}
		}
		tl.Remove(&recs[i])
		recs[i] = next
		tl.Add(&recs[i])
		if want := TallyOf(recs); !tl.Equal(want) {
			t.Fatalf("moved %+v\nrecounted %+v", *tl, *want)
		}
	}
	if tl.Len() != len(recs) {
		t.Fatalf("Len %d, want %d", tl.Len(), len(recs))
	}
}
