package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host"
)

// Defaults.
const (
	DefaultStateDir      = "/var/lib/plinth"
	DefaultConfigFile    = "/etc/plinth/agent.yaml"
	DefaultFactsInterval = 30 * time.Second
	// DefaultGossipPort is the agent's gossip port. It differs from the coordinator's
	// (7443) so an agent and a coordinator can share a controller's IP.
	DefaultGossipPort = 7444
)

// Config is what Run needs. Zero values take the defaults above; Name and
// Coordinators default to what `join` recorded in StateDir/agent.json.
type Config struct {
	Name          string
	StateDir      string
	Coordinators  []string // API addresses, ip:port
	GossipAddr    string   // ip:port to bind memberlist; default <ip towards a coordinator>:7444
	GossipProfile string   // "lan" (default) or "fast"
	FactsInterval time.Duration

	Logger *slog.Logger
	// Drivers runs the steps: pkg/driverexec's process runner in the daemon, a
	// driver.Registry in tests and the scale harness.
	Drivers driver.Executor
	// Notify receives sd_notify states ("READY=1", "WATCHDOG=1", "STOPPING=1").
	Notify func(string)
	// WatchdogInterval is how often WATCHDOG=1 is sent; 0 sends none.
	WatchdogInterval time.Duration
	// KubeCertificates, if set, reads the certificates kubeadm made on this host
	// (certreport.Validity); they are reported with the facts, so the
	// coordinators warn before they expire.
	KubeCertificates func() []api.CertValidity

	// Gather, if set, replaces reading this host's facts (host.Gather). Only the
	// scale harness sets it, to give a thousand agents in one process facts of
	// their own; a real agent always reads its host.
	Gather func(context.Context) (host.Facts, error)
	// NoGossip runs the agent without membership. Only the scale harness sets it,
	// to measure sites larger than the memberlist pools of every host can share
	// one machine; its hosts then never become Reachable, so Site Ready is not
	// reached and the harness waits for the steps instead. A real agent gossips.
	NoGossip bool
}

func (c Config) withDefaults() Config {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.FactsInterval <= 0 {
		c.FactsInterval = DefaultFactsInterval
	}
	if c.GossipProfile == "" {
		c.GossipProfile = "lan"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Notify == nil {
		c.Notify = func(string) {}
	}
	return c
}

// FileConfig is /etc/plinth/agent.yaml. Command-line flags override it.
type FileConfig struct {
	Name          string   `json:"name,omitempty"`
	StateDir      string   `json:"stateDir,omitempty"`
	Coordinators  []string `json:"coordinators,omitempty"`
	GossipAddr    string   `json:"gossipAddr,omitempty"`
	GossipProfile string   `json:"gossipProfile,omitempty"`
	FactsInterval Duration `json:"factsInterval,omitempty"`
	LogLevel      string   `json:"logLevel,omitempty"`
	// HostProfile names what this kind of machine forces on the software the agent
	// runs (pkg/hostprofile), e.g. nspawn-lab on lab hosts; empty on real hosts.
	HostProfile string `json:"hostProfile,omitempty"`
}

// LoadFile reads a YAML config file; unknown keys are errors so typos show. A
// missing file yields a zero FileConfig when missingOK is set.
func LoadFile(path string, missingOK bool) (FileConfig, error) {
	var fc FileConfig
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && missingOK {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("agent: config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &fc); err != nil {
		return fc, fmt.Errorf("agent: config %s: %w", path, err)
	}
	if p := fc.GossipProfile; p != "" && p != "lan" && p != "fast" {
		return fc, fmt.Errorf("agent: config %s: gossipProfile %q: want lan or fast", path, p)
	}
	return fc, nil
}

// Duration is a time.Duration written as "30s" in config files.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a positive duration like \"30s\"", s)
	}
	*d = Duration(v)
	return nil
}

// Layout of StateDir; its identity file, agent.json, is pkg/agentid's.
const (
	pkiDir     = "pki"
	renewDir   = "renew" // under pki: a renewed bundle staged before it replaces the old
	bundleName = "agent"
	gossipKey  = "gossip.key"
	pendingDir = "pending"
)

func pkiPath(stateDir string) string { return filepath.Join(stateDir, pkiDir) }
func gossipKeyPath(stateDir string) string {
	return filepath.Join(stateDir, pkiDir, gossipKey)
}

// DefaultGossipAddr is the IP this host uses to reach the first reachable-looking
// coordinator, with DefaultGossipPort. No packet is sent.
func DefaultGossipAddr(coordinators []string) (string, error) {
	for _, c := range coordinators {
		conn, err := net.Dial("udp", c)
		if err != nil {
			continue
		}
		ip := conn.LocalAddr().(*net.UDPAddr).IP
		conn.Close()
		return net.JoinHostPort(ip.String(), strconv.Itoa(DefaultGossipPort)), nil
	}
	return "", fmt.Errorf("agent: no route to any coordinator %v to pick a gossip address; set --gossip-addr", coordinators)
}
