package state

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

// MaxEvents bounds the event ring: readers see the newest MaxEvents.
const MaxEvents = 1000

// eventSlack is how many events past MaxEvents the table holds before it is
// trimmed back to MaxEvents (amortising the trim).
const eventSlack = MaxEvents / 4

// SiteRecord is the declared site with its status.
type SiteRecord struct {
	Site        api.Site `json:"site"`
	SpecHash    string   `json:"specHash"`
	File        string   `json:"file,omitempty"`
	ModifyIndex uint64   `json:"modifyIndex"`
}

// declares reports whether r already declares s, whose spec hashes to specHash, as
// it is: an apply leaves such a site untouched (and View.ApplyOf leaves it out).
func (r *SiteRecord) declares(s *api.Site, specHash string) bool {
	return r != nil && r.SpecHash == specHash && r.Site.Metadata.Name == s.Metadata.Name
}

// HostRecord is everything known about one host: its declaration (if any), enrolment,
// membership and facts.
type HostRecord struct {
	Name     string   `json:"name"`
	Declared bool     `json:"declared"`
	Host     api.Host `json:"host"`
	SpecHash string   `json:"specHash,omitempty"`
	Enrolled bool     `json:"enrolled"`
	// Reachable is api.ConditionTrue/False/Unknown from membership.
	Reachable       string          `json:"reachable,omitempty"`
	ReachableReason string          `json:"reachableReason,omitempty"`
	ReachableMsg    string          `json:"reachableMessage,omitempty"`
	Facts           json.RawMessage `json:"facts,omitempty"`
	FactsHash       string          `json:"factsHash,omitempty"`
	FactsAt         time.Time       `json:"factsAt,omitempty"`
	// Invalid is why the declared spec does not fit the reported facts
	// (plan.CheckFacts), "" when it does; while set the host's steps are held.
	Invalid string `json:"invalid,omitempty"`
	// KubeCerts are the kubeadm certificates the facts last reported (decoded once
	// at ReportFacts, not on every condition refresh).
	KubeCerts   []api.CertValidity `json:"kubeCerts,omitempty"`
	ModifyIndex uint64             `json:"modifyIndex"`
}

// declares reports whether r already declares h, whose spec hashes to specHash, as
// it is: an apply leaves such a host untouched (and View.ApplyOf leaves it out).
func (r *HostRecord) declares(h api.Host, specHash string) bool {
	return r != nil && r.Declared && r.SpecHash == specHash && maps.Equal(r.Host.Metadata.Labels, h.Metadata.Labels)
}

// TokenRecord is a join token without its secret.
type TokenRecord struct {
	ID         string    `json:"id"`
	SecretHash string    `json:"secretHash"`
	Name       string    `json:"name"`
	Role       string    `json:"role"`
	Expires    time.Time `json:"expires"`
	CreatedAt  time.Time `json:"createdAt"`
	UsedAt     time.Time `json:"usedAt,omitempty"`
}

// IdentityRecord is an issued certificate.
type IdentityRecord struct {
	Serial   string    `json:"serial"`
	Name     string    `json:"name"`
	Role     string    `json:"role"`
	NotAfter time.Time `json:"notAfter"`
	IssuedAt time.Time `json:"issuedAt"`
	Replaced string    `json:"replacedBy,omitempty"`
	// Supersedes is the serial this certificate renewed; once a request proves the
	// holder has the new one, the old one is revoked (ConfirmIdentity).
	Supersedes string `json:"supersedes,omitempty"`
	// Revoked says why the certificate is refused now (empty: it is not).
	Revoked string `json:"revoked,omitempty"`
}

// SecretRecord is a secret sealed with the coordinators' data key.
type SecretRecord struct {
	Name       string `json:"name"`
	Owner      string `json:"owner,omitempty"`
	Ciphertext []byte `json:"ciphertext"`
	// Index is the log index that wrote it (set by the FSM).
	Index uint64 `json:"index,omitempty"`
}

// Coordinator is one member of the coordinator cluster.
type Coordinator struct {
	Name       string `json:"name"`
	RaftAddr   string `json:"raftAddr"`
	APIAddr    string `json:"apiAddr"`
	GossipAddr string `json:"gossipAddr,omitempty"`
	Witness    bool   `json:"witness,omitempty"`
}

// Event is a bounded, replicated record of something that happened.
type Event struct {
	ID      uint64    `json:"id"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // Normal or Warning
	Object  string    `json:"object"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)
