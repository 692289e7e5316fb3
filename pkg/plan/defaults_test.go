package plan

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

// TestPolicyFromZeroIsAPIDefaults: the planner's retry policy takes its defaults from
// pkg/api, the one home of defaults, and writes none of its own.
func TestPolicyFromZeroIsAPIDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   api.Policy
		want Policy
	}{
		{"zero", api.Policy{}, Policy{
			MaxAttempts: api.DefaultMaxAttempts,
			RetryBase:   api.DefaultRetryBaseSeconds * time.Second,
			RetryMax:    api.DefaultRetryMaxSeconds * time.Second,
			RepairDrift: api.DefaultDrift == api.DriftRepair,
		}},
		{"defaulted", api.Policy{}.Effective(), PolicyFrom(api.Policy{})},
		{"set", api.Policy{Drift: api.DriftReport, MaxAttempts: 12, RetryBaseSeconds: 1, RetryMaxSeconds: 15},
			Policy{MaxAttempts: 12, RetryBase: time.Second, RetryMax: 15 * time.Second}},
	} {
		if got := PolicyFrom(tc.in); got != tc.want {
			t.Errorf("%s: PolicyFrom(%+v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestRenderIgnoresDefault: the coordinator stores manifests after api's Default, and
// tests render them before; both must give the same steps, and so must a manifest
// with api's Effective defaults already applied. A renderer that fills a zero with a
// literal default of its own that disagrees with api's fails here. The lab manifest is extended with every
// interface and port type left to its defaults.
func TestRenderIgnoresDefault(t *testing.T) {
	b, err := os.ReadFile("../../examples/lab/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.NewReplacer("${BUNDLE_VERSION}", "0.1.0", "${BUNDLE_SHA256}", strings.Repeat("a", 64)).Replace(string(b)))
	load := func() *api.Manifest {
		m, err := api.Decode("site.yaml", b)
		if err != nil {
			t.Fatal(err)
		}
		m.Site.Spec.Policy = api.Policy{}
		m.Site.Spec.Kubernetes.Containerd = nil
		m.Site.Spec.OVS.Bridges = append(m.Site.Spec.OVS.Bridges, api.OVSBridge{Name: "br-ex", Ports: []api.OVSPort{
			{OVSInterface: api.OVSInterface{Name: "dpdk0", PCI: "0000:03:00.0"}},
			{OVSInterface: api.OVSInterface{Name: "bond0"}, Bond: &api.OVSBond{Members: []api.OVSInterface{{Name: "m0", PCI: "0000:04:00.0"}, {Name: "m1"}}}},
		}})
		m.Hosts = append(m.Hosts, api.Host{
			TypeMeta: m.Hosts[0].TypeMeta,
			Metadata: api.ObjectMeta{Name: "compute-9"},
			Spec: api.HostSpec{Roles: []string{api.RoleWorker}, ManagementAddress: "10.211.0.29", Interfaces: []api.Interface{
				{Name: "e0"}, {Name: "e1"},
				{Name: "bond0", Type: api.InterfaceBond, Members: []string{"e0", "e1"}, Networks: []string{"data"}},
				{Name: "bond1", Type: api.InterfaceBond, Bond: &api.BondOptions{Mode: api.BondBalanceXOR}},
				{Name: "mv0", Type: api.InterfaceMacvlan, Parent: "bond0"},
				{Name: "vx0", Type: api.InterfaceVXLAN, Parent: "bond0", VXLAN: &api.VXLANOptions{VNI: 7}},
			}},
		})
		return m
	}
	// The other copy gets Default and every Effective method, which the renderers
	// apply themselves: rendering it must be a no-op on top of theirs.
	raw, defaulted := load(), load()
	defaulted.Default()
	spec := &defaulted.Site.Spec
	k := spec.Kubernetes.Effective()
	c := k.EffectiveContainerd()
	k.Containerd = &c
	o, ce := spec.OVS.Effective(), spec.Ceph.Effective()
	spec.Kubernetes, spec.OVS, spec.Ceph = &k, &o, &ce
	spec.Policy = spec.Policy.Effective()
	render := func(m *api.Manifest) map[string]string {
		steps, err := Render(m.Site, m.Hosts)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range steps {
			j, _ := json.Marshal(s)
			out[s.ID] = string(j)
		}
		return out
	}
	got, want := render(raw), render(defaulted)
	for id, w := range want {
		if g, ok := got[id]; !ok {
			t.Errorf("%s: rendered only after Default", id)
		} else if g != w {
			t.Errorf("%s: before Default\n%s\nafter\n%s", id, g, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: rendered only before Default", id)
		}
	}
	if _, ok := got["compute-9/ovs.bridges"]; !ok {
		t.Errorf("the extra host renders no ovs.bridges step: the test no longer covers OVS defaults")
	}
}
