// Package kubespec is the contract between the planner and the Kubernetes drivers:
// the step kinds, their inputs, and the names of the secrets they reference.
//
// It is plain data on purpose. The planner (pure, run inside Raft's Apply) imports it
// without pulling client-go or kubeadm's types into the coordinator; pkg/kubeinstall
// turns these inputs into kubeadm configuration on the agent. It must never do I/O.
package kubespec

import "time"

// CertWarnBefore is how long before expiry kubeadm's control-plane certificates
// (one year by default) are reported: by the drivers on every check, and as the
// controller's KubeCertificatesExpiring condition.
const CertWarnBefore = 30 * 24 * time.Hour

// Step kinds, in dependency order.
const (
	KindBinaries         = "kube.binaries"
	KindVIP              = "kube.vip"
	KindEtcd             = "kube.etcd"
	KindInit             = "kube.init"
	KindJoinControlPlane = "kube.join-control-plane"
	KindJoin             = "kube.join"
	KindCNI              = "kube.cni"
	KindLabels           = "kube.labels"
	KindHealth           = "kube.health"
)

// Outputs of kube.init, sealed by the coordinator as secretref.OutputName(<host>/kube.init, <key>).
const (
	// OutputAdminConf is the admin kubeconfig (cluster-admin through the VIP).
	OutputAdminConf = "admin.conf"
	// OutputCACertHash is "sha256:<hex>" of the cluster CA's public key, which joining
	// nodes pin during discovery.
	OutputCACertHash = "ca-cert-hash"
)

// Taint is a node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Cluster is what every node's kubeadm configuration shares.
type Cluster struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Endpoint is the control-plane endpoint, "VIP:port" (or the first controller's).
	Endpoint        string   `json:"endpoint"`
	PodSubnet       string   `json:"podSubnet"`
	ServiceSubnet   string   `json:"serviceSubnet"`
	DNSDomain       string   `json:"dnsDomain"`
	ImageRepository string   `json:"imageRepository"`
	CertSANs        []string `json:"certSANs,omitempty"`
	CgroupDriver    string   `json:"cgroupDriver"`
	CRISocket       string   `json:"criSocket"`
	ProxyMode       string   `json:"proxyMode"`
	// EtcdEndpoints are the client URLs of Plinth's etcd members (external etcd).
	EtcdEndpoints []string `json:"etcdEndpoints"`
	// VIP says Endpoint is the control-plane VIP, which kube.vip holds before kubeadm runs.
	VIP bool `json:"vip,omitempty"`
}

// Node is one node's registration.
type Node struct {
	Name string `json:"name"`
	// IP is the node's cluster-host address: kubelet's node-ip and, on controllers, the
	// API server's advertise address.
	IP     string  `json:"ip"`
	Taints []Taint `json:"taints"`
	// ReservedCPUs is the cpuset kubelet keeps pods off (DPDK vswitch cores).
	ReservedCPUs string `json:"reservedCPUs,omitempty"`
}

// BinariesInputs installs programs from the site bundle the install script unpacked
// on the host (pkg/bundle): each is checked against the bundle's manifest, and the
// manifest against SHA256 when the site pins it.
type BinariesInputs struct {
	// Bundle is the bundle version; its directory is <bundle root>/<Bundle>.
	Bundle string `json:"bundle"`
	// SHA256 pins the bundle's manifest.json (hex), or is empty.
	SHA256 string `json:"sha256,omitempty"`
	// Binaries are the bundle's binary components this host needs, by name (kubelet,
	// kubeadm, kubectl on nodes; etcd, etcdctl on etcd members), sorted.
	Binaries []string `json:"binaries"`
	// CNIPlugins installs every CNI plugin of the bundle (nodes).
	CNIPlugins bool `json:"cniPlugins,omitempty"`
	// Kubelet installs kubelet's systemd unit and kubeadm's drop-in, and enables it.
	Kubelet bool `json:"kubelet,omitempty"`
}

// VIP providers: who holds the control-plane VIP on the controllers.
const (
	// VIPKeepalived runs keepalived (VRRP, unicast between the two controllers) as a
	// systemd unit; the default.
	VIPKeepalived = "keepalived"
	// VIPKubeVIP runs the kube-vip static pod (ARP, leader election through the API).
	VIPKubeVIP = "kube-vip"
)

// keepalived priorities and the weight of its API check. The first controller wins
// while both APIs answer and while neither does (before kubeadm init, when the VIP
// must already be up for init to reach its own API), and loses to the second when
// only its own API is dead: PriorityFirst-CheckWeight < PrioritySecond < PriorityFirst.
const (
	KeepalivedPriorityFirst  = 150
	KeepalivedPrioritySecond = 100
	KeepalivedCheckWeight    = 60
)

// VIPInputs holds the control-plane VIP on a controller.
type VIPInputs struct {
	// Provider is VIPKeepalived or VIPKubeVIP; empty means kube-vip (steps planned
	// before there was a choice).
	Provider  string `json:"provider,omitempty"`
	VIP       string `json:"vip"`
	Port      int    `json:"port"`
	Interface string `json:"interface"`
	// Image is kube-vip's.
	Image string `json:"image,omitempty"`
	// FirstControlPlane uses super-admin.conf (kube-vip): on the node that runs
	// kubeadm init, admin.conf has no rights until init has bound it.
	FirstControlPlane bool `json:"firstControlPlane,omitempty"`

	// keepalived: RouterID is VRRP's virtual_router_id (1..255, from the site name),
	// Priority this controller's (KeepalivedPriority*), Address its own address for
	// unicast VRRP and Peers the other controller's.
	RouterID int      `json:"routerID,omitempty"`
	Priority int      `json:"priority,omitempty"`
	Address  string   `json:"address,omitempty"`
	Peers    []string `json:"peers,omitempty"`
}

// EtcdMember is one member of Plinth's etcd.
type EtcdMember struct {
	Name       string `json:"name"`
	IP         string `json:"ip"`
	ClientPort int    `json:"clientPort"`
	PeerPort   int    `json:"peerPort"`
}

// EtcdInputs runs one etcd member as a systemd unit.
type EtcdInputs struct {
	Member EtcdMember `json:"member"`
	// Members is the whole desired membership, this member included.
	Members []EtcdMember `json:"members"`
	// ClusterToken is etcd's initial-cluster-token.
	ClusterToken string `json:"clusterToken"`
	// CA references the etcd CA (certificate and key, PEM) the coordinator generated.
	CA      string `json:"ca"`
	DataDir string `json:"dataDir"`
	Binary  string `json:"binary"`
	// APIServerClient also issues the API server's etcd client certificate (controllers).
	APIServerClient bool `json:"apiServerClient,omitempty"`
	// Note says what this topology survives, e.g. that it is not fault tolerant.
	Note string `json:"note,omitempty"`
}

// InitInputs runs kubeadm init on the first controller.
type InitInputs struct {
	Cluster Cluster `json:"cluster"`
	Node    Node    `json:"node"`
	// Token references the bootstrap token "[a-z0-9]{6}.[a-z0-9]{16}".
	Token    string `json:"token"`
	TokenTTL string `json:"tokenTTL"`
	// CertificateKey references the key that encrypts the uploaded control-plane
	// certificates (64 hex digits).
	CertificateKey string `json:"certificateKey"`
	// ControlPlanes and Workers are the nodes that join after init; the token (and the
	// uploaded certificates, for control planes) must stay available until each is a Node.
	ControlPlanes []string `json:"controlPlanes,omitempty"`
	Workers       []string `json:"workers,omitempty"`
	Note          string   `json:"note,omitempty"`
}

// JoinInputs runs kubeadm join on a worker or a second controller.
type JoinInputs struct {
	Cluster    Cluster `json:"cluster"`
	Node       Node    `json:"node"`
	Token      string  `json:"token"`
	CACertHash string  `json:"caCertHash"`
	// ControlPlane joins as a control-plane node, with the certificate key.
	ControlPlane   bool   `json:"controlPlane,omitempty"`
	CertificateKey string `json:"certificateKey,omitempty"`
}

// The OpenStack-Helm node labels Plinth puts on nodes (kube.labels) and that
// applications select nodes by (pkg/appplan), each with LabelEnabled as its value.
const (
	LabelControlPlane = "openstack-control-plane"
	LabelCompute      = "openstack-compute-node"
	LabelOpenvswitch  = "openvswitch"
	LabelSRIOV        = "sriov"
	LabelEnabled      = "enabled"
)

// LabelsInputs applies one node's Plinth-owned labels and taints.
type LabelsInputs struct {
	Node   string            `json:"node"`
	Labels map[string]string `json:"labels"`
	Taints []Taint           `json:"taints"`
	// Kubeconfig references the admin kubeconfig kube.init produced.
	Kubeconfig string `json:"kubeconfig"`
}

// HealthInputs checks the cluster from the first controller: the API answers through
// the control-plane endpoint and every expected node is Ready. It changes nothing.
type HealthInputs struct {
	// Endpoint is the control-plane endpoint as a URL, "https://VIP:port".
	Endpoint string `json:"endpoint"`
	// VIP says Endpoint is the virtual IP (else the first controller's own address).
	VIP bool `json:"vip,omitempty"`
	// Nodes are the node names that must be registered and Ready.
	Nodes []string `json:"nodes"`
	// Kubeconfig references the admin kubeconfig kube.init produced.
	Kubeconfig string `json:"kubeconfig"`
}

// CNIInputs applies the pod network's manifest: the file the site ships (Manifest,
// calico), or for flannel the one the driver renders from Flannel.
type CNIInputs struct {
	Plugin     string         `json:"plugin"`
	Manifest   string         `json:"manifest,omitempty"`
	Flannel    *FlannelInputs `json:"flannel,omitempty"`
	Kubeconfig string         `json:"kubeconfig"`
}

// FlannelInputs are what the flannel manifest is rendered from.
type FlannelInputs struct {
	// Network is the pod network (kubeadm's podSubnet), from which
	// kube-controller-manager gives every node its podCIDR.
	Network string `json:"network"`
	// Image runs flanneld; it comes from the site bundle (images.import), never pulled.
	Image string `json:"image"`
}
