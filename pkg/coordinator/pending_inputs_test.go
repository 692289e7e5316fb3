package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/internal/sitetest"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// A step still waiting on its dependencies is listed without inputs: its secrets
// (another host's outputs) do not exist yet, and the agent needs inputs only to run
// or check a step. Steps it may run carry theirs.
func TestPendingStepsCarryNoInputs(t *testing.T) {
	c := newCluster(t)
	ctl, wrk := c.enrol("node-1"), c.enrol("node-2")
	c.apply(kubeSite)
	for _, a := range []agentID{ctl, wrk} {
		poll.Until(t, 20*time.Second, "steps of "+a.name, func() error {
			var got wire.AgentSteps
			if _, err := a.clients[0].Do(c.ctx, "GET", wire.PathAgentSteps, nil, &got); err != nil {
				return err
			}
			pending, ready := 0, 0
			for _, st := range got.Steps {
				switch {
				case st.State == plan.Pending || st.State == plan.Blocked:
					if len(st.Inputs) != 0 {
						t.Fatalf("%s: %s is %s but carries inputs %s", a.name, st.ID, st.State, st.Inputs)
					}
					pending++
				case len(st.Inputs) == 0:
					t.Fatalf("%s: %s is %s without inputs", a.name, st.ID, st.State)
				default:
					ready++
				}
			}
			if pending == 0 || ready == 0 {
				return fmt.Errorf("%s: %d pending, %d ready steps of %d", a.name, pending, ready, len(got.Steps))
			}
			return nil
		})
	}
}

// kubeSite declares a kube site of a controller and a worker, node-1 and node-2.
var kubeSite = sitetest.Kube("node-1", "node-2")
