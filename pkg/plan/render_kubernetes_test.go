package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// kubeSite is 2 controllers, an optional witness and 2 workers on a cluster-host
// network 10.50.0.0/24 (workers also carry the data network).
func kubeSite(witness bool, k *api.KubernetesSpec) (*api.Site, []api.Host) {
	s := &api.Site{Metadata: api.ObjectMeta{Name: "s1"}}
	s.Spec.Controllers = []string{"ctl-0", "ctl-1"}
	if witness {
		s.Spec.Witness = "wit-0"
	}
	s.Spec.Networks = []api.Network{
		{Name: "mgmt", Role: api.NetworkMgmt, CIDR: "10.40.0.0/24"},
		{Name: "cluster", Role: api.NetworkClusterHost, CIDR: "10.50.0.0/24"},
		{Name: "data", Role: api.NetworkData, CIDR: "10.60.0.0/24"},
	}
	s.Spec.OVS = &api.OVSSpec{DPDK: true}
	s.Spec.Kubernetes = k
	host := func(name, role, ip string, data bool) api.Host {
		h := api.Host{Metadata: api.ObjectMeta{Name: name}}
		h.Spec.Roles = []string{role}
		h.Spec.ManagementAddress = "10.40.0." + ip
		h.Spec.Interfaces = []api.Interface{{Name: "eth1", Networks: []string{"cluster"}, Addresses: []string{"10.50.0." + ip + "/24"}}}
		if data {
			h.Spec.Interfaces = append(h.Spec.Interfaces, api.Interface{Name: "eth2", Networks: []string{"data"}, Addresses: []string{"10.60.0." + ip + "/24"}})
		}
		return h
	}
	hosts := []api.Host{host("ctl-0", "controller", "11", false), host("ctl-1", "controller", "12", false),
		host("compute-0", "worker", "21", true), host("compute-1", "worker", "22", true)}
	if witness {
		hosts = append(hosts, host("wit-0", "controller", "13", false))
	}
	return s, hosts
}

func kubeSteps(t *testing.T, witness bool, k *api.KubernetesSpec) map[string]Step {
	t.Helper()
	s, hs := kubeSite(witness, k)
	steps, err := Render(s, hs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Step{}
	for _, st := range steps {
		if strings.HasPrefix(st.Kind, "kube.") {
			out[st.ID] = st
		}
	}
	return out
}

func inputsOf[T any](t *testing.T, st Step) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(st.Inputs, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRenderKubernetesNeedsTheSection(t *testing.T) {
	if got := kubeSteps(t, true, nil); len(got) != 0 {
		t.Fatalf("no kubernetes section, yet %d kube steps", len(got))
	}
}

func TestRenderKubernetesTopologyAndOrder(t *testing.T) {
	steps := kubeSteps(t, true, &api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10"})
	var ids []string
	for id := range steps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want := []string{
		"compute-0/kube.join", "compute-1/kube.join",
		"ctl-0/kube.cni", "ctl-0/kube.etcd", "ctl-0/kube.health", "ctl-0/kube.init",
		"ctl-0/kube.labels/compute-0", "ctl-0/kube.labels/compute-1", "ctl-0/kube.labels/ctl-0", "ctl-0/kube.labels/ctl-1",
		"ctl-0/kube.vip", "ctl-1/kube.etcd", "ctl-1/kube.join-control-plane", "ctl-1/kube.vip", "wit-0/kube.etcd",
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("steps\n got %v\nwant %v", ids, want)
	}
	deps := func(id string) []string { return steps[id].Deps }
	for id, must := range map[string][]string{
		"ctl-0/kube.init": {"ctl-0/kube.vip", "ctl-0/kube.etcd", "ctl-1/kube.etcd", "wit-0/kube.etcd",
			"ctl-0/host.network", "ctl-0/containerd.config", "ctl-0/images.import"},
		"ctl-1/kube.join-control-plane": {"ctl-0/kube.init", "ctl-1/kube.vip", "ctl-1/kube.etcd", "ctl-1/containerd.config"},
		"compute-0/kube.join":           {"ctl-0/kube.init", "compute-0/images.import"},
		"ctl-0/kube.labels/compute-1":   {"compute-1/kube.join"},
		"ctl-0/kube.labels/ctl-0":       {"ctl-0/kube.init"},
		"ctl-0/kube.cni":                {"ctl-0/kube.init"},
		"wit-0/kube.etcd":               {"wit-0/host.network"},
	} {
		for _, d := range must {
			if !slices.Contains(deps(id), d) {
				t.Errorf("%s does not depend on %s: %v", id, d, deps(id))
			}
		}
	}
	if slices.ContainsFunc(deps("wit-0/kube.etcd"), func(d string) bool { return strings.Contains(d, "containerd") }) {
		t.Error("the witness runs no containers")
	}

	in := inputsOf[kubespec.InitInputs](t, steps["ctl-0/kube.init"])
	if in.Cluster.Endpoint != "10.50.0.10:6443" || in.Node.IP != "10.50.0.11" || len(in.Cluster.EtcdEndpoints) != 3 ||
		!strings.HasPrefix(in.Token, "plinth-secret:generated/bootstrap-token/") || !strings.HasPrefix(in.CertificateKey, "plinth-secret:generated/hex32/") ||
		!slices.Equal(in.ControlPlanes, []string{"ctl-1"}) || !slices.Equal(in.Workers, []string{"compute-0", "compute-1"}) ||
		!strings.Contains(in.Note, "survives the loss of any one") {
		t.Errorf("init inputs %+v", in)
	}
	if in.Node.Taints == nil || len(in.Node.Taints) != 1 {
		t.Errorf("controllers carry the control-plane taint: %+v", in.Node.Taints)
	}
	vip := inputsOf[kubespec.VIPInputs](t, steps["ctl-0/kube.vip"])
	if vip.Interface != "eth1" || vip.Priority != kubespec.KeepalivedPriorityFirst {
		t.Errorf("vip inputs %+v", vip)
	}
	w := inputsOf[kubespec.JoinInputs](t, steps["compute-0/kube.join"])
	if w.Node.ReservedCPUs != "" {
		t.Errorf("no dpdkReservedCPUs declared, none reserved: %+v", w.Node)
	}
	if w.CACertHash != "plinth-secret:output/ctl-0/kube.init/ca-cert-hash" {
		t.Errorf("join pins %s", w.CACertHash)
	}
	l := inputsOf[kubespec.LabelsInputs](t, steps["ctl-0/kube.labels/compute-0"])
	if l.Labels["openstack-compute-node"] != "enabled" || l.Labels["openvswitch"] != "enabled" || l.Kubeconfig != "plinth-secret:output/ctl-0/kube.init/admin.conf" {
		t.Errorf("labels %+v", l)
	}
}

func TestRenderKubernetesTopologyVariants(t *testing.T) {
	// No witness: 2 etcd members, and the plan says it is not fault tolerant.
	steps := kubeSteps(t, false, &api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10"})
	e := inputsOf[kubespec.EtcdInputs](t, steps["ctl-0/kube.etcd"])
	if len(e.Members) != 2 || !strings.Contains(e.Note, "NOT fault tolerant") {
		t.Errorf("etcd without witness: %+v", e)
	}
	// Schedulable controllers (AIO) register without taints: an empty list, which
	// kubeadm reads as "none" where a missing one means the default taint.
	steps = kubeSteps(t, true, &api.KubernetesSpec{SchedulableControllers: true, DPDKReservedCPUs: "0-3",
		Nodes: []api.KubernetesNode{{Host: "compute-1", ReservedCPUs: "0-5", SRIOV: true, Taints: []string{"nfv:NoSchedule"}}}})
	if !strings.Contains(string(steps["ctl-0/kube.init"].Inputs), `"taints":[]`) {
		t.Errorf("schedulable controllers: %s", steps["ctl-0/kube.init"].Inputs)
	}
	if _, ok := steps["ctl-0/kube.vip"]; ok {
		t.Error("no VIP, no kube.vip")
	}
	if in := inputsOf[kubespec.InitInputs](t, steps["ctl-0/kube.init"]); in.Cluster.Endpoint != "10.50.0.11:6443" {
		t.Errorf("without a VIP the endpoint is the first controller's: %s", in.Cluster.Endpoint)
	}
	c0 := inputsOf[kubespec.JoinInputs](t, steps["compute-0/kube.join"])
	c1 := inputsOf[kubespec.JoinInputs](t, steps["compute-1/kube.join"])
	if c0.Node.ReservedCPUs != "0-3" || c1.Node.ReservedCPUs != "0-5" || len(c1.Node.Taints) != 1 {
		t.Errorf("reserved CPUs and taints: %+v %+v", c0.Node, c1.Node)
	}
	if l := inputsOf[kubespec.LabelsInputs](t, steps["ctl-0/kube.labels/compute-1"]); l.Labels["sriov"] != "enabled" {
		t.Errorf("sriov label: %v", l.Labels)
	}
	// Rotation: a new credentials generation references new secrets.
	a := inputsOf[kubespec.InitInputs](t, kubeSteps(t, true, &api.KubernetesSpec{})["ctl-0/kube.init"])
	b := inputsOf[kubespec.InitInputs](t, kubeSteps(t, true, &api.KubernetesSpec{CredentialsGeneration: 1})["ctl-0/kube.init"])
	if a.Token == b.Token || a.CertificateKey == b.CertificateKey {
		t.Error("credentialsGeneration must rotate the token and certificate key")
	}
}

func TestRenderKubernetesSingleController(t *testing.T) {
	s, hs := kubeSite(true, &api.KubernetesSpec{})
	s.Spec.Controllers = []string{"ctl-0"}
	steps, err := Render(s, hs)
	if err != nil {
		t.Fatal(err)
	}
	var etcd int
	for _, st := range steps {
		if st.Kind == kubespec.KindEtcd {
			etcd++
		}
		if st.Kind == kubespec.KindJoinControlPlane {
			t.Errorf("one controller, yet %s", st.ID)
		}
	}
	if etcd != 1 {
		t.Errorf("one controller runs the only etcd member (a witness would not help); got %d", etcd)
	}
}

// kube.health runs on controller-0 once the cluster is made: after init, every join,
// the pod network and the labels; it checks the API through the VIP and every node.
func TestRenderKubernetesHealth(t *testing.T) {
	steps := kubeSteps(t, true, &api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10"})
	st, ok := steps["ctl-0/kube.health"]
	if !ok || st.Host != "ctl-0" || st.Kind != kubespec.KindHealth {
		t.Fatalf("no ctl-0/kube.health: %+v", st)
	}
	want := []string{"ctl-0/kube.init", "ctl-1/kube.join-control-plane", "compute-0/kube.join", "compute-1/kube.join",
		"ctl-0/kube.cni", "ctl-0/kube.labels/ctl-0", "ctl-0/kube.labels/ctl-1",
		"ctl-0/kube.labels/compute-0", "ctl-0/kube.labels/compute-1"}
	got := slices.Clone(st.Deps)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("kube.health deps\n got %v\nwant %v", got, want)
	}
	in := inputsOf[kubespec.HealthInputs](t, st)
	if in.Endpoint != "https://10.50.0.10:6443" || !in.VIP || in.Kubeconfig != "plinth-secret:output/ctl-0/kube.init/admin.conf" ||
		!slices.Equal(in.Nodes, []string{"ctl-0", "ctl-1", "compute-0", "compute-1"}) {
		t.Errorf("health inputs %+v", in)
	}
	// Without a VIP it asks controller-0; without a CNI step it does not wait for one.
	steps = kubeSteps(t, true, &api.KubernetesSpec{CNI: api.CNISpec{Plugin: api.CNINone}})
	in = inputsOf[kubespec.HealthInputs](t, steps["ctl-0/kube.health"])
	if in.Endpoint != "https://10.50.0.11:6443" || in.VIP {
		t.Errorf("health inputs without a VIP %+v", in)
	}
	if slices.Contains(steps["ctl-0/kube.health"].Deps, "ctl-0/kube.cni") {
		t.Errorf("no CNI step, yet kube.health waits for it: %v", steps["ctl-0/kube.health"].Deps)
	}
}

// A site bundle gives every node and etcd member a kube.binaries step with what it
// runs, and every later kube step on that host waits for it.
func TestRenderKubernetesBinariesFromBundle(t *testing.T) {
	if got := kubeSteps(t, true, &api.KubernetesSpec{}); got["ctl-0/kube.binaries"].ID != "" {
		t.Fatal("kube.binaries planned without a bundle")
	}
	k := &api.KubernetesSpec{Bundle: &api.BundleRef{Version: "0.3.0", SHA256: strings.Repeat("a", 64)}}
	steps := kubeSteps(t, true, k)
	want := map[string]kubespec.BinariesInputs{
		"ctl-0":     {Bundle: "0.3.0", SHA256: strings.Repeat("a", 64), Binaries: []string{"etcd", "etcdctl", "kubeadm", "kubectl", "kubelet"}, CNIPlugins: true, Kubelet: true},
		"ctl-1":     {Bundle: "0.3.0", SHA256: strings.Repeat("a", 64), Binaries: []string{"etcd", "etcdctl", "kubeadm", "kubectl", "kubelet"}, CNIPlugins: true, Kubelet: true},
		"wit-0":     {Bundle: "0.3.0", SHA256: strings.Repeat("a", 64), Binaries: []string{"etcd", "etcdctl"}},
		"compute-0": {Bundle: "0.3.0", SHA256: strings.Repeat("a", 64), Binaries: []string{"kubeadm", "kubectl", "kubelet"}, CNIPlugins: true, Kubelet: true},
	}
	for h, w := range want {
		st, ok := steps[h+"/kube.binaries"]
		if !ok {
			t.Fatalf("%s: no kube.binaries step", h)
		}
		got := inputsOf[kubespec.BinariesInputs](t, st)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("%s: inputs\n got %s\nwant %s", h, gj, wj)
		}
	}
	for id, deps := range map[string]string{
		"ctl-0/kube.etcd": "ctl-0/kube.binaries", "wit-0/kube.etcd": "wit-0/kube.binaries",
		"ctl-0/kube.init": "ctl-0/kube.binaries", "ctl-1/kube.join-control-plane": "ctl-1/kube.binaries",
		"compute-1/kube.join": "compute-1/kube.binaries",
	} {
		if !slices.Contains(steps[id].Deps, deps) {
			t.Errorf("%s deps %v: missing %s", id, steps[id].Deps, deps)
		}
	}
	// images.import takes the bundle's images, pinned the same way.
	site, hosts := kubeSite(true, k)
	all, err := Render(site, hosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range all {
		if st.ID == "compute-0/images.import" {
			if in := inputsOf[containerdspec.ImportInputs](t, st); in.Bundle != "0.3.0" || in.BundleSHA256 != strings.Repeat("a", 64) {
				t.Errorf("images.import inputs %+v: want bundle 0.3.0 with its pin", in)
			}
		}
	}
	// A new bundle version changes every host's inputs, so the step runs again.
	k2 := &api.KubernetesSpec{Bundle: &api.BundleRef{Version: "0.4.0"}}
	if a, b := steps["compute-0/kube.binaries"].InputsHash, kubeSteps(t, true, k2)["compute-0/kube.binaries"].InputsHash; a == b {
		t.Error("bundle version change kept the inputs hash")
	}
}
