package api

// KubernetesSpec is the Kubernetes cluster Plinth bootstraps with kubeadm: the control
// plane on the controllers behind a virtual IP, a 3-member etcd on the controllers and
// the witness, workers joined with a coordinator-generated token, and OpenStack-Helm
// node labels. docs/kubernetes.md explains each field and the steps it produces.
//
// Unset fields take the defaults below when the planner renders the spec
// (KubernetesSpec.Effective); the stored manifest keeps them unset.
type KubernetesSpec struct {
	// Version of Kubernetes, e.g. v1.37.2 (v1.31 or newer: Plinth writes kubeadm v1beta4).
	Version string `json:"version,omitempty"`
	// ControlPlaneVIP is the address the controllers share for the API server, held by
	// vipProvider. Without one the API endpoint is the first controller's own address,
	// which does not survive its loss.
	ControlPlaneVIP string `json:"controlPlaneVIP,omitempty"`
	// APIServerPort is the API server's port on every controller and on the VIP.
	APIServerPort int `json:"apiServerPort,omitempty"`
	// PodSubnet is the CIDR pod addresses come from.
	PodSubnet string `json:"podSubnet,omitempty"`
	// ServiceSubnet is the CIDR Service cluster IPs come from.
	ServiceSubnet string `json:"serviceSubnet,omitempty"`
	// DNSDomain is the Services' DNS domain.
	DNSDomain string `json:"dnsDomain,omitempty"`
	// ImageRepository holds the control-plane images; an air-gapped site points it at
	// its local registry (e.g. registry.local:5000/k8s).
	ImageRepository string `json:"imageRepository,omitempty"`
	// CertSANs are extra names and addresses for the API server certificate (the VIP,
	// the controllers' addresses and their names are always included).
	CertSANs []string `json:"certSANs,omitempty"`
	// CRISocket is containerd's CRI endpoint.
	CRISocket string `json:"criSocket,omitempty"`
	// ProxyMode is kube-proxy's: nftables, iptables or ipvs.
	ProxyMode string `json:"proxyMode,omitempty"`
	// SchedulableControllers leaves the controllers without the control-plane taint, so
	// they run the OpenStack control plane too (StarlingX all-in-one style).
	SchedulableControllers bool `json:"schedulableControllers,omitempty"`
	// DPDKReservedCPUs is the cpuset (e.g. "0-3") kubelet keeps every pod off on worker
	// hosts when ovs.dpdk is set: the vswitch's PMD and platform cores.
	DPDKReservedCPUs string `json:"dpdkReservedCPUs,omitempty"`
	// BootstrapTokenTTLHours is how long a join token stays valid in the cluster.
	BootstrapTokenTTLHours int `json:"bootstrapTokenTTLHours,omitempty"`
	// CredentialsGeneration rotates the bootstrap token and the control-plane
	// certificate key: bump it and the coordinator generates new ones.
	CredentialsGeneration int `json:"credentialsGeneration,omitempty"`
	// VIPProvider holds controlPlaneVIP: keepalived (the default: VRRP between the two
	// controllers, a systemd unit) or kube-vip (a static pod; the site ships its image).
	// A manifest that sets kubeVIPImage and no provider means kube-vip.
	VIPProvider string `json:"vipProvider,omitempty"`
	// KubeVIPImage is the kube-vip image; by default it comes from imageRepository when
	// that is set, else from ghcr.io.
	KubeVIPImage string `json:"kubeVIPImage,omitempty"`
	// Etcd is the 3-member etcd Plinth runs on the controllers and the witness.
	Etcd EtcdSpec `json:"etcd,omitempty"`
	// CNI is the pod network, applied from a manifest the site ships.
	CNI CNISpec `json:"cni,omitempty"`
	// Nodes holds per-host Kubernetes settings; hosts not listed take the site's.
	Nodes []KubernetesNode `json:"nodes,omitempty"`
	// Containerd configures the container runtime on every Kubernetes host; kubelet
	// takes its cgroup driver from here (see containerd.go).
	Containerd *ContainerdSpec `json:"containerd,omitempty"`
	// Bundle is the site bundle (make bundle) whose Kubernetes binaries, etcd and CNI
	// plugins the kube.binaries step installs on every Kubernetes host. Without it the
	// site ships those binaries itself and no kube.binaries step is planned.
	Bundle *BundleRef `json:"bundle,omitempty"`
}

// BundleRef names one site bundle, as the install script unpacked it on every host
// (under /opt/plinth/bundle/VERSION). Changing it is a planned change: every host's
// kube.binaries step runs again.
type BundleRef struct {
	// Version is the bundle's version (its manifest's "version").
	Version string `json:"version"`
	// SHA256 optionally pins the bundle's manifest.json (hex); the manifest in turn pins
	// every file of the bundle, so a host with a different bundle of the same version
	// refuses to install from it. `plinth-bundle show FILE` prints it.
	SHA256 string `json:"sha256,omitempty"`
}

// EtcdSpec says where etcd runs on its three hosts (a systemd unit Plinth manages).
type EtcdSpec struct {
	// Binary is the etcd executable the site ships on the controllers and witness.
	Binary string `json:"binary,omitempty"`
	// DataDir holds the member's data.
	DataDir string `json:"dataDir,omitempty"`
	// ClientPort and PeerPort are etcd's client and peer ports on its hosts.
	ClientPort int `json:"clientPort,omitempty"`
	PeerPort   int `json:"peerPort,omitempty"`
}

// CNI plugins.
const (
	CNICalico  = "calico"
	CNIFlannel = "flannel"
	CNINone    = "none"
)

// CNISpec names the pod network plugin and the manifest that installs it.
type CNISpec struct {
	// Plugin is calico (applied from Manifest), flannel (the site bundle's flanneld,
	// VXLAN over podSubnet; Plinth renders its manifest) or none (the site installs
	// one itself).
	Plugin string `json:"plugin,omitempty"`
	// Manifest is the path of the plugin's YAML on the first controller (calico only).
	Manifest string `json:"manifest,omitempty"`
}

// KubernetesNode is one host's Kubernetes settings.
type KubernetesNode struct {
	// Host names the Host document these settings are for.
	Host string `json:"host"`
	// SRIOV labels the node sriov=enabled for the SR-IOV agent.
	SRIOV bool `json:"sriov,omitempty"`
	// ReservedCPUs overrides dpdkReservedCPUs on this host.
	ReservedCPUs string `json:"reservedCPUs,omitempty"`
	// Taints are extra taints, "key=value:Effect" or "key:Effect".
	Taints []string `json:"taints,omitempty"`
}

// Kubernetes defaults.
const (
	DefaultKubernetesVersion  = "v1.37.2"
	DefaultAPIServerPort      = 6443
	DefaultDNSDomain          = "cluster.local"
	DefaultCRISocket          = "unix:///run/containerd/containerd.sock"
	DefaultProxyMode          = "nftables"
	DefaultBootstrapTokenTTLH = 24
	DefaultKubeVIPImage       = "ghcr.io/kube-vip/kube-vip:v0.9.2"
	DefaultEtcdBinary         = "/usr/local/bin/etcd"
	DefaultEtcdDataDir        = "/var/lib/plinth-etcd"
	DefaultEtcdClientPort     = 2379
	DefaultEtcdPeerPort       = 2380
	DefaultCNIManifest        = "/etc/plinth/cni/calico.yaml"
)

// Effective returns the spec with every zero field set to its default, as the planner
// renders it. The stored manifest keeps the operator's zeros.
func (k KubernetesSpec) Effective() KubernetesSpec {
	setString(&k.Version, DefaultKubernetesVersion)
	setInt(&k.APIServerPort, DefaultAPIServerPort)
	setString(&k.PodSubnet, DefaultPodSubnet)
	setString(&k.ServiceSubnet, DefaultServiceSubnet)
	setString(&k.DNSDomain, DefaultDNSDomain)
	if k.VIPProvider == "" {
		k.VIPProvider = VIPKeepalived
		if k.KubeVIPImage != "" {
			k.VIPProvider = VIPKubeVIP
		}
	}
	if k.KubeVIPImage == "" && k.ImageRepository != "" {
		k.KubeVIPImage = k.ImageRepository + "/kube-vip:" + DefaultKubeVIPImage[len("ghcr.io/kube-vip/kube-vip:"):]
	}
	setString(&k.ImageRepository, DefaultImageRepository)
	setString(&k.KubeVIPImage, DefaultKubeVIPImage)
	setString(&k.CRISocket, DefaultCRISocket)
	setString(&k.ProxyMode, DefaultProxyMode)
	setInt(&k.BootstrapTokenTTLHours, DefaultBootstrapTokenTTLH)
	setString(&k.Etcd.Binary, DefaultEtcdBinary)
	setString(&k.Etcd.DataDir, DefaultEtcdDataDir)
	setInt(&k.Etcd.ClientPort, DefaultEtcdClientPort)
	setInt(&k.Etcd.PeerPort, DefaultEtcdPeerPort)
	setString(&k.CNI.Plugin, CNICalico)
	if k.CNI.Plugin == CNICalico {
		setString(&k.CNI.Manifest, DefaultCNIManifest)
	}
	return k
}

// Node returns the settings of host, or a zero KubernetesNode.
func (k KubernetesSpec) Node(host string) KubernetesNode {
	for _, n := range k.Nodes {
		if n.Host == host {
			return n
		}
	}
	return KubernetesNode{Host: host}
}
