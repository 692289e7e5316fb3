package kubeinstall

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// TokenDescription marks the bootstrap tokens Plinth creates, so that rotation can
// find and delete the ones it no longer wants (and never touches anyone else's).
const TokenDescription = "plinth: bootstrap token for joining nodes"

// preflightIgnored are kubeadm checks that Plinth's own layout trips on purpose: the
// kube-vip static pod is in place before init/join, and etcd is Plinth's systemd unit.
var preflightIgnored = []string{"DirAvailable--etc-kubernetes-manifests", "ExternalEtcdVersion"}

// InitDocs is the kubeadm init configuration of the first controller.
type InitDocs struct {
	Init    InitConfiguration
	Cluster ClusterConfiguration
	Kubelet KubeletConfiguration
	Proxy   KubeProxyConfiguration
	// keepKubelet and keepProxy are fields set on purpose to a zero value (false, 0,
	// 0s), which rendering would otherwise drop as defaults.
	keepKubelet, keepProxy []string
}

// InitConfig renders kubeadm init's configuration. Secret inputs must be resolved.
func InitConfig(in kubespec.InitInputs, p Paths) (InitDocs, error) {
	ttl, err := time.ParseDuration(in.TokenTTL)
	if err != nil {
		return InitDocs{}, fmt.Errorf("kube.init: tokenTTL %q: %w", in.TokenTTL, err)
	}
	port, err := endpointPort(in.Cluster.Endpoint)
	if err != nil {
		return InitDocs{}, err
	}
	d := InitDocs{
		Init: InitConfiguration{
			TypeMeta: metav1.TypeMeta{APIVersion: KubeadmAPIVersion, Kind: "InitConfiguration"},
			BootstrapTokens: []BootstrapToken{{
				Token: in.Token, Description: TokenDescription, TTL: &metav1.Duration{Duration: ttl},
				Usages: []string{"signing", "authentication"},
				Groups: []string{"system:bootstrappers:kubeadm:default-node-token"},
			}},
			NodeRegistration: registration(in.Cluster, in.Node),
			LocalAPIEndpoint: APIEndpoint{AdvertiseAddress: in.Node.IP, BindPort: port},
			CertificateKey:   in.CertificateKey,
			Patches:          patches(in.Node, p),
		},
		Cluster: clusterConfig(in.Cluster, p),
		Kubelet: KubeletConfiguration{
			TypeMeta:     metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
			CgroupDriver: in.Cluster.CgroupDriver,
		},
		Proxy: KubeProxyConfiguration{
			TypeMeta:    metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
			Mode:        in.Cluster.ProxyMode,
			ClusterCIDR: in.Cluster.PodSubnet,
		},
	}
	return d, nil
}

// ForHost applies what the host's kind of machine forces (see pkg/hostprofile).
func (d InitDocs) ForHost(p hostprofile.Profile) InitDocs {
	d.keepKubelet, d.keepProxy = slices.Clone(d.keepKubelet), slices.Clone(d.keepProxy)
	if p.AllowCgroupV1 {
		no := false
		d.Kubelet.FailCgroupV1 = &no
		d.keepKubelet = append(d.keepKubelet, "failCgroupV1")
	}
	if len(p.KubeletEvictionHard) > 0 {
		d.Kubelet.EvictionHard = maps.Clone(p.KubeletEvictionHard)
	}
	if p.KubeProxyKeepsConntrack {
		zero := int32(0)
		d.Proxy.Conntrack.MaxPerCore = &zero
		d.Proxy.Conntrack.TCPEstablishedTimeout = &metav1.Duration{}
		d.Proxy.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{}
		d.keepProxy = append(d.keepProxy, "conntrack.maxPerCore", "conntrack.tcpEstablishedTimeout", "conntrack.tcpCloseWaitTimeout")
	}
	d.Init.NodeRegistration.IgnorePreflightErrors = withIgnores(d.Init.NodeRegistration.IgnorePreflightErrors, p)
	return d
}

// JoinForHost applies what the host's kind of machine forces to a join.
func JoinForHost(j JoinConfiguration, p hostprofile.Profile) JoinConfiguration {
	j.NodeRegistration.IgnorePreflightErrors = withIgnores(j.NodeRegistration.IgnorePreflightErrors, p)
	return j
}

func withIgnores(have []string, p hostprofile.Profile) []string {
	out := append([]string(nil), have...)
	for _, c := range p.PreflightIgnores {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// YAML renders the documents as one multi-document file.
func (d InitDocs) YAML() ([]byte, error) {
	return marshalDocs(d.Init, d.Cluster, pruned{d.Kubelet, d.keepKubelet}, pruned{d.Proxy, d.keepProxy})
}

// JoinConfig renders kubeadm join's configuration for a worker or a control plane.
func JoinConfig(in kubespec.JoinInputs, p Paths) (JoinConfiguration, error) {
	j := JoinConfiguration{
		TypeMeta:         metav1.TypeMeta{APIVersion: KubeadmAPIVersion, Kind: "JoinConfiguration"},
		NodeRegistration: registration(in.Cluster, in.Node),
		Discovery: Discovery{BootstrapToken: &BootstrapTokenDiscovery{
			Token: in.Token, APIServerEndpoint: in.Cluster.Endpoint, CACertHashes: []string{in.CACertHash},
		}},
		Patches: patches(in.Node, p),
	}
	if in.ControlPlane {
		port, err := endpointPort(in.Cluster.Endpoint)
		if err != nil {
			return JoinConfiguration{}, err
		}
		j.ControlPlane = &JoinControlPlane{
			LocalAPIEndpoint: APIEndpoint{AdvertiseAddress: in.Node.IP, BindPort: port},
			CertificateKey:   in.CertificateKey,
		}
	} else {
		j.NodeRegistration.IgnorePreflightErrors = nil
	}
	return j, nil
}

// JoinYAML renders a join configuration as a file.
func JoinYAML(j JoinConfiguration) ([]byte, error) { return marshalDocs(j) }

func clusterConfig(c kubespec.Cluster, p Paths) ClusterConfiguration {
	return ClusterConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: KubeadmAPIVersion, Kind: "ClusterConfiguration"},
		Etcd: Etcd{External: &ExternalEtcd{
			Endpoints: c.EtcdEndpoints,
			CAFile:    p.etcdFile("ca.crt"),
			CertFile:  p.etcdFile("apiserver-etcd-client.crt"),
			KeyFile:   p.etcdFile("apiserver-etcd-client.key"),
		}},
		Networking:           Networking{ServiceSubnet: c.ServiceSubnet, PodSubnet: c.PodSubnet, DNSDomain: c.DNSDomain},
		KubernetesVersion:    c.Version,
		ControlPlaneEndpoint: c.Endpoint,
		APIServer:            APIServer{CertSANs: c.CertSANs},
		CertificatesDir:      p.Join(pkiDir),
		ImageRepository:      c.ImageRepository,
		ClusterName:          c.Name,
	}
}

// registration is the node's kubeadm nodeRegistration: name, CRI, node IP, taints.
func registration(c kubespec.Cluster, n kubespec.Node) NodeRegistrationOptions {
	taints := make([]corev1.Taint, 0, len(n.Taints))
	for _, t := range n.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return NodeRegistrationOptions{
		Name: n.Name, CRISocket: c.CRISocket, Taints: taints,
		KubeletExtraArgs:      []Arg{{Name: "node-ip", Value: n.IP}},
		IgnorePreflightErrors: append([]string(nil), preflightIgnored...),
		ImagePullPolicy:       string(corev1.PullIfNotPresent),
	}
}

// patches points kubeadm at the node's kubelet patch when it reserves CPUs.
func patches(n kubespec.Node, p Paths) *Patches {
	if n.ReservedCPUs == "" {
		return nil
	}
	return &Patches{Directory: p.Join(patchesDir)}
}

// KubeletPatch is the per-node kubelet configuration patch for reserved CPUs: the
// static CPU manager keeps every container off reservedSystemCPUs, so the vswitch
// cores never run pods. Empty when the node reserves none.
func KubeletPatch(n kubespec.Node) (name string, data []byte) {
	if n.ReservedCPUs == "" {
		return "", nil
	}
	return "kubeletconfiguration+merge.yaml",
		[]byte("cpuManagerPolicy: static\nreservedSystemCPUs: \"" + n.ReservedCPUs + "\"\n")
}

func endpointPort(endpoint string) (int32, error) {
	_, ps, err := net.SplitHostPort(endpoint)
	if err != nil {
		return 0, fmt.Errorf("control-plane endpoint %q: %w", endpoint, err)
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("control-plane endpoint %q: bad port", endpoint)
	}
	return int32(n), nil
}

// pruned renders v without its zero values, except the dotted field paths in keep,
// so the file holds only what Plinth set.
type pruned struct {
	v    any
	keep []string
}

func marshalDocs(docs ...any) ([]byte, error) {
	var b bytes.Buffer
	for i, d := range docs {
		var out []byte
		var err error
		if p, ok := d.(pruned); ok {
			out, err = marshalPruned(p.v, p.keep)
		} else {
			out, err = yaml.Marshal(d)
		}
		if err != nil {
			return nil, fmt.Errorf("render %T: %w", d, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	return b.Bytes(), nil
}

func marshalPruned(v any, keep []string) ([]byte, error) {
	j, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m, all map[string]any
	if err := yaml.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(j, &all); err != nil {
		return nil, err
	}
	prune(m)
	for _, k := range keep {
		restore(m, all, strings.Split(k, "."))
	}
	return yaml.Marshal(m)
}

// restore copies the value at path from all back into m, creating the maps on the way.
func restore(m, all map[string]any, path []string) {
	v, ok := all[path[0]]
	if !ok {
		return
	}
	if len(path) == 1 {
		m[path[0]] = v
		return
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return
	}
	dst, ok := m[path[0]].(map[string]any)
	if !ok {
		dst = map[string]any{}
		m[path[0]] = dst
	}
	restore(dst, sub, path[1:])
}

// prune drops zero values ("", 0, false, "0s", null, empty maps and lists) in place
// and reports whether m ended up empty.
func prune(m map[string]any) bool {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case string:
			if t == "" || t == "0s" || t == "0" {
				delete(m, k)
			}
		case bool:
			if !t {
				delete(m, k)
			}
		case float64:
			if t == 0 {
				delete(m, k)
			}
		case map[string]any:
			if prune(t) {
				delete(m, k)
			}
		case []any:
			if len(t) == 0 {
				delete(m, k)
			}
		}
	}
	return len(m) == 0
}
