package api

import "time"

// KindApplication is the document that hands the built cluster to charts: ordered
// groups of Helm charts, what each group waits for, and how each release is kept.
// It replaces the Site's old spec.charts; `plinth-coordinator app upload` stores it
// with its chart archives and `app apply` installs it (docs/applications.md).
const KindApplication = "Application"

// Application is a set of Helm charts installed in order on the site's cluster, in
// the spirit of StarlingX applications and Airship Armada manifests.
type Application struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     ApplicationSpec `json:"spec"`

	// docIndex is the 1-based document this came from (validation messages).
	docIndex int
}

// ApplicationSpec is what an application installs.
type ApplicationSpec struct {
	// Groups are installed in order: a group starts once the one before it is
	// deployed and its own gates are met. Removal goes in reverse.
	Groups []ChartGroup `json:"groups"`
	// Passwords names service passwords the coordinator generates (random, sealed
	// in its state) and hands the charts only as the Kubernetes Secret
	// "<application>-passwords" (one key per name) in every namespace the
	// application's charts use. Values reference the Secret, never the password.
	Passwords []string `json:"passwords,omitempty"`
}

// ChartGroup is charts that start together once the group's gates are met.
type ChartGroup struct {
	// Name identifies the group, unique in the application.
	Name string `json:"name"`
	// Sequenced installs the charts one after another in the order listed; by
	// default they are installed in parallel.
	Sequenced bool `json:"sequenced,omitempty"`
	// Gates are what the group waits for before its first chart starts; the
	// application's status says which one it is waiting for.
	Gates  []Gate  `json:"gates,omitempty"`
	Charts []Chart `json:"charts"`
}

// Gate is one condition a group waits for. Exactly one field is set.
type Gate struct {
	// NodesLabelled waits until enough Ready nodes carry a label.
	NodesLabelled *NodesGate `json:"nodesLabelled,omitempty"`
	// CephPools and CephUsers wait until Plinth's ceph.pool / ceph.user steps for
	// these names have succeeded.
	CephPools []string `json:"cephPools,omitempty"`
	CephUsers []string `json:"cephUsers,omitempty"`
	// DPDK waits until every host with DPDK enabled has it initialised (its
	// ovs.dpdk step succeeded).
	DPDK bool `json:"dpdk,omitempty"`
	// Chart waits until another chart is deployed: "CHART" names a chart of this
	// application, "APP/CHART" one of another application.
	Chart string `json:"chart,omitempty"`
}

// The gate fields' names, as written in a manifest (GateNames lists them).
const (
	GateNodesLabelled = "nodesLabelled"
	GateCephPools     = "cephPools"
	GateCephUsers     = "cephUsers"
	GateDPDK          = "dpdk"
	GateChart         = "chart"
)

// NodesGate is a NodesLabelled gate.
type NodesGate struct {
	// Label is "key=value" (or "key" for any value), e.g. openstack-compute-node=enabled.
	Label string `json:"label"`
	// Min is how many Ready nodes must carry it. Default 1.
	Min int `json:"min,omitempty"`
}

// Chart is one Helm release of an application.
type Chart struct {
	// Name identifies the chart, unique in the application (not only its group).
	Name   string      `json:"name"`
	Source ChartSource `json:"source"`
	// Release is the Helm release name. Default: the chart's name.
	Release string `json:"release,omitempty"`
	// Namespace the release is installed in (created if missing). Default openstack.
	Namespace string `json:"namespace,omitempty"`
	// Values are the application's own values for the chart: above the chart's
	// defaults, below the system overrides Plinth generates and the operator's
	// `app override set` values.
	Values map[string]any `json:"values,omitempty"`
	Wait   ChartWait      `json:"wait,omitempty"`
	// Protected keeps a failed release for inspection: Plinth never uninstalls or
	// reinstalls it to recover; the operator repairs and re-applies.
	Protected bool `json:"protected,omitempty"`
	// Tests runs the chart's Helm tests after each install or upgrade.
	Tests bool `json:"tests,omitempty"`
	// Remediation is what a failed or interrupted release gets before the next
	// attempt: rollback (to the last deployed revision, default) or reinstall.
	Remediation string `json:"remediation,omitempty"`
}

// ChartSource says where a chart comes from. Exactly one field is set.
type ChartSource struct {
	// Archive is a chart archive (.tgz) uploaded with the application, named by its
	// file name; `app upload` reads it relative to the application file.
	Archive string `json:"archive,omitempty"`
	// OCI is an OCI reference, e.g. oci://registry.example/charts/keystone:0.3.1.
	OCI string `json:"oci,omitempty"`
	// Repo is a chart repository URL; Chart and Version pick the chart in it.
	Repo    string `json:"repo,omitempty"`
	Chart   string `json:"chart,omitempty"`
	Version string `json:"version,omitempty"`
}

// ChartWait is how an install or upgrade decides it has worked.
type ChartWait struct {
	// For is which resources must be ready: all (default: every resource of the
	// release, kstatus-style), hooks (only hooks; the rest need only be accepted).
	For string `json:"for,omitempty"`
	// TimeoutSeconds bounds the wait. Default 300.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// MinReadySeconds: once ready, the release must stay ready this long. Default 0.
	MinReadySeconds int `json:"minReadySeconds,omitempty"`
}

// Chart wait and remediation values.
const (
	WaitAll             = "all"
	WaitHooks           = "hooks"
	RemediateRollback   = "rollback"
	RemediateReinstall  = "reinstall"
	DefaultChartTimeout = 300
	// DefaultChartNamespace is where a chart's release goes when it names none.
	DefaultChartNamespace = "openstack"
)

// Limits on what an application upload may store in the replicated state.
const (
	MaxChartArchiveBytes = 1 << 20
	MaxUploadBytes       = 8 << 20
	MaxChartsPerApp      = 200
)

// Application states, StarlingX style. An application is uploaded, then applied; a
// failed apply stays apply-failed (with a condition saying why and what to try)
// until it is applied again or removed.
const (
	AppUploaded     = "uploaded"
	AppApplying     = "applying"
	AppApplied      = "applied"
	AppApplyFailed  = "apply-failed"
	AppRemoving     = "removing"
	AppRemoveFailed = "remove-failed"
)

// Chart states in an application's status.
const (
	ChartPending  = "pending"  // not started: an earlier group or chart is first
	ChartWaiting  = "waiting"  // its group's gates are not met (WaitingFor says which)
	ChartApplying = "applying" // install or upgrade running
	ChartDeployed = "deployed"
	ChartFailed   = "failed"
	ChartRemoving = "removing"
	ChartRemoved  = "removed"
)

// ApplicationStatus is an application's observed state, written by the leader
// coordinator as it works (and replicated, so a new leader resumes from it).
type ApplicationStatus struct {
	State string `json:"state"`
	// Generation is the spec generation being applied; ObservedGeneration the last
	// one applied fully.
	Generation         int64       `json:"generation,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Conditions         []Condition `json:"conditions,omitempty"`
	// Progress says what is happening now, e.g. "group infra: waiting for nodes".
	Progress string        `json:"progress,omitempty"`
	Charts   []ChartStatus `json:"charts,omitempty"`
}

// ChartStatus is one chart's part of an application's status.
type ChartStatus struct {
	Group     string `json:"group"`
	Chart     string `json:"chart"`
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	Revision  int    `json:"revision,omitempty"`
	State     string `json:"state"`
	// WaitingFor says which gate holds the chart's group, while State is waiting.
	WaitingFor string `json:"waitingFor,omitempty"`
	// Message is the last error (or recovery done) for this release.
	Message      string    `json:"message,omitempty"`
	ChartDigest  string    `json:"chartDigest,omitempty"`
	ValuesDigest string    `json:"valuesDigest,omitempty"`
	Updated      time.Time `json:"updated,omitempty"`
}
