package kubeinstall

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

func TestFlannelManifest(t *testing.T) {
	const img = "registry.local/flannel:v0.28.10"
	for _, tc := range []struct {
		name    string
		in      kubespec.FlannelInputs
		wantErr string
	}{
		{"default pod network", kubespec.FlannelInputs{Network: "10.244.0.0/16", Image: img}, ""},
		{"site registry", kubespec.FlannelInputs{Network: "172.20.0.0/14", Image: "registry.example:5000/k8s/flannel:v0.28.10"}, ""},
		{"smallest network", kubespec.FlannelInputs{Network: "10.9.0.0/22", Image: img}, ""},
		{"network too small", kubespec.FlannelInputs{Network: "10.9.0.0/23", Image: img}, "must be /22 or larger"},
		{"not a network address", kubespec.FlannelInputs{Network: "10.244.1.0/16", Image: img}, `"10.244.1.0/16" must be an IPv4 network address`},
		{"IPv6", kubespec.FlannelInputs{Network: "fd00::/48", Image: img}, "must be an IPv4 network"},
		{"no network", kubespec.FlannelInputs{Image: img}, `network ""`},
		{"no image", kubespec.FlannelInputs{Network: "10.244.0.0/16"}, `image ""`},
		{"image with a quote", kubespec.FlannelInputs{Network: "10.244.0.0/16", Image: `x"y`}, "must be an image reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := FlannelManifest(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FlannelManifest = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeManifest(data)
			if err != nil {
				t.Fatalf("rendered manifest does not decode: %v\n%s", err, data)
			}
			var kinds []string
			var ds appsv1.DaemonSet
			var cm corev1.ConfigMap
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
				switch o.GetKind() {
				case "DaemonSet":
					fromUnstructured(t, o.Object, &ds)
				case "ConfigMap":
					fromUnstructured(t, o.Object, &cm)
				}
			}
			if want := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"}; !slices.Equal(kinds, want) {
				t.Fatalf("kinds %v, want %v", kinds, want)
			}
			var nc struct {
				Network string
				Backend struct{ Type string }
			}
			if err := json.Unmarshal([]byte(cm.Data["net-conf.json"]), &nc); err != nil || nc.Network != tc.in.Network || nc.Backend.Type != "vxlan" {
				t.Errorf("net-conf.json %q (%v)", cm.Data["net-conf.json"], err)
			}
			checkFlannelDaemonSet(t, &ds, tc.in.Image)
		})
	}
}

func checkFlannelDaemonSet(t *testing.T, ds *appsv1.DaemonSet, image string) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	if ds.Namespace != FlannelNamespace || !ps.HostNetwork || len(ps.Containers) != 1 {
		t.Fatalf("DaemonSet %s/%s hostNetwork=%v containers=%d", ds.Namespace, ds.Name, ps.HostNetwork, len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.Image != image || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %s pull %s, want %s pull Never", c.Image, c.ImagePullPolicy, image)
	}
	if caps := c.SecurityContext.Capabilities.Add; !slices.Equal(caps, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) {
		t.Errorf("capabilities %v", caps)
	}
	if len(ps.Tolerations) != 1 || ps.Tolerations[0].Operator != corev1.TolerationOpExists || ps.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v: must tolerate every taint (control-plane, not-ready)", ps.Tolerations)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			if mounts[v.HostPath.Path] != v.Name {
				t.Errorf("host path %s is not mounted at the same path", v.HostPath.Path)
			}
			delete(mounts, v.HostPath.Path)
		}
	}
	if len(mounts) != 1 || mounts["/etc/kube-flannel"] != "config" {
		t.Errorf("mounts left after the host paths: %v", mounts)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	if env["NODE_NAME"] != "spec.nodeName" || env["HOST_IP"] != "status.hostIP" || !slices.Contains(c.Command, "-iface=$(HOST_IP)") {
		t.Errorf("env %v command %v", env, c.Command)
	}
}

func fromUnstructured(t *testing.T, u map[string]any, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u, into, true); err != nil {
		t.Fatalf("%T: %v", into, err)
	}
}

// testFlannelApply applies the flannel manifest as kube.cni renders it to the real API
// server (which validates every object), then again: nothing changes.
func testFlannelApply(t *testing.T, c *apiCluster) {
	ctx := c.ctx()
	raw, err := json.Marshal(kubespec.CNIInputs{Plugin: "flannel", Kubeconfig: string(c.super),
		Flannel: &kubespec.FlannelInputs{Network: "10.244.0.0/16", Image: "registry.local/flannel:v0.28.10"}})
	if err != nil {
		t.Fatal(err)
	}
	cni := NewCNIDriver(t.TempDir(), WithRoot(c.root))
	if r := driver.Run(ctx, cni, raw); !r.OK() || len(r.Changes) != 6 {
		t.Fatalf("apply: %+v", r)
	}
	if r := driver.Run(ctx, cni, raw); !r.OK() || len(r.Changes) != 0 {
		t.Fatalf("re-apply changed something: %+v", r)
	}
	ds, err := c.admin.AppsV1().DaemonSets(FlannelNamespace).Get(ctx, "kube-flannel-ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkFlannelDaemonSet(t, ds, "registry.local/flannel:v0.28.10")
}
