package kubeinstall

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// EtcdConfig is the subset of etcd's --config-file Plinth writes.
type EtcdConfig struct {
	Name                     string  `json:"name"`
	DataDir                  string  `json:"data-dir"`
	ListenPeerURLs           string  `json:"listen-peer-urls"`
	ListenClientURLs         string  `json:"listen-client-urls"`
	AdvertiseClientURLs      string  `json:"advertise-client-urls"`
	InitialAdvertisePeerURLs string  `json:"initial-advertise-peer-urls"`
	InitialCluster           string  `json:"initial-cluster,omitempty"`
	InitialClusterState      string  `json:"initial-cluster-state,omitempty"`
	InitialClusterToken      string  `json:"initial-cluster-token,omitempty"`
	ClientTransportSecurity  EtcdTLS `json:"client-transport-security"`
	PeerTransportSecurity    EtcdTLS `json:"peer-transport-security"`
	EtcdTuning
}

// EtcdTLS is one listener's TLS.
type EtcdTLS struct {
	CertFile       string `json:"cert-file"`
	KeyFile        string `json:"key-file"`
	ClientCertAuth bool   `json:"client-cert-auth"`
	TrustedCAFile  string `json:"trusted-ca-file"`
}

// EtcdTuning are settings every member gets.
type EtcdTuning struct {
	SnapshotCount     int    `json:"snapshot-count"`
	AutoCompactMode   string `json:"auto-compaction-mode"`
	AutoCompaction    string `json:"auto-compaction-retention"`
	QuotaBackendBytes int64  `json:"quota-backend-bytes"`
	// GRPCGateway serves the v3 JSON API the driver uses for membership; a config
	// file does not inherit the flag's default of true.
	GRPCGateway bool `json:"enable-grpc-gateway"`
}

// Bootstrap says how a member without data starts: a new cluster, or joining an
// existing one (after a member add).
type Bootstrap struct {
	State   string                // "new" or "existing"
	Members []kubespec.EtcdMember // the initial cluster
}

// RenderEtcdConfig renders the member's config file. bootstrap is nil once the member
// has data: etcd ignores the initial-* settings then, and leaving them out keeps a
// membership change from rewriting (and restarting) members that already run.
func RenderEtcdConfig(in kubespec.EtcdInputs, p Paths, bootstrap *Bootstrap) ([]byte, error) {
	m := in.Member
	c := EtcdConfig{
		Name:                     m.Name,
		DataDir:                  p.Join(in.DataDir),
		ListenPeerURLs:           peerURL(m),
		ListenClientURLs:         clientURL(m),
		AdvertiseClientURLs:      clientURL(m),
		InitialAdvertisePeerURLs: peerURL(m),
		ClientTransportSecurity: EtcdTLS{CertFile: p.etcdFile("server.crt"), KeyFile: p.etcdFile("server.key"),
			ClientCertAuth: true, TrustedCAFile: p.etcdFile("ca.crt")},
		PeerTransportSecurity: EtcdTLS{CertFile: p.etcdFile("peer.crt"), KeyFile: p.etcdFile("peer.key"),
			ClientCertAuth: true, TrustedCAFile: p.etcdFile("ca.crt")},
		EtcdTuning: EtcdTuning{SnapshotCount: 10000, AutoCompactMode: "periodic", AutoCompaction: "8h", QuotaBackendBytes: 8 << 30, GRPCGateway: true},
	}
	if bootstrap != nil {
		var ic []string
		for _, bm := range bootstrap.Members {
			ic = append(ic, bm.Name+"="+peerURL(bm))
		}
		c.InitialCluster = strings.Join(ic, ",")
		c.InitialClusterState = bootstrap.State
		c.InitialClusterToken = in.ClusterToken
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("etcd config: %w", err)
	}
	return append([]byte("# Written by Plinth (kube.etcd); changes are reverted.\n"), out...), nil
}

// withoutBootstrap drops the initial-* lines, to compare configs of a running member.
func withoutBootstrap(cfg []byte) string {
	var keep []string
	for l := range strings.SplitSeq(string(cfg), "\n") {
		if !strings.HasPrefix(l, "initial-cluster") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// RenderEtcdUnit renders the member's systemd unit.
func RenderEtcdUnit(in kubespec.EtcdInputs, p Paths) []byte {
	return []byte(`# Written by Plinth (kube.etcd); changes are reverted.
[Unit]
Description=etcd member ` + in.Member.Name + ` of the Plinth Kubernetes control plane
Documentation=https://github.com/plinth-dev/plinth/blob/main/docs/kubernetes.md
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
ExecStart=` + in.Binary + ` --config-file ` + p.Join(etcdConfig) + `
Restart=always
RestartSec=5s
# A first member waits for its peers before it reports ready.
TimeoutStartSec=0
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`)
}

// etcdCert is one certificate a member holds.
type etcdCert struct {
	name string
	req  certs.Request
}

// etcdCerts are the certificates of member m; controllers also hold the API
// server's client certificate.
func etcdCerts(in kubespec.EtcdInputs) []etcdCert {
	m := in.Member
	ip := net.ParseIP(m.IP)
	// Like kubeadm's: the loopback names let a member reach a peer on the same host,
	// and etcd checks a peer's SANs against the address it connects from.
	dns := []string{m.Name, "localhost"}
	ips := []net.IP{ip, net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	out := []etcdCert{
		{"server", certs.Request{CommonName: m.Name, DNSNames: dns, IPs: ips, Server: true, Client: true}},
		{"peer", certs.Request{CommonName: m.Name, DNSNames: dns, IPs: ips, Server: true, Client: true}},
		{"healthcheck-client", certs.Request{CommonName: "kube-etcd-healthcheck-client", Client: true}},
	}
	if in.APIServerClient {
		out = append(out, etcdCert{"apiserver-etcd-client", certs.Request{CommonName: "kube-apiserver-etcd-client", Client: true}})
	}
	return out
}

func peerURL(m kubespec.EtcdMember) string {
	return "https://" + net.JoinHostPort(m.IP, strconv.Itoa(m.PeerPort))
}

func clientURL(m kubespec.EtcdMember) string {
	return "https://" + net.JoinHostPort(m.IP, strconv.Itoa(m.ClientPort))
}

// hostOf and portOf split a peer URL ("https://10.0.1.11:2380").
func hostOf(u string) string {
	h, _, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"))
	return h
}

func portOf(u string) int {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"))
	n, _ := strconv.Atoi(p)
	return n
}
