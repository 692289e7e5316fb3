// Package pki is the site certificate authority and everything built on it: issuing
// and reading identities (admin, coordinator, agent), mTLS configs, join tokens, the
// CLI identity file, and sealing secrets at rest with a data key.
//
// It owns key generation, certificate policy (which name, role and key usage each
// identity gets) and the on-disk format and permissions of key material. It must never
// log, print or return a private key or token secret except to write it to a 0600 file
// (a token's String is handed to the operator once), never overwrite a CA key or data
// key, and never be used where determinism is required: Seal draws a random nonce, so
// the coordinator seals before proposing to Raft, never inside the FSM. It does no
// network I/O of its own.
package pki

import (
	"fmt"
	"time"
)

// Roles. Every certificate carries exactly one, as its only OU.
const (
	RoleAdmin       = "admin"       // the CLI
	RoleCoordinator = "coordinator" // the API and Raft peers
	RoleAgent       = "agent"       // a host; CN is the host name
)

// CAValidity is how long a new site CA is valid.
const CAValidity = 10 * 365 * 24 * time.Hour

// clockSkew is how far NotBefore is backdated to tolerate clocks that lag.
const clockSkew = time.Minute

// KnownRole reports whether role is one of the roles above.
func KnownRole(role string) bool {
	switch role {
	case RoleAdmin, RoleCoordinator, RoleAgent:
		return true
	}
	return false
}

func checkRole(role string) error {
	if !KnownRole(role) {
		return fmt.Errorf("unknown role %q (want %s, %s or %s)", role, RoleAdmin, RoleCoordinator, RoleAgent)
	}
	return nil
}

// Unexported helpers return errors without the "pki:" prefix; exported functions
// add it with their context.

// checkName accepts identity names: host names and user names, 1-64 characters of
// letters, digits and . _ @ -, starting with a letter or digit.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("name is empty")
	}
	if len(name) > 64 {
		return fmt.Errorf("name %q is longer than 64 characters", name)
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if alnum || i > 0 && (r == '.' || r == '-' || r == '_' || r == '@') {
			continue
		}
		return fmt.Errorf("name %q: invalid character %q", name, r)
	}
	return nil
}
