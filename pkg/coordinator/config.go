// Package coordinator wires one coordinator process: its on-disk layout, first-time
// init and join, and the daemon that runs Raft, the API, membership and the leader's
// duties.
//
// It owns process lifecycle and file layout. Decisions about state belong to the FSM
// (pkg/state) and the planner (pkg/plan); this package must never change state except
// through the server's proposals.
package coordinator

import (
	"github.com/plinth-dev/plinth/pkg/atomicfile"

	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Config is a coordinator's own settings, written by init/join to DataDir/coordinator.json.
type Config struct {
	Name       string `json:"name"`
	Site       string `json:"site"`
	APIAddr    string `json:"apiAddr"`
	JoinAddr   string `json:"joinAddr"`
	RaftAddr   string `json:"raftAddr"`
	GossipAddr string `json:"gossipAddr"`
	Witness    bool   `json:"witness,omitempty"`
	// Bootstrap is set on the first coordinator: it forms a one-member cluster.
	Bootstrap bool `json:"bootstrap,omitempty"`
	// Peers are API addresses of existing coordinators to ask for admission.
	Peers []string `json:"peers,omitempty"`
	// Profile "lan" (default) or "fast" (labs and tests: short raft and gossip timers).
	Profile string `json:"profile,omitempty"`
	// AgentCertTTL is the lifetime of agent certificates (default 24h).
	AgentCertTTL Duration `json:"agentCertTTL,omitempty"`
	// RaftSnapshotThreshold and RaftSnapshotInterval set how many new log entries, checked
	// how often, make Raft compact its log into a snapshot (zero: the consensus defaults).
	// Tests set them small to snapshot often.
	RaftSnapshotThreshold uint64   `json:"raftSnapshotThreshold,omitempty"`
	RaftSnapshotInterval  Duration `json:"raftSnapshotInterval,omitempty"`
}

// Duration is a time.Duration that reads and writes as "30s".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Layout of DataDir.
const (
	configFile  = "coordinator.json"
	pkiDir      = "pki"
	raftDir     = "raft"
	dataKeyFile = "data.key"
	bundleName  = "coordinator"
)

// Paths derives file locations from a data dir.
type Paths string

func (p Paths) Config() string  { return filepath.Join(string(p), configFile) }
func (p Paths) PKI() string     { return filepath.Join(string(p), pkiDir) }
func (p Paths) Raft() string    { return filepath.Join(string(p), raftDir) }
func (p Paths) DataKey() string { return filepath.Join(string(p), pkiDir, dataKeyFile) }

// LoadConfig reads DataDir/coordinator.json.
func LoadConfig(dataDir string) (Config, error) {
	var c Config
	b, err := os.ReadFile(Paths(dataDir).Config())
	if err != nil {
		if os.IsNotExist(err) {
			return c, fmt.Errorf("coordinator: %s has no %s: run `plinth-coordinator init` or `join` first", dataDir, configFile)
		}
		return c, fmt.Errorf("coordinator: read config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("coordinator: %s: %w", Paths(dataDir).Config(), err)
	}
	return c, c.validate()
}

func (c Config) save(dataDir string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(Paths(dataDir).Config(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	return nil
}

func (c Config) validate() error {
	for _, a := range []struct{ field, v string }{{"apiAddr", c.APIAddr}, {"joinAddr", c.JoinAddr}, {"raftAddr", c.RaftAddr}, {"gossipAddr", c.GossipAddr}} {
		host, port, err := net.SplitHostPort(a.v)
		if err != nil || port == "" || port == "0" {
			return fmt.Errorf("coordinator: %s: %q is not host:port with a fixed port", a.field, a.v)
		}
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return fmt.Errorf("coordinator: %s: %q must name a specific IP other coordinators and agents can reach", a.field, a.v)
		}
	}
	if c.Profile != "" && c.Profile != "lan" && c.Profile != "fast" {
		return fmt.Errorf("coordinator: profile: %q is not valid: want lan or fast", c.Profile)
	}
	return nil
}

// ips lists the distinct IPs of the coordinator's addresses, for certificate SANs.
func (c Config) ips() []net.IP {
	seen := map[string]bool{}
	var out []net.IP
	for _, a := range []string{c.APIAddr, c.JoinAddr, c.RaftAddr, c.GossipAddr} {
		host, _, _ := net.SplitHostPort(a)
		if ip := net.ParseIP(host); ip != nil && !seen[ip.String()] {
			seen[ip.String()] = true
			out = append(out, ip)
		}
	}
	return out
}
