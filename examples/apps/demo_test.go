package main

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/plinth-dev/plinth/internal/apiservertest"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
)

const demoDir = "demo"

// demoApp is examples/apps/demo/application.yaml, decoded strictly (unknown
// fields are errors), and its charts packed from charts/ by name.
func demoApp(t *testing.T) (*api.Application, map[string]Archive) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(demoDir, "application.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// TODO(lead): decode through api.Decode once it knows the Application kind.
	var app api.Application
	if err := yaml.UnmarshalStrict(data, &app); err != nil {
		t.Fatalf("application.yaml: %v", err)
	}
	archives, err := Archives(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Archive{}
	for _, a := range archives {
		byName[a.Name] = a
	}
	return &app, byName
}

// systemOverrides is what Plinth's generated overrides give every chart of the lab's
// site: the compute nodes' selector (from the OpenStack-Helm node labels).
// The form is OpenStack-Helm's (TestSystemOverridesForm checks it is Plinth's).
func systemOverrides(compute map[string]string) map[string]any {
	sel := map[string]any{}
	for k, v := range compute {
		sel["node_selector_key"], sel["node_selector_value"] = k, v
	}
	return map[string]any{"plinth": map[string]any{"nodeSelectors": map[string]any{"compute": sel}}}
}

// merged is the application's values with the system overrides above them (top
// level keys; the overrides own "plinth").
func merged(app, system map[string]any) map[string]any {
	out := maps.Clone(app)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, system)
	return out
}

// TestDemoApplication: the demo document names the charts that charts/ packs,
// in the groups and with the gates the lab expects, and packing is deterministic.
func TestDemoApplication(t *testing.T) {
	app, archives := demoApp(t)
	if app.APIVersion != "plinth.dev/v1alpha1" || app.Kind != api.KindApplication || app.Metadata.Name != "demo" {
		t.Errorf("document %s/%s %q", app.APIVersion, app.Kind, app.Metadata.Name)
	}
	var groups, charts []string
	for _, g := range app.Spec.Groups {
		groups = append(groups, g.Name)
		for _, c := range g.Charts {
			charts = append(charts, c.Name)
			a, ok := archives[c.Source.Archive]
			if !ok {
				t.Errorf("chart %s: source archive %q is not one charts/ packs (%v)", c.Name, c.Source.Archive, slices.Sorted(maps.Keys(archives)))
			} else if a.Chart.Name != c.Name {
				t.Errorf("chart %s: archive %s holds chart %s", c.Name, c.Source.Archive, a.Chart.Name)
			}
			if c.Namespace != "demo" {
				t.Errorf("chart %s: namespace %q, want demo", c.Name, c.Namespace)
			}
		}
	}
	if !slices.Equal(groups, []string{"base", "web"}) || !slices.Equal(charts, []string{"demo-config", "hello"}) {
		t.Errorf("groups %v, charts %v", groups, charts)
	}
	web := app.Spec.Groups[1]
	want := []api.Gate{
		{NodesLabelled: &api.NodesGate{Label: "openstack-compute-node=enabled", Min: 2}},
		{CephUsers: []string{"kube-rbd"}},
		{Chart: "demo-config"},
	}
	if !reflect.DeepEqual(web.Gates, want) {
		t.Errorf("web gates %+v", web.Gates)
	}

	// The same sources, the same bytes.
	again, err := Archives(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range again {
		if !bytes.Equal(a.Data, archives[a.Name].Data) {
			t.Errorf("%s: packing twice gave different bytes", a.Name)
		}
	}

	// The image is the site bundle's (pkg/bundle is the one home of its reference).
	vals, err := os.ReadFile(filepath.Join(demoDir, "charts", "hello", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := helmrelease.ParseValues(vals)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := v["image"].(map[string]any)
	if ref, want := img["repository"].(string)+":"+img["tag"].(string), bundle.ImageRef(bundle.HelloImage, bundle.DefaultPins.Hello); ref != want || img["pullPolicy"] != "Never" {
		t.Errorf("hello image %s pull %v, want the bundle's %s pull Never", ref, img["pullPolicy"], want)
	}
}

// render renders an archive offline as Helm's install would, and returns the
// manifest of one template.
func render(t *testing.T, a Archive, values map[string]any, template string) (string, error) {
	t.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(a.Data))
	if err != nil {
		t.Fatal(err)
	}
	opts := common.ReleaseOptions{Name: a.Chart.Name, Namespace: "demo", Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return "", err
	}
	return out[a.Chart.Name+"/templates/"+template], nil
}

// TestSystemOverridesForm: the node selector the tests give the chart is the one
// Plinth's system overrides generate (pkg/appplan), not a form of the test's own.
func TestSystemOverridesForm(t *testing.T) {
	app, _ := demoApp(t)
	site := &api.Site{Metadata: api.ObjectMeta{Name: "lab"}}
	got := appplan.System(appplan.SiteFacts{Site: site}, app, app.Spec.Groups[1].Charts[0])
	want := systemOverrides(map[string]string{kubespec.LabelCompute: kubespec.LabelEnabled})
	g := got["plinth"].(map[string]any)["nodeSelectors"].(map[string]any)["compute"]
	w := want["plinth"].(map[string]any)["nodeSelectors"].(map[string]any)["compute"]
	if !reflect.DeepEqual(g, w) {
		t.Errorf("appplan.System's plinth.nodeSelectors.compute = %v; the tests use %v", g, w)
	}
}

// TestDemoHelloNodeSelector: the system overrides' plinth.nodeSelectors.compute
// replaces the chart's default whole; without it the default holds; a value
// that is not a map is refused naming the key.
func TestDemoHelloNodeSelector(t *testing.T) {
	_, archives := demoApp(t)
	hello := archives["hello-0.1.0.tgz"]
	for name, tc := range map[string]struct {
		values map[string]any
		want   map[string]string
	}{
		"chart default":    {nil, map[string]string{"openstack-compute-node": "enabled"}},
		"system overrides": {systemOverrides(map[string]string{"openstack-compute-node": "enabled"}), map[string]string{"openstack-compute-node": "enabled"}},
		"override wins":    {systemOverrides(map[string]string{"example.org/pool": "web"}), map[string]string{"example.org/pool": "web"}},
	} {
		m, err := render(t, hello, tc.values, "deployment.yaml")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(m), &d); err != nil {
			t.Fatalf("%s: rendered Deployment: %v\n%s", name, err, m)
		}
		if !maps.Equal(d.Spec.Template.Spec.NodeSelector, tc.want) {
			t.Errorf("%s: nodeSelector %v, want %v", name, d.Spec.Template.Spec.NodeSelector, tc.want)
		}
	}
	bad := map[string]any{"plinth": map[string]any{"nodeSelectors": map[string]any{"compute": "openstack-compute-node=enabled"}}}
	if _, err := render(t, hello, bad, "deployment.yaml"); err == nil || !strings.Contains(err.Error(), "plinth.nodeSelectors.compute is openstack-compute-node=enabled, want {node_selector_key") {
		t.Errorf("a string selector: %v, want an error naming plinth.nodeSelectors.compute", err)
	}
}

// TestDemoInstallRealAPIServer installs the demo application, group by group, on
// a real kube-apiserver and etcd with the lab's system overrides, and checks what
// the lab relies on: the hello pods' node selector, the Ceph key Secret mounted
// (not optional), the spread over nodes, the readiness probe and the Service. The
// harness runs no kubelet or controllers, so it waits for hooks only (the lab's
// e2e test sees the pods ready). Then an upgrade with another selector, and
// removal in reverse order.
func TestDemoInstallRealAPIServer(t *testing.T) {
	app, archives := demoApp(t)
	c := apiservertest.Start(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	d, err := helmrelease.New(c.Kubeconfig, log)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wait := helmrelease.Wait{For: helmrelease.WaitHooks, Timeout: time.Minute}

	apply := func(system map[string]any) {
		t.Helper()
		for _, g := range app.Spec.Groups {
			for _, ch := range g.Charts {
				start := time.Now()
				r, err := d.Apply(ctx, helmrelease.Request{Release: ch.Name, Namespace: ch.Namespace,
					Chart: archives[ch.Source.Archive].Chart, Values: merged(ch.Values, system), Wait: wait})
				if err != nil {
					t.Fatalf("group %s: %v", g.Name, err)
				}
				t.Logf("group %s: %s/%s revision %d %s changed=%v in %v", g.Name, ch.Namespace, ch.Name, r.Status.Revision, r.Status.State, r.Changed, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	apply(systemOverrides(map[string]string{"openstack-compute-node": "enabled"}))

	cm, err := cs.CoreV1().ConfigMaps("demo").Get(ctx, "demo-config", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "hello from the lab's demo application" {
		t.Errorf("ConfigMap demo-config: %v %v (want the application's greeting)", cm.Data, err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("demo").Get(ctx, "hello", metav1.GetOptions{}); err != nil {
		t.Errorf("ServiceAccount hello: %v", err)
	}

	dep, err := cs.AppsV1().Deployments("demo").Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	if *dep.Spec.Replicas != 2 || !maps.Equal(pod.NodeSelector, map[string]string{"openstack-compute-node": "enabled"}) {
		t.Errorf("Deployment hello: replicas %d, nodeSelector %v", *dep.Spec.Replicas, pod.NodeSelector)
	}
	if pod.ServiceAccountName != "hello" {
		t.Errorf("service account %q", pod.ServiceAccountName)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" ||
		pod.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("topology spread %+v", pod.TopologySpreadConstraints)
	}
	var key *corev1.SecretVolumeSource
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "pvc-ceph-client-key" {
			key = v.Secret
			mounted := false
			for _, m := range pod.Containers[0].VolumeMounts {
				mounted = mounted || (m.Name == v.Name && m.MountPath == "/etc/ceph-client")
			}
			if !mounted {
				t.Errorf("volume %s not mounted at /etc/ceph-client: %+v", v.Name, pod.Containers[0].VolumeMounts)
			}
		}
	}
	if key == nil || key.Optional == nil || *key.Optional || len(key.Items) != 1 || key.Items[0].Key != "key" || key.Items[0].Path != "key" {
		t.Errorf("Secret volume pvc-ceph-client-key (item key → /etc/ceph-client/key, not optional): %+v", key)
	}
	ctr := pod.Containers[0]
	if ctr.Image != bundle.ImageRef(bundle.HelloImage, bundle.DefaultPins.Hello) || ctr.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %s pull %s", ctr.Image, ctr.ImagePullPolicy)
	}
	if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "http" || len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != 8080 {
		t.Errorf("readiness probe %+v on ports %+v (want http = 8080)", p, ctr.Ports)
	}
	svc, err := cs.CoreV1().Services("demo").Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.String() != "http" ||
		!maps.Equal(svc.Spec.Selector, dep.Spec.Selector.MatchLabels) {
		t.Errorf("Service hello: ports %+v selector %v (want 80 → http, the Deployment's pods)", svc.Spec.Ports, svc.Spec.Selector)
	}

	// New system overrides: the hello release upgrades, its selector replaced whole.
	apply(systemOverrides(map[string]string{"example.org/pool": "web"}))
	if s, err := d.Status(ctx, "hello", "demo"); err != nil || s.Revision != 2 {
		t.Errorf("hello after new overrides: %+v %v, want revision 2", s, err)
	}
	// The same inputs again: no new revision anywhere.
	apply(systemOverrides(map[string]string{"example.org/pool": "web"}))
	if s, err := d.Status(ctx, "hello", "demo"); err != nil || s.Revision != 2 {
		t.Errorf("hello after the same overrides again: %+v %v, want revision 2 still", s, err)
	}
	dep, err = cs.AppsV1().Deployments("demo").Get(ctx, "hello", metav1.GetOptions{})
	if err != nil || !maps.Equal(dep.Spec.Template.Spec.NodeSelector, map[string]string{"example.org/pool": "web"}) {
		t.Errorf("nodeSelector after new overrides: %v %v", dep.Spec.Template.Spec.NodeSelector, err)
	}

	for i := len(app.Spec.Groups) - 1; i >= 0; i-- {
		for _, ch := range app.Spec.Groups[i].Charts {
			if err := d.Uninstall(ctx, ch.Name, ch.Namespace, wait); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cs.AppsV1().Deployments("demo").Get(ctx, "hello", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment hello after removal: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("demo").Get(ctx, "demo-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap demo-config after removal: %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
