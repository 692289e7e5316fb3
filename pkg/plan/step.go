// Package plan is the reconciler's pure core: from the declared site and what agents
// have reported it computes each host's steps as a DAG, their states, and the
// conditions that roll up onto hosts and the site.
//
// Everything here is a function of its arguments. It must never read a clock, a file
// or the network, nor use randomness: the FSM runs it inside Raft's Apply, so every
// coordinator must reach the same answer from the same log. For the same reason it
// renders step inputs from the areas' contract packages (pkg/<area>/<area>spec) and
// never imports a driver; TestPlannerLinksNoDriver keeps it so.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// State is where a step is in its life.
type State string

// Step states. Pending waits on dependencies; Ready may be run by the agent; Failed
// will be retried after RetryAt; Blocked needs the operator (retry) or new inputs.
const (
	Pending   State = "Pending"
	Ready     State = "Ready"
	Running   State = "Running"
	Succeeded State = "Succeeded"
	Failed    State = "Failed"
	Blocked   State = "Blocked"
)

// Step is one unit of desired work as rendered from the manifest.
type Step struct {
	ID         string          `json:"id"`
	Host       string          `json:"host"`
	Kind       string          `json:"kind"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	InputsHash string          `json:"inputsHash"`
	Deps       []string        `json:"deps,omitempty"`
	// Depth is the longest chain of steps that wait on this one (0: none). Agents run
	// deeper steps first, so what the rest of the site waits for (etcd, the images a
	// control plane needs) never queues behind local leaves.
	Depth int `json:"depth,omitempty"`
}

// Record is a step together with its progress, as the replicated state keeps it.
type Record struct {
	Step
	State State `json:"state"`
	// Attempts counts failed runs since the last success or input change.
	Attempts int `json:"attempts,omitempty"`
	// AppliedHash is the inputs hash of the last successful run.
	AppliedHash string         `json:"appliedHash,omitempty"`
	RetryAt     time.Time      `json:"retryAt,omitempty"`
	LastResult  *driver.Result `json:"lastResult,omitempty"`
	// Drift is what the agent found changed on the host since the last success.
	Drift     []string  `json:"drift,omitempty"`
	StartedAt time.Time `json:"startedAt,omitempty"`
	// RunID names the agent's current run; FinishedRunID the last run whose result
	// was recorded, so a result delivered twice is counted once.
	RunID         string    `json:"runID,omitempty"`
	FinishedRunID string    `json:"finishedRunID,omitempty"`
	FinishedAt    time.Time `json:"finishedAt,omitempty"`
	// Held says why the step is kept Pending although its dependencies are done: its
	// host's spec does not fit the facts the host reported (see Hold).
	Held        string `json:"held,omitempty"`
	ModifyIndex uint64 `json:"modifyIndex"`
}

// NeedsInputs reports whether an agent needs the step's inputs: to run it (now, at
// its retry time, or resumed) or to check it for drift. A Pending or Blocked step
// changes state before either, and that change sends its inputs; until then they
// are not resolved (their secrets may not exist yet) nor sent.
func (r Record) NeedsInputs() bool { return r.State != Pending && r.State != Blocked }

// Runnable reports whether an agent should run the step at now.
func (r Record) Runnable(now time.Time) bool {
	switch r.State {
	case Ready, Running:
		return true
	case Failed:
		return !now.Before(r.RetryAt)
	}
	return false
}

// HashInputs is the hash that decides whether a finished step must run again.
func HashInputs(kind string, inputs json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(inputs)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// NewStep renders a step, marshalling inputs and hashing them. The kind must be in
// the step kind table (pkg/stepkind) and inputs of its contract type.
func NewStep(host, kind, name string, inputs any, deps ...string) (Step, error) {
	if err := stepkind.CheckInputs(kind, inputs); err != nil {
		return Step{}, err
	}
	raw, err := json.Marshal(inputs)
	if err != nil {
		return Step{}, err
	}
	return Step{
		ID:         StepID(host, kind, name),
		Host:       host,
		Kind:       kind,
		Inputs:     raw,
		InputsHash: HashInputs(kind, raw),
		Deps:       deps,
	}, nil
}

// StepID is `<host>/<kind>[/<name>]`.
func StepID(host, kind, name string) string {
	id := host + "/" + kind
	if name != "" {
		id += "/" + name
	}
	return id
}
