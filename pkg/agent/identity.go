package agent

import (
	"github.com/plinth-dev/plinth/pkg/atomicfile"

	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/pki"
)

// LoadBundle reads the agent's certificate bundle, first finishing a renewal that was
// interrupted after the new bundle was staged.
func LoadBundle(stateDir string) (pki.Bundle, error) {
	if err := finishRenewal(stateDir); err != nil {
		return pki.Bundle{}, err
	}
	b, err := pki.LoadBundle(pkiPath(stateDir), bundleName)
	if err != nil {
		return pki.Bundle{}, fmt.Errorf("agent: %w (re-enrol with `plinth-agent join --force`)", err)
	}
	return b, nil
}

// readBundle reads the live bundle without finishing a renewal: for read-only
// callers like `status`, which may run while the agent itself is renewing. A bundle
// caught half-replaced (new cert, old key) is read again once.
func readBundle(stateDir string) (pki.Bundle, error) {
	var err error
	for range 2 {
		var b pki.Bundle
		if b, err = pki.LoadBundle(pkiPath(stateDir), bundleName); err == nil {
			return b, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return pki.Bundle{}, fmt.Errorf("agent: %w (re-enrol with `plinth-agent join --force`)", err)
}

// saveBundle replaces the bundle so that a crash at any point leaves a valid one:
// the complete new bundle is staged in pki/renew first, then copied over the live
// files, then the stage is removed. finishRenewal redoes the copy after a crash.
func saveBundle(stateDir string, b pki.Bundle) error {
	stage := filepath.Join(pkiPath(stateDir), renewDir)
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("agent: clear %s: %w", stage, err)
	}
	if err := b.Save(stage, bundleName); err != nil {
		return err
	}
	if err := b.Save(pkiPath(stateDir), bundleName); err != nil {
		return err
	}
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("agent: remove %s: %w", stage, err)
	}
	return nil
}

func finishRenewal(stateDir string) error {
	stage := filepath.Join(pkiPath(stateDir), renewDir)
	if _, err := os.Stat(stage); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// A stage that does not load was cut short before the live files were touched.
	if b, err := pki.LoadBundle(stage, bundleName); err == nil {
		if err := b.Save(pkiPath(stateDir), bundleName); err != nil {
			return fmt.Errorf("agent: finish interrupted renewal: %w", err)
		}
	}
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("agent: remove %s: %w", stage, err)
	}
	return nil
}

// LoadGossipKey returns the gossip key saved at join or learnt since, or nil when
// there is none yet. bench/gossipfill reads it too, to join an agent's pool.
func LoadGossipKey(stateDir string) ([]byte, error) {
	b, err := os.ReadFile(gossipKeyPath(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: read gossip key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("agent: gossip key %s is not base64", gossipKeyPath(stateDir))
	}
	return key, nil
}

func saveGossipKey(stateDir string, key []byte) error {
	if len(key) == 0 {
		return nil
	}
	data := []byte(base64.StdEncoding.EncodeToString(key) + "\n")
	if err := os.MkdirAll(pkiPath(stateDir), 0o700); err != nil {
		return fmt.Errorf("agent: save gossip key: %w", err)
	}
	if err := atomicfile.WriteFile(gossipKeyPath(stateDir), data, 0o600); err != nil {
		return fmt.Errorf("agent: save gossip key: %w", err)
	}
	return nil
}
