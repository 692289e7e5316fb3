package wire

import (
	"encoding/json"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// AgentStep is a step as its agent sees it.
type AgentStep struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Inputs, with secret references resolved; absent while the step is Pending
	// or Blocked (plan.Record.NeedsInputs).
	Inputs      json.RawMessage `json:"inputs,omitempty"`
	InputsHash  string          `json:"inputsHash"`
	State       plan.State      `json:"state"`
	RetryAt     time.Time       `json:"retryAt,omitempty"`
	AppliedHash string          `json:"appliedHash,omitempty"`
	Attempts    int             `json:"attempts,omitempty"`
	// Depth orders runnable steps: deeper first (plan.Step.Depth).
	Depth int `json:"depth,omitempty"`
}

// QueryDelta is the query parameter (=1) an agent adds to a blocking query for its
// steps when it holds the full answer at the query's index.
const QueryDelta = "delta"

// QuerySparse is the query parameter (=1) an agent adds beside QueryDelta when it
// takes sparse deltas (AgentSteps.Sparse). A separate parameter, so coordinators
// and agents of the release before it go on answering and asking as they did.
const QuerySparse = "sparse"

// AgentStepFrom is the one place a stored step becomes what its agent sees; inputs
// are r.Inputs with secret references resolved for that agent.
func AgentStepFrom(r plan.Record, inputs json.RawMessage) AgentStep {
	return AgentStep{
		ID: r.ID, Kind: r.Kind, Inputs: inputs, InputsHash: r.InputsHash,
		State: r.State, RetryAt: r.RetryAt, AppliedHash: r.AppliedHash, Attempts: r.Attempts, Depth: r.Depth,
	}
}

// AgentSteps is the answer to an agent's blocking query.
type AgentSteps struct {
	Host  string      `json:"host"`
	Steps []AgentStep `json:"steps"`
	// Since, when not zero, says the answer is a delta against the answer the agent
	// holds for that index (it asked with QueryDelta): Steps are only the steps that
	// changed after it, Unchanged names the others, and a step in neither is gone. The
	// first controller of a large site holds a step per node; without deltas each of
	// its answers re-sent all of them, inputs and all, at every change of any.
	Since     uint64   `json:"since,omitempty"`
	Unchanged []string `json:"unchanged,omitempty"`
	// Sparse, on a delta to an agent that asked with QuerySparse, says the host's
	// set of steps is as it was at Since, so Unchanged is left out: a step held and
	// neither sent nor Withheld is unchanged. A delta then costs what changed, not
	// a line per step (the first controller's answers named a thousand).
	Sparse bool `json:"sparse,omitempty"`
	// Withheld, on a sparse delta, names steps the agent must drop: their inputs
	// cannot be handed out now (a secret not stored yet, a grant refused).
	Withheld []string `json:"withheld,omitempty"`
	// DriftCheckSeconds is how often the agent re-observes finished steps.
	DriftCheckSeconds int `json:"driftCheckSeconds"`
	// GossipKeysVersion changes whenever the gossip keys do (a rotation phase), so
	// the agent refetches its config at once rather than at its next refresh.
	GossipKeysVersion uint64 `json:"gossipKeysVersion,omitempty"`
}

// StepReport is an agent's report about one of its steps: the start of a run
// (PathAgentStart), its result (PathAgentResult) or a drift check (PathAgentDrift).
// The coordinator turns it into a state command, adding the host from the caller's
// certificate.
type StepReport struct {
	ID         string `json:"id"`
	InputsHash string `json:"inputsHash"`
	// RunID names one run of the step (agent-chosen), so a result delivered twice is
	// counted once.
	RunID   string         `json:"runID,omitempty"`
	Result  *driver.Result `json:"result,omitempty"`
	Changes []string       `json:"changes,omitempty"`
	// Unstarted, on a result, says the run's start was not recorded: the agent
	// reports a start only for a run that outlasts its start grace, so a quick step
	// costs the coordinators one write, not two. The result starts the run too.
	Unstarted bool `json:"unstarted,omitempty"`
	// Took is how long the run has gone (a start) or took (a result); not negative.
	Took time.Duration `json:"took,omitempty"`
}

// FactsReport carries host facts and their hash.
type FactsReport struct {
	Facts json.RawMessage `json:"facts"`
	Hash  string          `json:"hash"`
}

// RenewRequest carries a CSR for a fresh certificate with the same identity.
type RenewRequest struct {
	CSR string `json:"csr"`
}

// CertResponse carries a signed certificate.
type CertResponse struct {
	Cert string `json:"cert"`
	CA   string `json:"ca"`
}

// AgentConfig is what an agent needs beyond its certificate.
type AgentConfig struct {
	Coordinators []string `json:"coordinators"`
	GossipSeeds  []string `json:"gossipSeeds"`
	GossipKey    []byte   `json:"gossipKey,omitempty"`
	// GossipKeys are every key gossip must accept, GossipKey first: during a
	// rotation a new key is installed before it becomes primary, and the old one
	// stays until every member uses the new one.
	GossipKeys [][]byte `json:"gossipKeys,omitempty"`
}
