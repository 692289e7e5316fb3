package bundle

import (
	"path"
	"slices"
)

// Pins are the upstream versions a bundle is built from, each proven together on the
// project's machines. scripts/build-bundle.sh reads them from `plinth-bundle pins`,
// so this is the one place to change a version.
type Pins struct {
	Kubernetes string // kubelet, kubeadm, kubectl and the control-plane images
	Etcd       string // etcd and etcdctl (kubeadm 1.37 expects 3.7)
	CNIPlugins string // containernetworking/plugins
	CoreDNS    string
	Pause      string // the sandbox image's tag (kubeadm's expected pause version)
	Hello      string // the tiny test web server's image tag
	// Flannel is github.com/flannel-io/flannel, whose packages the bundle's flanneld
	// (deploy/bundle/flanneld, its go.mod requires this version; a test checks) is
	// built from; it tags the flannel image.
	Flannel string
}

// DefaultPins is what `make bundle` builds. Kubernetes matches
// api.DefaultKubernetesVersion and Pause api.DefaultPauseImage (a test checks).
var DefaultPins = Pins{
	Kubernetes: "v1.37.2",
	Etcd:       "v3.7.0",
	CNIPlugins: "v1.9.0",
	CoreDNS:    "v1.14.6",
	Pause:      "3.10.2",
	Hello:      "v1",
	Flannel:    "v0.28.10",
}

// Bundled component names, by kind.
var (
	KubeBinaries = []string{"kubelet", "kubeadm", "kubectl"}
	EtcdBinaries = []string{"etcd", "etcdctl"}
	CNIPlugins   = []string{"bridge", "host-local", "loopback", "portmap"}
	// ControlPlaneImages run the control plane: only controllers import them.
	ControlPlaneImages = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	// KubeImages are Kubernetes' own images, tagged with the Kubernetes version.
	KubeImages = append(slices.Clone(ControlPlaneImages), "kube-proxy")
)

// Image component names that are not Kubernetes' own.
const (
	PauseImage   = "pause"
	CoreDNSImage = "coredns"
	HelloImage   = "hello"
	// FlannelImage runs flanneld, the pod network agent of the flannel CNI.
	FlannelImage = "flannel"
)

// Debian package names; each bundle holds one of each at the Plinth version.
const (
	AgentDeb       = "plinth-agent"
	CoordinatorDeb = "plinth-coordinator"
)

// DebPath is the bundle path of a Plinth package at a Debian version.
func DebPath(pkg, debVersion string) string {
	return path.Join(DebDir, pkg+"_"+debVersion+"_amd64.deb")
}

// Components lists every component built from upstream at these pins, without sums
// and sizes (which Assemble fills in). Debian packages are not included: they come
// from `make packages` at the Plinth version (DebComponents).
func (p Pins) Components() []Component {
	var cs []Component
	add := func(k Kind, name, version string) {
		c := Component{Name: name, Kind: k, Version: version, Path: path.Join(k.Dir(), name)}
		if k == KindImage {
			c.Path += ".tar"
			c.Image = ImageRef(name, version)
		}
		cs = append(cs, c)
	}
	for _, n := range KubeBinaries {
		add(KindBinary, n, p.Kubernetes)
	}
	for _, n := range EtcdBinaries {
		add(KindBinary, n, p.Etcd)
	}
	for _, n := range CNIPlugins {
		add(KindCNI, n, p.CNIPlugins)
	}
	add(KindImage, PauseImage, p.Pause)
	for _, n := range KubeImages {
		add(KindImage, n, p.Kubernetes)
	}
	add(KindImage, CoreDNSImage, p.CoreDNS)
	add(KindImage, HelloImage, p.Hello)
	add(KindImage, FlannelImage, p.Flannel)
	return cs
}

// DebComponents lists the two Plinth packages at a Debian version.
func DebComponents(debVersion string) []Component {
	var cs []Component
	for _, n := range []string{AgentDeb, CoordinatorDeb} {
		cs = append(cs, Component{Name: n, Kind: KindDeb, Version: debVersion, Path: DebPath(n, debVersion)})
	}
	return cs
}
