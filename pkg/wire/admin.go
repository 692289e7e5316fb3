package wire

import "time"

// ApplyRequest carries a manifest file to apply.
type ApplyRequest struct {
	File   string `json:"file"`
	YAML   string `json:"yaml"`
	DryRun bool   `json:"dryRun,omitempty"`
}

// ApplyResponse says what the apply changed (or, with DryRun, would change).
type ApplyResponse struct {
	DryRun bool     `json:"dryRun,omitempty"`
	Plan   []string `json:"plan"`
	// Index is the apply's own log index: the state from it on holds the apply.
	Index uint64 `json:"index,omitempty"`
}

// RetryRequest names a step to retry.
type RetryRequest struct {
	ID string `json:"id"`
}

// TokenRequest asks for a join token.
type TokenRequest struct {
	Name string        `json:"name"`
	Role string        `json:"role"`
	TTL  time.Duration `json:"ttl"`
}

// TokenResponse carries the printable token; the secret is never stored.
type TokenResponse struct {
	Token   string    `json:"token"`
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Role    string    `json:"role"`
	Expires time.Time `json:"expires"`
}

// Member is one coordinator as `members` shows it.
type Member struct {
	Name     string `json:"name"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr,omitempty"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	Witness  bool   `json:"witness"`
}

// Status is this coordinator's view of the cluster.
type Status struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"appliedIndex"`
}
