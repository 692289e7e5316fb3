package kubeinstall

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/apiservertest"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

// siteOpts shapes the sample site: 2 controllers, a witness and 3 workers on one
// cluster-host network "<net>.0/24" (controllers .11 .12, witness .13, workers .21-.23,
// VIP .10).
type siteOpts struct {
	net       string // e.g. "10.213.7"
	apiPort   int
	etcdPorts [2]int
	witness   bool
	extra     string // appended to the kubernetes section
	labels    string // compute-0's labels, YAML flow map
}

func (o siteOpts) yaml() string {
	if o.apiPort == 0 {
		o.apiPort = 6443
	}
	if o.etcdPorts[0] == 0 {
		o.etcdPorts = [2]int{2379, 2380}
	}
	if o.labels == "" {
		o.labels = "{rack: r1}"
	}
	witness := ""
	if o.witness {
		witness = "witness: wit-0"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata: {name: sample}
spec:
  controllers: [ctl-0, ctl-1]
  %s
  networks:
  - {name: mgmt, role: mgmt, cidr: 192.168.50.0/24}
  - {name: cluster, role: cluster-host, cidr: %s.0/24}
  - {name: data, role: data, cidr: 192.168.60.0/24}
  ovs: {dpdk: true}
  kubernetes:
    version: v1.37.2
    controlPlaneVIP: %s.10
    apiServerPort: %d
    imageRepository: registry.local:5000/k8s
    certSANs: [api.sample.example]
    dpdkReservedCPUs: "0-1"
    bootstrapTokenTTLHours: 4
    etcd: {binary: /usr/bin/etcd, clientPort: %d, peerPort: %d}
    nodes:
    - {host: compute-1, sriov: true, taints: ["dedicated=nfv:NoSchedule"]}
%s`, witness, o.net, o.net, o.apiPort, o.etcdPorts[0], o.etcdPorts[1], o.extra)
	host := func(name, role string, n int, data bool, labels string) {
		nets := "[cluster]"
		if data {
			nets = "[cluster, data]"
		}
		fmt.Fprintf(&b, `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: %s}
spec:
  roles: [%s]
  managementAddress: 192.168.50.%d
  labels: %s
  interfaces:
  - {name: eth1, networks: %s, addresses: [%s.%d/24]}
`, name, role, n, labels, nets, o.net, n)
	}
	host("ctl-0", "controller", 11, false, "{}")
	host("ctl-1", "controller", 12, false, "{}")
	host("wit-0", "controller", 13, false, "{}")
	host("compute-0", "worker", 21, true, o.labels)
	host("compute-1", "worker", 22, true, "{}")
	host("compute-2", "worker", 23, true, "{}")
	return b.String()
}

// renderSite decodes, validates and plans the sample site.
func renderSite(t *testing.T, o siteOpts) map[string]plan.Step {
	t.Helper()
	m, err := api.Decode("sample.yaml", []byte(o.yaml()))
	if err != nil {
		t.Fatal(err)
	}
	m.Default()
	if errs := m.Validate("sample.yaml"); len(errs) > 0 {
		t.Fatal(errs)
	}
	steps, err := plan.Render(m.Site, m.Hosts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]plan.Step{}
	for _, s := range steps {
		out[s.ID] = s
	}
	return out
}

// secrets plays the coordinator's part: it generates "generated/<kind>/<id>" secrets
// on first reference, as pkg/coordinator does, and holds step outputs.
type secrets struct {
	mu   sync.Mutex
	vals map[string]string
}

func newSecrets() *secrets { return &secrets{vals: map[string]string{}} }

func (s *secrets) get(t *testing.T, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vals[name]; ok {
		return v
	}
	kind, _, ok := secretref.ParseGenerated(name)
	if !ok {
		t.Fatalf("secret %s: not available", name)
	}
	var v string
	switch kind {
	case secretref.GenBootstrapToken:
		v = alnum(6) + "." + alnum(16)
	case secretref.GenHex32:
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		v = hex.EncodeToString(b)
	case secretref.GenEtcdCA:
		ca, err := certs.NewCA("etcd-ca", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		v = ca
	default:
		t.Fatalf("secret %s: unknown kind", name)
	}
	s.vals[name] = v
	return v
}

func (s *secrets) setOutputs(stepID string, outs map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range outs {
		s.vals[secretref.OutputName(stepID, k)] = v
	}
}

// resolve replaces secret references in a step's inputs, like the coordinator does
// for the step's own host.
func (s *secrets) resolve(t *testing.T, st plan.Step) json.RawMessage {
	t.Helper()
	var doc any
	if err := json.Unmarshal(st.Inputs, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(x any) any
	walk = func(x any) any {
		switch v := x.(type) {
		case string:
			if name, ok := secretref.Parse(v); ok {
				return s.get(t, name)
			}
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		}
		return x
	}
	out, err := json.Marshal(walk(doc))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func alnum(n int) string {
	const a = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(a))))
		b[i] = a[k.Int64()]
	}
	return string(b)
}

// freePorts is internal/apiservertest's, the one port picker of the API-server tests.
func freePorts(t *testing.T, n int) []int { return apiservertest.FreePorts(t, n) }
