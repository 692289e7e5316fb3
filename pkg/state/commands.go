package state

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// CommandVersion is the encoding version this build writes. Apply refuses newer ones
// with an error instead of guessing, so a mixed-version cluster fails loudly.
const CommandVersion = 1

// Command is the envelope of every Raft log entry. Now is chosen by the proposer:
// the FSM never reads a clock.
type Command struct {
	Type    string          `json:"type"`
	Version int             `json:"v"`
	Now     time.Time       `json:"now"`
	Body    json.RawMessage `json:"body"`
}

// Command types, one per state change.
const (
	CmdApplyManifest     = "ApplyManifest"
	CmdDeleteHost        = "DeleteHost"
	CmdCreateToken       = "CreateToken"
	CmdEnroll            = "Enroll"
	CmdRenewIdentity     = "RenewIdentity"
	CmdConfirmIdentity   = "ConfirmIdentity"
	CmdSetGossipKeys     = "SetGossipKeys"
	CmdReportFacts       = "ReportFacts"
	CmdStepStart         = "StepStart"
	CmdStepResult        = "StepResult"
	CmdStepDrift         = "StepDrift"
	CmdStepRetry         = "StepRetry"
	CmdSetReachable      = "SetReachable"
	CmdPutSecret         = "PutSecret"
	CmdAddCoordinator    = "AddCoordinator"
	CmdRemoveCoordinator = "RemoveCoordinator"
	CmdRecordEvent       = "RecordEvent"
	CmdRestore           = "Restore"
	// CmdRecordCertificates records the CA's and coordinators' certificate validity;
	// the leader proposes it when they change or an expiry condition falls due.
	CmdRecordCertificates = "RecordCertificates"
	// CmdNoop changes nothing: a follower commits one to learn an index to read at.
	CmdNoop = "Noop"
)

// Encode builds a log entry: the bytes json.Marshal gives for its Command. The
// envelope is written around the body, which json.Marshal has just left compact
// and escaped; marshalling the Command would scan and copy it a second time (a
// facts report, the most frequent write, is mostly body).
func Encode(typ string, now time.Time, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("state: encode %s: %w", typ, err)
	}
	name, err := json.Marshal(typ)
	if err != nil {
		return nil, fmt.Errorf("state: encode %s: %w", typ, err)
	}
	at, err := now.UTC().MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("state: encode %s: time: %w", typ, err)
	}
	out := make([]byte, 0, len(raw)+len(name)+len(at)+32)
	out = append(append(out, `{"type":`...), name...)
	out = strconv.AppendInt(append(out, `,"v":`...), CommandVersion, 10)
	out = append(append(out, `,"now":`...), at...)
	out = append(append(out, `,"body":`...), raw...)
	return append(out, '}'), nil
}

// ApplyManifest upserts the site (if present) and hosts of a manifest.
type ApplyManifest struct {
	File     string       `json:"file,omitempty"`
	Manifest api.Manifest `json:"manifest"`
	// Base, when set, says Manifest holds only the documents of File that the state
	// at index Base did not already declare as they are (View.ApplyOf), so a change
	// to one host of a large site logs that host, not the site. The FSM refuses it
	// with ErrDeclarationsMoved if a declaration changed after Base.
	Base uint64 `json:"base,omitempty"`
}

// DeleteHost removes a host's declaration and its steps.
type DeleteHost struct {
	Name string `json:"name"`
}

// CreateToken stores a join token; only the hash of its secret is kept.
type CreateToken struct {
	Token TokenRecord `json:"token"`
}

// Enroll consumes a token and records the identity issued for it. The FSM is the
// authority on single use: two racing enrolments cannot both succeed.
type Enroll struct {
	TokenID    string    `json:"tokenID"`
	SecretHash string    `json:"secretHash"`
	Name       string    `json:"name"`
	Role       string    `json:"role"`
	Serial     string    `json:"serial"`
	NotAfter   time.Time `json:"notAfter"`
	Remote     string    `json:"remote,omitempty"`
}

// RenewIdentity records a renewed certificate for an existing identity.
type RenewIdentity struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	OldSerial string    `json:"oldSerial"`
	Serial    string    `json:"serial"`
	NotAfter  time.Time `json:"notAfter"`
}

// RecordCertificates replaces the recorded validity of the site CA and of every
// coordinator's certificate (the first coordinator's is in no identity record).
type RecordCertificates struct {
	Certs plan.SiteCerts `json:"certs"`
}

// ConfirmIdentity records that the holder of certificate Serial used it: the
// certificate it renewed is revoked, so only the newest one works from then on.
type ConfirmIdentity struct {
	Serial string `json:"serial"`
}

// SetGossipKeys writes the gossip keys of one rotation phase at once (nil removes
// the name), so no coordinator ever sees a half-made phase. The leader seals the
// values; the FSM only places them.
type SetGossipKeys struct {
	Primary  *SecretRecord `json:"primary,omitempty"`
	Next     *SecretRecord `json:"next,omitempty"`
	Previous *SecretRecord `json:"previous,omitempty"`
}

// Names of the gossip keys in the secrets table: the primary (what gossip encrypts
// with), during a rotation the next one (installed everywhere before it becomes
// primary) and then the previous one (still accepted until everyone uses the new one).
const (
	GossipKeySecret     = "gossip-key"
	GossipNextKeySecret = "gossip-key/next"
	GossipPrevKeySecret = "gossip-key/previous"
)

// ReportFacts stores what an agent observed about its host.
type ReportFacts struct {
	Host  string          `json:"host"`
	Facts json.RawMessage `json:"facts"`
	Hash  string          `json:"hash"`
}

// StepStart, StepResult and StepDrift are an agent's reports about one of its steps.
type StepStart struct {
	ID         string `json:"id"`
	Host       string `json:"host"`
	InputsHash string `json:"inputsHash"`
	RunID      string `json:"runID,omitempty"`
	// Took is how long the run has gone already (the agent's start grace).
	Took time.Duration `json:"took,omitempty"`
}

// StepResult reports the outcome of a run. It is the log's command, kept apart from
// the agent's wire.StepReport because it says more than the agent may: Host comes
// from the caller's certificate, and Outputs are sealed by the proposer. Result is
// the agent's driver.Result unchanged, except that its Outputs hold only names.
type StepResult struct {
	ID         string        `json:"id"`
	Host       string        `json:"host"`
	InputsHash string        `json:"inputsHash"`
	RunID      string        `json:"runID,omitempty"`
	Result     driver.Result `json:"result"`
	// Outputs are the result's outputs sealed by the proposer; Result.Outputs then
	// holds only their names (values "sealed"), so no plaintext reaches the log.
	Outputs []SecretRecord `json:"outputs,omitempty"`
	// Unstarted says no StepStart was sent for this run (it finished within the
	// agent's start grace): the result starts the run too (plan.Ran), Took before.
	Unstarted bool          `json:"unstarted,omitempty"`
	Took      time.Duration `json:"took,omitempty"`
}

// StepDrift reports a periodic re-observation of a finished step.
type StepDrift struct {
	ID         string   `json:"id"`
	Host       string   `json:"host"`
	InputsHash string   `json:"inputsHash"`
	Changes    []string `json:"changes,omitempty"`
}

// StepRetry is the operator's request to retry a Failed or Blocked step.
type StepRetry struct {
	ID string `json:"id"`
}

// SetReachable records what membership says about a host.
type SetReachable struct {
	Host    string `json:"host"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// PutSecret stores a sealed secret. Owner "" means only coordinators may read it.
type PutSecret struct {
	Secret SecretRecord `json:"secret"`
}

// AddCoordinator records a coordinator's addresses.
type AddCoordinator struct {
	Coordinator Coordinator `json:"coordinator"`
}

// RemoveCoordinator forgets a coordinator.
type RemoveCoordinator struct {
	Name string `json:"name"`
}

// RecordEvent appends an event observed outside the FSM (by the leader).
type RecordEvent struct {
	Event Event `json:"event"`
}

// Restore replaces the whole state with a saved snapshot.
type Restore struct {
	Snapshot json.RawMessage `json:"snapshot"`
}
