package apprunner

import (
	"context"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/state"
)

// TestIdleRunnerWaits: with no application the runner waits on the state instead
// of asking again at once (it used to spin a core on every leader of a site without
// applications: a blocking query from index 0 never blocks).
func TestIdleRunnerWaits(t *testing.T) {
	st := state.New(nil)
	r := New(Config{Store: st, Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// Each wait ends after Poll*5 (100 ms) at the latest: about 5 in 500 ms.
	if c := st.BlockStats().Calls; c > 20 {
		t.Fatalf("%d state queries in 500 ms with nothing to do: the runner does not wait", c)
	}
}
