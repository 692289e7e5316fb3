package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// Against a real API server: kubeadm's API-only init phases with Plinth's generated
// token and certificate key, join dry runs for a worker and the second controller
// from what Plinth rendered, then node labels and taints and the CNI manifest.
func TestAgainstRealAPIServer(t *testing.T) {
	start := time.Now()
	c := startAPICluster(t)
	t.Logf("etcd + kube-apiserver + kube-controller-manager up in %s", time.Since(start).Round(100*time.Millisecond))
	super := filepath.Join(c.paths.Join("/etc/kubernetes"), "super-admin.conf")

	t.Run("init phases with Plinth's token and certificate key", func(t *testing.T) {
		c.kubeadmOK("init", "phase", "upload-config", "all", "--config", c.config, "--kubeconfig", super)
		c.kubeadmOK("init", "phase", "upload-certs", "--upload-certs", "--config", c.config, "--kubeconfig", super)
		c.kubeadmOK("init", "phase", "bootstrap-token", "--config", c.config, "--kubeconfig", super)
		ctx := c.ctx()
		id := tokenID(c.nc.in.Token)
		if ok, err := secretExists(ctx, c.api, tokenSecret(id)); !ok || err != nil {
			t.Fatalf("bootstrap token %s not in the cluster: %v", id, err)
		}
		if ok, err := secretExists(ctx, c.api, "kubeadm-certs"); !ok || err != nil {
			t.Fatalf("kubeadm-certs not uploaded: %v", err)
		}
		ids, err := plinthTokens(ctx, c.api)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("Plinth's tokens = %v %v, want [%s]", ids, err, id)
		}
		// admin.conf's group is bound by kubeadm init's kubeconfig phase on a real
		// node; bind it here as kubeadm does, since these phases skip that.
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:cluster-admins"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: "kubeadm:cluster-admins"}}}
		if _, err := c.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// The bootstrap signer signs cluster-info for the token: discovery needs it.
		poll.Until(t, 30*time.Second, "cluster-info signed", func() error {
			cm, err := c.admin.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, ok := cm.Data["jws-kubeconfig-"+id]; !ok {
				return fmt.Errorf("no signature for %s yet", id)
			}
			return nil
		})
	})

	// kube.init's outputs, read from what kubeadm wrote: the admin kubeconfig and CA hash.
	d := NewInitDriver(t.TempDir(), WithRoot(c.root))
	outs, err := d.Outputs(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.sec.setOutputs("ctl-0/kube.init", outs)

	for _, host := range []string{"compute-0", "ctl-1"} {
		t.Run("join dry-run "+host, func(t *testing.T) {
			steps := renderSite(t, c.opts)
			nc := renderConfigs(t, steps, c.sec, c.paths)
			j := nc.joins[host]
			j.NodeRegistration.IgnorePreflightErrors = []string{"all"} // no kubelet or CRI here
			b, err := JoinYAML(j)
			f := writeYAML(t, c.root, "join-"+host+".yaml", b, err)
			if name, data := KubeletPatch(nc.jin[host].Node); name != "" {
				if err := writeFile(c.paths.Join(filepath.Join(patchesDir, name)), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dry := filepath.Join(c.root, "join-dryrun-"+host)
			start := time.Now()
			out, err := kubeadmRun(t, []string{"KUBEADM_JOIN_DRYRUN_DIR=" + dry}, c.kubeadm, "join", "--config", f, "--dry-run")
			if err != nil {
				t.Fatalf("kubeadm join --dry-run: %v\n%s", err, tail(out, 25))
			}
			if strings.Contains(out, "Mutating the JoinConfiguration.Discovery") {
				t.Fatalf("discovery with Plinth's token and CA hash failed; kubeadm fell back to its dry-run fakes:\n%s", tail(out, 25))
			}
			t.Logf("kubeadm join --dry-run %s ok in %s", host, time.Since(start).Round(10*time.Millisecond))
			if host == "ctl-1" && !strings.Contains(out, "[download-certs]") {
				t.Errorf("control-plane join dry run did not prepare a control plane:\n%s", tail(out, 25))
			}
		})
	}

	t.Run("node labels and taints", func(t *testing.T) {
		ctx := c.ctx()
		for _, n := range []string{"ctl-0", "ctl-1", "compute-0", "compute-1", "compute-2"} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"team": "someone-else"}}}
			if _, err := c.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		labels := NewLabelsDriver(t.TempDir())
		apply := func(o siteOpts) map[string]driver.Result {
			steps := renderSite(t, o)
			res := map[string]driver.Result{}
			for _, st := range steps {
				if st.Kind == kubespec.KindLabels {
					res[st.ID] = driver.Run(ctx, labels, c.sec.resolve(t, st))
				}
			}
			return res
		}
		for id, r := range apply(c.opts) {
			if !r.OK() || len(r.Changes) == 0 {
				t.Fatalf("%s: %+v", id, r)
			}
		}
		want := map[string]map[string]string{
			"ctl-0":     {"openstack-control-plane": "enabled"},
			"compute-0": {"openstack-compute-node": "enabled", "openvswitch": "enabled", "rack": "r1"},
			"compute-1": {"openstack-compute-node": "enabled", "openvswitch": "enabled", "sriov": "enabled"},
		}
		for n, labels := range want {
			node, err := c.admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range labels {
				if node.Labels[k] != v {
					t.Errorf("%s: label %s=%q, want %q", n, k, node.Labels[k], v)
				}
			}
			if node.Labels["team"] != "someone-else" {
				t.Errorf("%s: someone else's label was touched", n)
			}
		}
		assertTaint(t, c, ctx, "ctl-1", "node-role.kubernetes.io/control-plane", "", true)
		assertTaint(t, c, ctx, "compute-1", "dedicated", "nfv", true)

		for id, r := range apply(c.opts) {
			if !r.OK() || len(r.Changes) != 0 {
				t.Fatalf("re-applying changed something: %s: %+v", id, r)
			}
		}

		// compute-0 loses its rack label, controllers become schedulable (AIO style).
		o := c.opts
		o.labels = "{}"
		o.extra = "    schedulableControllers: true\n"
		for id, r := range apply(o) {
			if !r.OK() {
				t.Fatalf("%s: %+v", id, r)
			}
		}
		node, _ := c.admin.CoreV1().Nodes().Get(ctx, "compute-0", metav1.GetOptions{})
		if _, ok := node.Labels["rack"]; ok || node.Labels["team"] != "someone-else" || node.Labels["openvswitch"] != "enabled" {
			t.Errorf("compute-0 labels after removal: %v", node.Labels)
		}
		assertTaint(t, c, ctx, "ctl-1", "node-role.kubernetes.io/control-plane", "", false)
	})

	t.Run("cni manifest", func(t *testing.T) {
		ctx := c.ctx()
		steps := renderSite(t, c.opts)
		st := steps[plan.StepID("ctl-0", kubespec.KindCNI, "")]
		cni := NewCNIDriver(t.TempDir(), WithRoot(c.root))
		raw := c.sec.resolve(t, st)
		_, err := cni.Diff(ctx, raw)
		if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "the site ships it") {
			t.Fatalf("a missing manifest must say so: %v", err)
		}
		var in kubespec.CNIInputs
		_ = json.Unmarshal(raw, &in)
		if err := writeFile(c.paths.Join(in.Manifest), []byte(cniManifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := driver.Run(ctx, cni, raw); !r.OK() || len(r.Changes) != 4 {
			t.Fatalf("apply: %+v", r)
		}
		if r := driver.Run(ctx, cni, raw); !r.OK() || len(r.Changes) != 0 {
			t.Fatalf("re-apply changed something: %+v", r)
		}
		if _, err := c.admin.CoreV1().ConfigMaps("plinth-cni-test").Get(ctx, "calico-config", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("flannel manifest", func(t *testing.T) { testFlannelApply(t, c) })
	t.Run("cluster health", func(t *testing.T) { testHealth(t, c) })
	t.Run("Plinth's API client", func(t *testing.T) { testAPIClient(t, c) })
}

// testAPIClient checks restAPI and kinds, the drivers' own client, against what the
// API server and client-go's clientset say.
func testAPIClient(t *testing.T, c *apiCluster) {
	ctx := c.ctx()
	const name = "api-client-node"
	if _, err := c.api.Node(ctx, name); !apierrors.IsNotFound(err) {
		t.Fatalf("a missing node must be NotFound: %v", err)
	}
	if ok, err := c.api.NodeExists(ctx, name); ok || err != nil {
		t.Fatalf("a missing node must not exist, without an error: %v %v", ok, err)
	}
	if _, err := c.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.api.NodeExists(ctx, name); !ok || err != nil {
		t.Fatalf("a created node must exist: %v %v", ok, err)
	}
	if err := c.api.PatchNode(ctx, name, []byte(`{"metadata":{"labels":{"plinth.dev/t":"1"}}}`)); err != nil {
		t.Fatal(err)
	}
	n, err := c.api.Node(ctx, name)
	if err != nil || n.Labels["plinth.dev/t"] != "1" {
		t.Fatalf("patched label not read back: %v %v", n.Labels, err)
	}
	stale := n.DeepCopy()
	n.Spec.Taints = []corev1.Taint{{Key: "plinth.dev/t", Effect: corev1.TaintEffectNoSchedule}}
	if err := c.api.UpdateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := c.api.UpdateNode(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("an update from a stale read must be a Conflict: %v", err)
	}
	got, err := c.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(got.Spec.Taints) != 1 {
		t.Fatalf("update not written: %+v %v", got.Spec, err)
	}
	nodes, err := c.api.Nodes(ctx)
	if err != nil || !slices.ContainsFunc(nodes, func(n corev1.Node) bool { return n.Name == name }) {
		t.Fatalf("node list misses %s: %v", name, err)
	}

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api-client-secret", Namespace: metav1.NamespaceSystem}, Type: "plinth.dev/test"}
	if _, err := c.admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := c.api.Secrets(ctx, "type=plinth.dev/test")
	if err != nil || len(list) != 1 || list[0].Name != sec.Name {
		t.Fatalf("field selector: %v %v", list, err)
	}
	if err := c.api.DeleteSecret(ctx, sec.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.Secret(ctx, sec.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted secret must be NotFound: %v", err)
	}
	if err := c.api.DeleteSecret(ctx, sec.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("deleting a missing secret must be NotFound: %v", err)
	}

	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.super)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := newCoreREST(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	k := newKinds(rc)
	for _, tc := range []struct {
		gvk        schema.GroupVersionKind
		resource   string
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", true}, // not pods/status
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, "daemonsets", true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
	} {
		gvr, ns, err := k.mapping(ctx, tc.gvk)
		if err != nil || gvr != tc.gvk.GroupVersion().WithResource(tc.resource) || ns != tc.namespaced {
			t.Errorf("%s: %v namespaced=%v %v, want %s namespaced=%v", tc.gvk, gvr, ns, err, tc.resource, tc.namespaced)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "crd.projectcalico.org", Version: "v1", Kind: "NoSuchKind"}, // group not served
		{Group: "apps", Version: "v1", Kind: "NoSuchKind"},                  // kind not in a served group
		{Group: "apps", Version: "v9", Kind: "DaemonSet"},                   // version not served
	} {
		if _, _, err := k.mapping(ctx, gvk); !meta.IsNoMatchError(err) {
			t.Errorf("%s: want no match, got %v", gvk, err)
		}
	}
}

// testHealth runs kube.health against the real API server, whose address on the veth
// is the VIP: nodes Ready or not (as kubelet would post them), a node missing, and an
// endpoint nothing listens on.
func testHealth(t *testing.T, c *apiCluster) {
	ctx := c.ctx()
	st := renderSite(t, c.opts)[plan.StepID("ctl-0", kubespec.KindHealth, "")]
	raw := c.sec.resolve(t, st)
	var in kubespec.HealthInputs
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	if want := "https://" + net.JoinHostPort(c.vip(), strconv.Itoa(c.port)); in.Endpoint != want || !in.VIP {
		t.Fatalf("health endpoint %s (vip %v), want %s", in.Endpoint, in.VIP, want)
	}
	for _, n := range in.Nodes { // the labels subtest made them; make sure
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if _, err := c.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	d := NewHealthDriver(t.TempDir(), WithRoot(c.root))
	summaries := func(raw json.RawMessage) []string {
		t.Helper()
		got, err := driver.Check(ctx, d, raw)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := summaries(raw); len(got) != len(in.Nodes) || !strings.Contains(got[0], "kubelet has not reported a Ready condition") {
		t.Fatalf("nodes without status: %q", got)
	}

	for _, n := range in.Nodes {
		setReady(t, c, ctx, n, n != "compute-1")
	}
	got := summaries(raw)
	want := "node compute-1 is not Ready: KubeletNotReady: container runtime network not ready: cni plugin not initialized"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("one node not Ready: %q, want [%q]", got, want)
	}
	d.wait = 2 * time.Second
	r := driver.Run(ctx, d, raw)
	if r.OK() || !r.Retryable || !strings.Contains(r.Error, "still unhealthy after waiting 2s: "+want) {
		t.Fatalf("a run whose node stays not Ready must fail, retryably, naming it: %+v", r)
	}
	t.Logf("failed run: %s", r.Error)

	// A node that turns Ready while the step waits: the run succeeds then, not at a
	// retry.
	d.wait = time.Minute
	errc := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		errc <- postReady(ctx, c, "compute-1", true)
	}()
	r = driver.Run(ctx, d, raw)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !r.OK() || len(r.Changes) != 1 || r.Changes[0] != want {
		t.Fatalf("a node Ready during the wait: %+v", r)
	}
	if got := summaries(raw); len(got) != 0 {
		t.Fatalf("all nodes Ready, yet %q", got)
	}
	if r := driver.Run(ctx, d, raw); !r.OK() || len(r.Changes) != 0 {
		t.Fatalf("healthy cluster: %+v", r)
	}

	with := func(f func(*kubespec.HealthInputs)) json.RawMessage {
		v := in
		v.Nodes = slices.Clone(in.Nodes)
		f(&v)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got = summaries(with(func(v *kubespec.HealthInputs) { v.Nodes = append(v.Nodes, "compute-9") }))
	if len(got) != 1 || !strings.HasPrefix(got[0], "node compute-9 is not Ready: not registered") {
		t.Fatalf("a missing node: %q", got)
	}
	closed := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(t, 1)[0]))
	got = summaries(with(func(v *kubespec.HealthInputs) { v.Endpoint = closed }))
	if len(got) != 1 || !strings.HasPrefix(got[0], "API not reachable through the VIP "+closed+": ") || !strings.Contains(got[0], "connection refused") {
		t.Fatalf("an endpoint nothing listens on: %q", got)
	}
	t.Logf("drift: %s", got[0])
}

// setReady posts a node's Ready condition, as its kubelet would (postReady: from a
// goroutine).
func setReady(t *testing.T, c *apiCluster, ctx context.Context, name string, ready bool) {
	t.Helper()
	if err := postReady(ctx, c, name, ready); err != nil {
		t.Fatal(err)
	}
}

func postReady(ctx context.Context, c *apiCluster, name string, ready bool) error {
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	if !ready {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready: cni plugin not initialized"
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{cond}
		_, err = c.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// cniManifest stands in for Calico's: a namespace, a CRD, an object of that CRD
// (applied once the API serves it) and a ConfigMap.
const cniManifest = `apiVersion: v1
kind: Namespace
metadata: {name: plinth-cni-test}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ippools.crd.projectcalico.org}
spec:
  group: crd.projectcalico.org
  names: {kind: IPPool, plural: ippools, singular: ippool, listKind: IPPoolList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata: {name: default-ipv4-ippool}
spec: {cidr: 10.244.0.0/16}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: calico-config, namespace: plinth-cni-test}
data: {veth_mtu: "1450"}
`

func assertTaint(t *testing.T, c *apiCluster, ctx context.Context, node, key, value string, want bool) {
	t.Helper()
	n, err := c.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range n.Spec.Taints {
		if tt.Key == key {
			if !want {
				t.Errorf("%s: taint %s still present", node, key)
			} else if tt.Value != value {
				t.Errorf("%s: taint %s=%s, want %s", node, key, tt.Value, value)
			}
			return
		}
	}
	if want {
		t.Errorf("%s: taint %s missing (%v)", node, key, n.Spec.Taints)
	}
}
