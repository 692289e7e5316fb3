// Package cephspec is the contract between the planner and the Ceph drivers: the
// ceph.health, ceph.pool and ceph.user step kinds, the plain-data inputs the planner
// renders for them, their output keys, and RBDCaps, the caps an RBD client is given.
//
// It is kept apart from pkg/ceph so that the planner, which runs inside the
// coordinator's Raft FSM, renders Ceph steps without linking the drivers or
// librados. It imports no driver and must never do I/O.
package cephspec

import "strings"

// Step kinds.
const (
	KindHealth = "ceph.health"
	KindPool   = "ceph.pool"
	KindUser   = "ceph.user"
)

// Output keys, sealed by the coordinator as output/<step>/<key>.
const (
	// OutputFSID and OutputMonitors (comma-separated addresses) come from ceph.health.
	OutputFSID     = "fsid"
	OutputMonitors = "monitors"
	// OutputKey is a ceph.user's cephx key; OutputKeyring is the same key as a keyring file.
	OutputKey     = "key"
	OutputKeyring = "keyring"
)

// DefaultUser is the cephx id a Conn without a User connects as: Ceph's own default,
// the identity that holds the admin keyring. The manifest's ceph.user defaults to it
// (api.DefaultCephUser), so the planner names it in every Conn it renders.
const DefaultUser = "admin"

// Conn says how the step's host reaches the cluster as an admin.
type Conn struct {
	// Monitors override the config file's "mon host" when set.
	Monitors []string `json:"monitors,omitempty"`
	// ConfigFile is a ceph.conf; empty picks the driver's default (see ceph.Client).
	ConfigFile string `json:"configFile,omitempty"`
	// Keyring holds User's key; empty leaves it to the config file.
	Keyring string `json:"keyring,omitempty"`
	// User is the cephx id without "client."; empty means DefaultUser.
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

// RBDCaps are the caps of an RBD client: "profile rbd" on the monitors, and per pool
// "profile rbd" (read-write) or "profile rbd-read-only" on the OSDs; the managers get
// the read-write pools (rbd_support: trash purge, task queue).
func RBDCaps(pools, readOnly []string) map[string]string {
	var osd, mgr []string
	for _, p := range pools {
		osd = append(osd, "profile rbd pool="+p)
		mgr = append(mgr, "profile rbd pool="+p)
	}
	for _, p := range readOnly {
		osd = append(osd, "profile rbd-read-only pool="+p)
	}
	caps := map[string]string{"mon": "profile rbd"}
	if len(osd) > 0 {
		caps["osd"] = strings.Join(osd, ", ")
	}
	if len(mgr) > 0 {
		caps["mgr"] = strings.Join(mgr, ", ")
	}
	return caps
}

// SystemConfigFile is where a Ceph host keeps its cluster configuration: the Ceph
// steps' default, and what the agent's and the drivers programs' --ceph-conf say.
const SystemConfigFile = "/etc/ceph/ceph.conf"
