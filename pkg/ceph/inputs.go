package ceph

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// Step kinds.
const (
	KindHealth = "ceph.health"
	KindPool   = "ceph.pool"
	KindUser   = "ceph.user"
)

// Conn says how the step's host reaches the cluster as an admin.
type Conn struct {
	// Monitors override the config file's "mon host" when set.
	Monitors []string `json:"monitors,omitempty"`
	// ConfigFile is a ceph.conf; empty picks the driver's default (see Client).
	ConfigFile string `json:"configFile,omitempty"`
	// Keyring holds User's key; empty leaves it to the config file.
	Keyring string `json:"keyring,omitempty"`
	// User is the cephx id without "client."; default admin.
	User string `json:"user,omitempty"`
}

// HealthInputs are the inputs of a ceph.health step.
type HealthInputs struct {
	Cluster Conn `json:"cluster"`
}

// PoolInputs are the inputs of a ceph.pool step: one replicated pool as it must be.
type PoolInputs struct {
	Cluster Conn   `json:"cluster"`
	Name    string `json:"name"`
	Size    int    `json:"size"`
	MinSize int    `json:"minSize"`
	// PGNum > 0 fixes pg_num with the autoscaler off; 0 turns the autoscaler on.
	PGNum       int    `json:"pgNum,omitempty"`
	Application string `json:"application"`
	// QuotaMaxBytes and QuotaMaxObjects of 0 mean no quota.
	QuotaMaxBytes   int64 `json:"quotaMaxBytes,omitempty"`
	QuotaMaxObjects int64 `json:"quotaMaxObjects,omitempty"`
	// CrushRule is the rule the pool must use; empty leaves the pool's rule alone.
	CrushRule string `json:"crushRule,omitempty"`
	// FailureDomain and DeviceClass describe CrushRule when Plinth creates it.
	FailureDomain string `json:"failureDomain,omitempty"`
	DeviceClass   string `json:"deviceClass,omitempty"`
	// Delete removes the pool (refused while it holds RBD images).
	Delete bool `json:"delete,omitempty"`
}

// UserInputs are the inputs of a ceph.user step: client.<Name> with exactly Caps.
type UserInputs struct {
	Cluster Conn              `json:"cluster"`
	Name    string            `json:"name"`
	Caps    map[string]string `json:"caps,omitempty"`
	Delete  bool              `json:"delete,omitempty"`
}

// decode reads step inputs strictly; a bad input is Permanent (a retry cannot fix it).
func decode(kind string, raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return driver.Permanent(fmt.Errorf("ceph: %s: invalid inputs: %w", kind, err))
	}
	return nil
}

func parsePool(raw json.RawMessage) (PoolInputs, error) {
	var in PoolInputs
	if err := decode(KindPool, raw, &in); err != nil {
		return in, err
	}
	switch {
	case in.Name == "":
		return in, driver.Permanent(fmt.Errorf("ceph: pool: name is required"))
	case in.Delete:
		return in, nil
	case in.Size < 1 || in.MinSize < 1 || in.MinSize > in.Size:
		return in, driver.Permanent(fmt.Errorf("ceph: pool %q: size %d, min_size %d: want 1 <= min_size <= size", in.Name, in.Size, in.MinSize))
	case in.Application == "":
		return in, driver.Permanent(fmt.Errorf("ceph: pool %q: application is required", in.Name))
	case in.CrushRule == "" && in.FailureDomain != "":
		return in, driver.Permanent(fmt.Errorf("ceph: pool %q: failureDomain without crushRule", in.Name))
	}
	return in, nil
}

func parseUser(raw json.RawMessage) (UserInputs, error) {
	var in UserInputs
	if err := decode(KindUser, raw, &in); err != nil {
		return in, err
	}
	if in.Name == "" {
		return in, driver.Permanent(fmt.Errorf("ceph: user: name is required"))
	}
	if !in.Delete && len(in.Caps) == 0 {
		return in, driver.Permanent(fmt.Errorf("ceph: user %q: caps are required", in.Name))
	}
	return in, nil
}
