// Package agentid is the agent's identity file, StateDir/agent.json: who this host is
// and which coordinators it talks to. It lives apart from pkg/agent so that the
// drivers programs, which need the coordinators' addresses to roll back a change
// that cut the host off, read it without linking the agent (gossip, the step loop).
package agentid

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
)

// File is the identity file's name in the agent's state directory.
const File = "agent.json"

// Identity is StateDir/agent.json. The key and certificate live next to it in
// StateDir/pki.
type Identity struct {
	Name         string   `json:"name"`
	Coordinators []string `json:"coordinators"`
	GossipSeeds  []string `json:"gossipSeeds,omitempty"`
}

// Path is the identity file in stateDir.
func Path(stateDir string) string { return filepath.Join(stateDir, File) }

// Load reads StateDir/agent.json.
func Load(stateDir string) (Identity, error) {
	var id Identity
	b, err := os.ReadFile(Path(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return id, fmt.Errorf("agent: %s has no %s: this host is not enrolled; run `plinth-agent join`", stateDir, File)
	}
	if err != nil {
		return id, fmt.Errorf("agent: read identity: %w", err)
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("agent: %s: %w", Path(stateDir), err)
	}
	if id.Name == "" {
		return id, fmt.Errorf("agent: %s names no host", Path(stateDir))
	}
	return id, nil
}

// Save writes id to StateDir/agent.json atomically.
func (id Identity) Save(stateDir string) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return fmt.Errorf("agent: encode identity: %w", err)
	}
	if err := atomicfile.WriteFile(Path(stateDir), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("agent: save identity: %w", err)
	}
	return nil
}
