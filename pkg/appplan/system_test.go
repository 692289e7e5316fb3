package appplan

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

// facts is a site with Ceph (the openstack defaults), OVS-DPDK on one data host and
// a control-plane VIP.
func facts() SiteFacts {
	site := &api.Site{
		Metadata: api.ObjectMeta{Name: "lab"},
		Spec: api.SiteSpec{
			Controllers: []string{"controller-0"},
			Networks: []api.Network{
				{Name: "mgmt", Role: api.NetworkMgmt, CIDR: "10.0.0.0/24"},
				{Name: "data", Role: api.NetworkData, CIDR: "10.1.0.0/24"},
			},
			Kubernetes: &api.KubernetesSpec{ControlPlaneVIP: "10.0.0.10"},
			Ceph:       &api.CephSpec{},
			OVS: &api.OVSSpec{DPDK: true, Bridges: []api.OVSBridge{
				{Name: "br-phy", Ports: []api.OVSPort{{OVSInterface: api.OVSInterface{Name: "dpdk0", PCI: "0000:03:00.0"}}}},
				{Name: "br-ex"},
			}},
		},
	}
	hosts := []api.Host{
		{Metadata: api.ObjectMeta{Name: "controller-0"}, Spec: api.HostSpec{Roles: []string{api.RoleController}, ManagementAddress: "10.0.0.2"}},
		{Metadata: api.ObjectMeta{Name: "compute-0"}, Spec: api.HostSpec{Roles: []string{api.RoleWorker}, ManagementAddress: "10.0.0.3",
			Interfaces: []api.Interface{{Name: "eth1", Networks: []string{"data"}}}}},
	}
	return SiteFacts{Site: site, Hosts: hosts, CephMonitors: []string{"10.0.0.2:6789", "10.0.0.3:6789"}, CephFSID: "b1c2d3e4-0000-4000-8000-000000000001"}
}

func demo() *api.Application {
	return &api.Application{
		Metadata: api.ObjectMeta{Name: "demo"},
		Spec: api.ApplicationSpec{
			Passwords: []string{"admin"},
			Groups: []api.ChartGroup{
				{Name: "base", Charts: []api.Chart{{Name: "web", Source: api.ChartSource{Archive: "web-0.1.0.tgz"}}}},
				{Name: "top", Gates: []api.Gate{{Chart: "web"}}, Charts: []api.Chart{{Name: "api", Namespace: "demo", Source: api.ChartSource{Archive: "api.tgz"}}}},
			},
		},
	}
}

func get(t *testing.T, v map[string]any, path string) any {
	t.Helper()
	var cur any = v
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not a map in %v", path, p, cur)
		}
		if cur, ok = m[p]; !ok {
			t.Fatalf("%s: no %s", path, p)
		}
	}
	return cur
}

func TestSystem(t *testing.T) {
	f := facts()
	app := demo()
	v := System(f, app, app.Spec.Groups[0].Charts[0])
	for path, want := range map[string]any{
		"plinth.site":                                          "lab",
		"plinth.application":                                   "demo",
		"plinth.release":                                       "web",
		"plinth.namespace":                                     api.DefaultChartNamespace,
		"plinth.ceph.enabled":                                  true,
		"plinth.ceph.fsid":                                     f.CephFSID,
		"plinth.ceph.monitors":                                 []any{"10.0.0.2:6789", "10.0.0.3:6789"},
		"plinth.ceph.pools":                                    []any{"kube-rbd", "images", "volumes", "vms", "backups"},
		"plinth.ceph.secrets.client":                           SecretCephClientKey,
		"plinth.ceph.secrets.glance":                           "images-rbd-keyring",
		"plinth.ceph.secrets.cinder":                           "cinder-volume-rbd-keyring",
		"plinth.ceph.secrets.nova":                             "nova-rbd-keyring",
		"plinth.ceph.configMap":                                ConfigMapCephEtc,
		"plinth.ceph.storageClass":                             StorageClassRBD,
		"conf.ceph.enabled":                                    true,
		"conf.ceph.monitors":                                   []any{"10.0.0.2:6789", "10.0.0.3:6789"},
		"conf.ceph.pools.images":                               "images",
		"conf.ceph.pools.backups":                              "backups",
		"plinth.ovs.enabled":                                   true,
		"plinth.ovs.dpdk":                                      true,
		"plinth.ovs.datapathType":                              "netdev",
		"plinth.ovs.bridges":                                   []any{"br-phy", "br-ex"},
		"plinth.ovs.bridgeMappings":                            "phy:br-phy,ex:br-ex",
		"conf.ovs_dpdk.enabled":                                true,
		"conf.plugins.openvswitch_agent.ovs.datapath_type":     "netdev",
		"conf.plugins.openvswitch_agent.ovs.bridge_mappings":   "phy:br-phy,ex:br-ex",
		"plinth.nodeSelectors.compute.node_selector_key":       "openstack-compute-node",
		"plinth.nodeSelectors.compute.node_selector_value":     "enabled",
		"plinth.nodeSelectors.control_plane.node_selector_key": "openstack-control-plane",
		"plinth.nodeSelectors.openvswitch.node_selector_key":   "openvswitch",
		"plinth.nodeSelectors.sriov.node_selector_key":         "sriov",
		"plinth.endpoints.controlPlaneVIP":                     "10.0.0.10",
		"plinth.endpoints.apiServer":                           "https://10.0.0.10:6443",
		"plinth.passwords.secretName":                          "demo-passwords",
		"plinth.passwords.keys":                                []any{"admin"},
	} {
		if got := get(t, v, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	if got := get(t, System(f, app, app.Spec.Groups[1].Charts[0]), "plinth.namespace"); got != "demo" {
		t.Errorf("api chart namespace %v", got)
	}
	// The values are plain data Helm and YAML take as they are.
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}
}

func TestSystemWithoutCephOrDPDK(t *testing.T) {
	f := facts()
	f.Site.Spec.Ceph = nil
	f.Site.Spec.OVS.DPDK = false
	f.Site.Spec.Kubernetes.ControlPlaneVIP = ""
	app := demo()
	app.Spec.Passwords = nil
	v := System(f, app, app.Spec.Groups[0].Charts[0])
	for path, want := range map[string]any{
		"plinth.ceph":                map[string]any{"enabled": false},
		"conf.ceph":                  map[string]any{"enabled": false},
		"plinth.ovs.dpdk":            false,
		"plinth.ovs.datapathType":    "system",
		"conf.ovs_dpdk.enabled":      false,
		"plinth.endpoints.apiServer": "https://10.0.0.2:6443", // the first controller
		"plinth.passwords":           map[string]any{},
	} {
		if got := get(t, v, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	if objs := Objects(f, app); len(objs) != 0 {
		t.Errorf("objects without ceph or passwords: %+v", objs)
	}
	f.Site.Spec.OVS = nil
	v = System(f, app, app.Spec.Groups[0].Charts[0])
	if got := get(t, v, "plinth.ovs"); !reflect.DeepEqual(got, map[string]any{"enabled": false}) {
		t.Errorf("plinth.ovs without ovs = %v", got)
	}
	if _, ok := v["conf"].(map[string]any)["ovs_dpdk"]; ok {
		t.Error("conf.ovs_dpdk on a site without ovs")
	}
	// No site yet: still values, no panic.
	if v := System(SiteFacts{}, app, app.Spec.Groups[0].Charts[0]); get(t, v, "plinth.release") != "web" {
		t.Errorf("no site: %v", v)
	}
}

func TestObjects(t *testing.T) {
	f := facts()
	app := demo()
	kubeKey := secretref.OutputName(plan.StepID("controller-0", cephspec.KindUser, "kube-rbd"), cephspec.OutputKey)
	var names []string
	byName := map[string]Object{}
	for _, o := range Objects(f, app) {
		id := o.Kind + " " + o.Namespace + "/" + o.Name
		names = append(names, id)
		byName[id] = o
	}
	want := []string{
		"Secret demo/pvc-ceph-client-key", "Secret demo/images-rbd-keyring", "Secret demo/cinder-volume-rbd-keyring",
		"Secret demo/nova-rbd-keyring", "ConfigMap demo/ceph-etc", "Secret demo/demo-passwords",
		"Secret openstack/pvc-ceph-client-key", "Secret openstack/images-rbd-keyring", "Secret openstack/cinder-volume-rbd-keyring",
		"Secret openstack/nova-rbd-keyring", "ConfigMap openstack/ceph-etc", "Secret openstack/demo-passwords",
		"Secret kube-system/pvc-ceph-client-key", "StorageClass /general",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("objects\n%v\nwant\n%v", names, want)
	}
	if o := byName["Secret openstack/pvc-ceph-client-key"]; o.SecretData[KeyData] != kubeKey || o.SecretData[CSIUserKey] != kubeKey || o.Data[CSIUserID] != "kube-rbd" {
		t.Errorf("client key secret %+v, want key from %s", o, kubeKey)
	}
	if o := byName["Secret demo/nova-rbd-keyring"]; o.SecretData[KeyData] != secretref.OutputName("controller-0/ceph.user/nova", "key") {
		t.Errorf("nova secret %+v", o)
	}
	if o := byName["Secret demo/demo-passwords"]; !reflect.DeepEqual(o.SecretData, map[string]string{"admin": PasswordSecret("demo", "admin")}) {
		t.Errorf("passwords %+v", o)
	}
	if k, id, ok := secretref.ParseGenerated(PasswordSecret("demo", "admin")); !ok || k != secretref.GenPassword || id != "app/demo/admin" {
		t.Errorf("password secret name %q does not parse as a generated password: %q %q", PasswordSecret("demo", "admin"), k, id)
	}
	if c := byName["ConfigMap demo/ceph-etc"].Data[CephConfKey]; c != "[global]\nfsid = "+f.CephFSID+"\nmon_host = 10.0.0.2:6789,10.0.0.3:6789\n" {
		t.Errorf("ceph.conf %q", c)
	}
	sc := byName["StorageClass /general"]
	if sc.Provisioner != ProvisionerRBD || sc.Data["clusterID"] != f.CephFSID || sc.Data["pool"] != "kube-rbd" ||
		sc.Data["imageFeatures"] != "layering" || sc.Data["csi.storage.k8s.io/provisioner-secret-name"] != SecretCephClientKey ||
		sc.Data["csi.storage.k8s.io/node-stage-secret-namespace"] != StorageClassSecretNamespace {
		t.Errorf("storage class %+v", sc)
	}
	// The monitors and fsid not yet known: no ConfigMap, no StorageClass; the
	// Secrets (references only) are there.
	f.CephMonitors, f.CephFSID = []string{""}, ""
	for _, o := range Objects(f, app) {
		if o.Kind != KindSecret {
			t.Errorf("before ceph.health: %s %s", o.Kind, o.Name)
		}
	}
	// A chart in kube-system: its client key Secret is the StorageClass's, once.
	f = facts()
	app.Spec.Groups[0].Charts[0].Namespace = StorageClassSecretNamespace
	n := 0
	for _, o := range Objects(f, app) {
		if o.Namespace == StorageClassSecretNamespace && o.Name == SecretCephClientKey {
			n++
		}
	}
	if n != 1 {
		t.Errorf("kube-system/pvc-ceph-client-key generated %d times", n)
	}
}

// TestNoSecretInValues: generated values and object data hold names of secrets,
// never a reference or key material, even when the facts' site carries keys.
func TestNoSecretInValues(t *testing.T) {
	f := facts()
	const key = "AQBkeyMaterialNeverInValues=="
	f.Site.Spec.Ceph.Keyring = "/etc/ceph/ceph.client.admin.keyring"
	app := demo()
	app.Spec.Groups[0].Charts[0].Values = map[string]any{"x": 1}
	var dump []string
	for _, g := range app.Spec.Groups {
		for _, c := range g.Charts {
			b, err := json.Marshal(System(f, app, c))
			if err != nil {
				t.Fatal(err)
			}
			dump = append(dump, string(b))
		}
	}
	for _, o := range Objects(f, app) {
		b, _ := json.Marshal(o.Data)
		dump = append(dump, string(b))
		for _, name := range o.SecretData {
			if strings.HasPrefix(name, secretref.Prefix) {
				t.Errorf("%s: SecretData holds a reference %q, want a secret's name", o.Name, name)
			}
		}
	}
	for _, d := range dump {
		for _, bad := range []string{secretref.Prefix, key, f.Site.Spec.Ceph.Keyring, "output/", "generated/"} {
			if strings.Contains(d, bad) {
				t.Errorf("generated values hold %q: %s", bad, d)
			}
		}
	}
}

// TestAppplanLinksNoHelm keeps the package pure: the FSM and the CLI use it.
func TestAppplanLinksNoHelm(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to list dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-tags=ceph,pacific", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"helm.sh/", "k8s.io/client-go", "k8s.io/apimachinery", "github.com/plinth-dev/plinth/pkg/state", "github.com/plinth-dev/plinth/pkg/helmrelease"} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("pkg/appplan links %s; it must stay free of Helm, client-go and the replicated state", dep)
			}
		}
	}
}
