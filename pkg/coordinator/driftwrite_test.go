package coordinator_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// An agent posts "nothing found" for every step after it starts: about a step the
// leader holds succeeded with those inputs and no drift, that is answered without a
// Raft write; a finding still is.
func TestCleanDriftReportWritesNothing(t *testing.T) {
	c := newCluster(t)
	a := c.enrol("node-1")
	site := `apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: node-1}
spec:
  roles: [worker]
  managementAddress: 127.0.0.1
  sysctls: {net.ipv4.ip_forward: "1"}
`
	c.apply(site)
	leader := c.leader()
	agent := a.clients[leader]
	var steps wire.AgentSteps
	if _, err := agent.Do(c.ctx, "GET", wire.PathAgentSteps, nil, &steps); err != nil || len(steps.Steps) == 0 {
		t.Fatalf("steps %+v: %v", steps, err)
	}
	st := steps.Steps[0]
	rep := wire.StepReport{ID: st.ID, InputsHash: st.InputsHash, RunID: "r1"}
	for _, path := range []string{wire.PathAgentStart, wire.PathAgentResult} {
		bad := rep
		bad.Took, bad.Unstarted, bad.Result = -time.Second, true, &driver.Result{}
		if _, err := agent.Do(c.ctx, "POST", path, bad, nil); client.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "took: -1s is negative") {
			t.Fatalf("%s with a negative took: %v, want 400 naming took", path, err)
		}
	}
	if _, err := agent.Do(c.ctx, "POST", wire.PathAgentStart, rep, nil); err != nil {
		t.Fatal(err)
	}
	rep.Result = &driver.Result{}
	if _, err := agent.Do(c.ctx, "POST", wire.PathAgentResult, rep, nil); err != nil {
		t.Fatal(err)
	}
	drifts := func() int {
		t.Helper()
		var buf bytes.Buffer
		if _, err := c.admins[leader].Do(c.ctx, "GET", wire.PathMetrics, nil, &buf); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, `plinth_fsm_apply_seconds_count{command="StepDrift",result="ok"}`) {
				n, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				return int(n)
			}
		}
		return 0
	}
	post := func(changes ...string) {
		t.Helper()
		if _, err := agent.Do(c.ctx, "POST", wire.PathAgentDrift, wire.StepReport{ID: st.ID, InputsHash: st.InputsHash, Changes: changes}, nil); err != nil {
			t.Fatal(err)
		}
	}
	n0 := drifts()
	for range 3 {
		post()
	}
	if n := drifts(); n != n0 {
		t.Fatalf("clean reports wrote %d commands", n-n0)
	}
	// A finding is written (and, with the default repair policy, sends the step back
	// to run).
	post("sysctl net.ipv4.ip_forward: 0 -> 1")
	if n := drifts(); n != n0+1 {
		t.Fatalf("a finding wrote %d commands, want 1", n-n0)
	}
}
