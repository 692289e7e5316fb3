package kubeinstall

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubeadm.k8s.io/v1beta4 types Plinth writes: a faithful subset of
// k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4 (same JSON names), which
// cannot be imported here. `kubeadm config validate` in the tests keeps them honest.

// KubeadmAPIVersion is the only kubeadm configuration version Plinth writes.
const KubeadmAPIVersion = "kubeadm.k8s.io/v1beta4"

// InitConfiguration is kubeadm init's node-specific part.
type InitConfiguration struct {
	metav1.TypeMeta  `json:",inline"`
	BootstrapTokens  []BootstrapToken        `json:"bootstrapTokens,omitempty"`
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration"`
	LocalAPIEndpoint APIEndpoint             `json:"localAPIEndpoint"`
	CertificateKey   string                  `json:"certificateKey,omitempty"`
	SkipPhases       []string                `json:"skipPhases,omitempty"`
	Patches          *Patches                `json:"patches,omitempty"`
}

// ClusterConfiguration is what every control-plane node shares.
type ClusterConfiguration struct {
	metav1.TypeMeta      `json:",inline"`
	Etcd                 Etcd                  `json:"etcd"`
	Networking           Networking            `json:"networking"`
	KubernetesVersion    string                `json:"kubernetesVersion"`
	ControlPlaneEndpoint string                `json:"controlPlaneEndpoint,omitempty"`
	APIServer            APIServer             `json:"apiServer,omitempty"`
	ControllerManager    ControlPlaneComponent `json:"controllerManager,omitempty"`
	Scheduler            ControlPlaneComponent `json:"scheduler,omitempty"`
	CertificatesDir      string                `json:"certificatesDir,omitempty"`
	ImageRepository      string                `json:"imageRepository,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
}

// JoinConfiguration is kubeadm join's.
type JoinConfiguration struct {
	metav1.TypeMeta  `json:",inline"`
	NodeRegistration NodeRegistrationOptions `json:"nodeRegistration"`
	CACertPath       string                  `json:"caCertPath,omitempty"`
	Discovery        Discovery               `json:"discovery"`
	ControlPlane     *JoinControlPlane       `json:"controlPlane,omitempty"`
	SkipPhases       []string                `json:"skipPhases,omitempty"`
	Patches          *Patches                `json:"patches,omitempty"`
}

// BootstrapToken is a token kubeadm init creates. Token is "[a-z0-9]{6}.[a-z0-9]{16}".
type BootstrapToken struct {
	Token       string           `json:"token"`
	Description string           `json:"description,omitempty"`
	TTL         *metav1.Duration `json:"ttl,omitempty"`
	Usages      []string         `json:"usages,omitempty"`
	Groups      []string         `json:"groups,omitempty"`
}

// NodeRegistrationOptions registers the node. Taints is never omitted: kubeadm reads
// a missing list as "the default control-plane taint" and an empty one as "none".
type NodeRegistrationOptions struct {
	Name                  string         `json:"name,omitempty"`
	CRISocket             string         `json:"criSocket,omitempty"`
	Taints                []corev1.Taint `json:"taints"`
	KubeletExtraArgs      []Arg          `json:"kubeletExtraArgs,omitempty"`
	IgnorePreflightErrors []string       `json:"ignorePreflightErrors,omitempty"`
	ImagePullPolicy       string         `json:"imagePullPolicy,omitempty"`
}

// APIEndpoint is where a control-plane node's API server listens.
type APIEndpoint struct {
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`
	BindPort         int32  `json:"bindPort,omitempty"`
}

// Networking holds the cluster's subnets and DNS domain.
type Networking struct {
	ServiceSubnet string `json:"serviceSubnet,omitempty"`
	PodSubnet     string `json:"podSubnet,omitempty"`
	DNSDomain     string `json:"dnsDomain,omitempty"`
}

// Etcd: Plinth always uses external etcd (its own 3-member cluster).
type Etcd struct {
	External *ExternalEtcd `json:"external,omitempty"`
}

// ExternalEtcd says how the API server reaches etcd.
type ExternalEtcd struct {
	Endpoints []string `json:"endpoints"`
	CAFile    string   `json:"caFile"`
	CertFile  string   `json:"certFile"`
	KeyFile   string   `json:"keyFile"`
}

// ControlPlaneComponent carries extra flags.
type ControlPlaneComponent struct {
	ExtraArgs []Arg `json:"extraArgs,omitempty"`
}

// APIServer adds certificate SANs.
type APIServer struct {
	ControlPlaneComponent `json:",inline"`
	CertSANs              []string `json:"certSANs,omitempty"`
}

// Arg is one extra flag.
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Discovery finds and pins the cluster.
type Discovery struct {
	BootstrapToken    *BootstrapTokenDiscovery `json:"bootstrapToken,omitempty"`
	TLSBootstrapToken string                   `json:"tlsBootstrapToken,omitempty"`
}

// BootstrapTokenDiscovery validates cluster-info with the token and CA hash.
type BootstrapTokenDiscovery struct {
	Token             string   `json:"token"`
	APIServerEndpoint string   `json:"apiServerEndpoint,omitempty"`
	CACertHashes      []string `json:"caCertHashes,omitempty"`
}

// JoinControlPlane makes a join a control-plane join.
type JoinControlPlane struct {
	LocalAPIEndpoint APIEndpoint `json:"localAPIEndpoint"`
	CertificateKey   string      `json:"certificateKey,omitempty"`
}

// Patches points kubeadm at per-node patches (here: kubelet's reserved CPUs).
type Patches struct {
	Directory string `json:"directory,omitempty"`
}

// The component configurations Plinth hands kubeadm with init: the fields it sets of
// kubelet.config.k8s.io/v1beta1 and kubeproxy.config.k8s.io/v1alpha1 (same JSON
// names). Importing the upstream types linked component-base's feature gates and
// metrics registry into every drivers process, whose package init then cost about
// 7 ms on each step and drift pass.

// KubeletConfiguration is the part of kubelet's configuration Plinth sets.
type KubeletConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	CgroupDriver    string            `json:"cgroupDriver,omitempty"`
	EvictionHard    map[string]string `json:"evictionHard,omitempty"`
	FailCgroupV1    *bool             `json:"failCgroupV1,omitempty"`
}

// KubeProxyConfiguration is the part of kube-proxy's configuration Plinth sets.
type KubeProxyConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	Mode            string                          `json:"mode"`
	ClusterCIDR     string                          `json:"clusterCIDR"`
	Conntrack       KubeProxyConntrackConfiguration `json:"conntrack"`
}

// KubeProxyConntrackConfiguration is kube-proxy's conntrack tuning; nil leaves
// kube-proxy's default.
type KubeProxyConntrackConfiguration struct {
	MaxPerCore            *int32           `json:"maxPerCore"`
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
	TCPCloseWaitTimeout   *metav1.Duration `json:"tcpCloseWaitTimeout"`
}
