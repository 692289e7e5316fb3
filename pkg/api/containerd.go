package api

import "maps"

// Defaults for containerd, applied by EffectiveContainerd.
const (
	// DefaultPauseImage is the sandbox image kubeadm 1.37 expects, under an image
	// repository (kubernetes.imageRepository, else DefaultImageRepository).
	DefaultPauseImage      = "pause:3.10.2"
	DefaultImageRepository = "registry.k8s.io"
	DefaultCgroupDriver    = CgroupSystemd
	DefaultSnapshotter     = "overlayfs"
)

// Cgroup drivers; the kubelet must use the same one as containerd.
const (
	CgroupSystemd  = "systemd"
	CgroupCgroupfs = "cgroupfs"
)

// DefaultMirrorRegistry is the mirrors key that applies to every registry without
// its own entry (containerd's certs.d/_default).
const DefaultMirrorRegistry = "_default"

// ContainerdSpec configures containerd, the container runtime on every Kubernetes
// host: the pod sandbox image, registry mirrors, the cgroup driver and snapshotter,
// and image archives loaded from disk so that no host needs the internet.
type ContainerdSpec struct {
	// SandboxImage is the pause image run for every pod. Default
	// <imageRepository>/pause:3.10.2.
	SandboxImage string `json:"sandboxImage,omitempty"`
	// CgroupDriver is "systemd" (default) or "cgroupfs".
	CgroupDriver string `json:"cgroupDriver,omitempty"`
	// Snapshotter stores unpacked layers. Default overlayfs.
	Snapshotter string `json:"snapshotter,omitempty"`
	// Mirrors maps a registry host[:port] as images name it (docker.io,
	// registry.k8s.io) or "_default" to the mirrors tried before it.
	Mirrors map[string]RegistryMirror `json:"mirrors,omitempty"`
	// ImageArchives are image tarballs (docker save or OCI layout) already present on
	// every host; they are imported into containerd's k8s.io namespace.
	ImageArchives []ImageArchive `json:"imageArchives,omitempty"`
}

// RegistryMirror lists the mirrors of one registry.
type RegistryMirror struct {
	// Endpoints are mirror URLs (https://mirror.example:5000), tried in order before
	// the registry itself.
	Endpoints []string `json:"endpoints"`
	// SkipVerify turns off TLS certificate checks for the endpoints (labs only).
	SkipVerify bool `json:"skipVerify,omitempty"`
}

// ImageArchive is one image tarball on the hosts.
type ImageArchive struct {
	// Path is the archive's absolute path on every host.
	Path string `json:"path"`
	// Digest optionally pins the archive's content (sha256:<64 hex>): a host holding a
	// different file fails the step instead of importing it.
	Digest string `json:"digest,omitempty"`
}

// EffectiveContainerd returns the containerd settings with defaults filled in. The
// kubelet's cgroup driver and kubeadm's pause image must agree with it.
func (k *KubernetesSpec) EffectiveContainerd() ContainerdSpec {
	var c ContainerdSpec
	if k.Containerd != nil {
		c = *k.Containerd
		c.Mirrors = maps.Clone(c.Mirrors)
		c.ImageArchives = append([]ImageArchive(nil), c.ImageArchives...)
	}
	if c.SandboxImage == "" {
		repo := k.ImageRepository
		if repo == "" {
			repo = DefaultImageRepository
		}
		c.SandboxImage = repo + "/" + DefaultPauseImage
	}
	setString(&c.CgroupDriver, DefaultCgroupDriver)
	setString(&c.Snapshotter, DefaultSnapshotter)
	return c
}
