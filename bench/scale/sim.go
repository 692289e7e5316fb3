package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// simDriver is the SIMULATED driver of the scale harness: it does no host I/O. It
// "applies" a step by remembering a digest of its inputs, so a run with unchanged
// inputs finds nothing to do (as a real driver's observe would) and a changed
// input gives one change. Everything around it — the step loop, pending results
// on disk, reports, drift checks — is the real agent's.
type simDriver struct {
	kind string
	mu   sync.Mutex
	have map[[32]byte]bool
}

func (d *simDriver) Kind() string { return d.kind }

func (d *simDriver) Diff(_ context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	sum := sha256.Sum256(inputs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.have[sum] {
		return nil, nil
	}
	return []driver.Change{{Summary: "simulated " + d.kind, Apply: func(context.Context) error {
		d.mu.Lock()
		d.have[sum] = true
		d.mu.Unlock()
		return nil
	}}}, nil
}

// Outputs gives the kinds whose later steps read outputs something of the right shape.
func (d *simDriver) Outputs(_ context.Context, _ json.RawMessage) (map[string]string, error) {
	switch d.kind {
	case "kube.init":
		return map[string]string{
			kubespec.OutputAdminConf:  "apiVersion: v1\nkind: Config\nclusters: []\n# simulated\n",
			kubespec.OutputCACertHash: fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("simulated ca"))),
		}, nil
	case "ceph.health":
		return map[string]string{cephspec.OutputFSID: "00000000-0000-4000-8000-000000000000", cephspec.OutputMonitors: "172.21.0.1:6789"}, nil
	case "ceph.user":
		return map[string]string{cephspec.OutputKey: "QVFCc2ltdWxhdGVkLWtleQ==", cephspec.OutputKeyring: "[client.sim]\n\tkey = QVFCc2ltdWxhdGVkLWtleQ==\n"}, nil
	}
	return nil, nil
}

// simRegistry is one agent's SIMULATED drivers: one per kind of the step table, so
// the agent's own check (drivers name the same kinds as the table) passes.
func simRegistry() (*driver.Registry, error) {
	var ds []driver.Driver
	for _, k := range stepkind.All() {
		ds = append(ds, &simDriver{kind: k.Name, have: map[[32]byte]bool{}})
	}
	return driver.NewRegistry(ds...)
}

// simFacts returns SIMULATED facts for one host: this machine's CPUs, memory and
// hugepages (so the facts checks see a real shape), with the links and addresses
// the manifest declares for that host.
func simFacts(base host.Facts, name, mgmt string) host.Facts {
	f := base
	f.Hostname = name
	f.Links = []host.LinkFact{
		{Name: "lo", Index: 1, MTU: 65536, OperState: "unknown", AdminUp: true, Kind: "device"},
		{Name: "eth0", Index: 2, MAC: macFor(name, 0), MTU: 1500, OperState: "up", AdminUp: true, Kind: "device", Driver: "virtio_net"},
		{Name: "eth1", Index: 3, MAC: macFor(name, 1), MTU: 1500, OperState: "up", AdminUp: true, Kind: "device", Driver: "virtio_net"},
	}
	f.Addresses = []host.AddrFact{{Link: "lo", CIDR: "127.0.0.1/8", Family: "inet"}, {Link: "eth0", CIDR: mgmt + "/16", Family: "inet"}}
	f.Routes = nil
	f.KubeCertificates = nil
	return f
}

func macFor(name string, n byte) string {
	s := sha256.Sum256([]byte(name))
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", s[0], s[1], s[2], s[3], n)
}
