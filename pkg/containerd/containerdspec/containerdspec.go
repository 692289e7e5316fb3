// Package containerdspec holds the contract between the planner and the containerd
// drivers: the step kinds and the inputs the planner renders for them.
//
// It is kept apart from the drivers so that the coordinator can render containerd
// steps without linking the containerd client. It imports no driver and must never
// do I/O.
package containerdspec

// Step kinds.
const (
	// KindConfig writes containerd's config and registry mirrors and restarts the
	// daemon when they changed.
	KindConfig = "containerd.config"
	// KindImport imports image archives into containerd's k8s.io namespace.
	KindImport = "images.import"
)

// Namespace is the containerd namespace the CRI (and so the kubelet) uses.
const Namespace = "k8s.io"

// ConfigInputs is what a containerd.config step wants. Where containerd keeps its
// files and socket is the host's business (the driver's options), not the plan's.
type ConfigInputs struct {
	SandboxImage string `json:"sandboxImage"`
	// CgroupDriver is "systemd" or "cgroupfs".
	CgroupDriver string `json:"cgroupDriver"`
	Snapshotter  string `json:"snapshotter"`
	// Mirrors are sorted by Registry; each becomes certs.d/<registry>/hosts.toml.
	Mirrors []Mirror `json:"mirrors,omitempty"`
}

// Mirror lists the mirrors tried, in order, before one registry ("_default": any).
type Mirror struct {
	Registry   string   `json:"registry"`
	Endpoints  []string `json:"endpoints"`
	SkipVerify bool     `json:"skipVerify,omitempty"`
}

// ImportInputs is what an images.import step wants.
type ImportInputs struct {
	// Snapshotter is the one the CRI uses, so imported images are unpacked for it.
	Snapshotter string    `json:"snapshotter"`
	Archives    []Archive `json:"archives,omitempty"`
	// Bundle, when set, also imports every image archive of that site bundle version
	// (pkg/bundle), each pinned by the sum in the bundle's manifest.
	Bundle string `json:"bundle,omitempty"`
	// BundleSHA256 pins the bundle's manifest.json, or is empty.
	BundleSHA256 string `json:"bundleSHA256,omitempty"`
	// SkipBundleImages are bundle image components this host does not need (a worker
	// skips the control plane's), by name; the rest of the bundle's images are imported.
	SkipBundleImages []string `json:"skipBundleImages,omitempty"`
}

// Archive is one image tarball on the host; Digest ("sha256:…", optional) pins it.
type Archive struct {
	Path   string `json:"path"`
	Digest string `json:"digest,omitempty"`
}
