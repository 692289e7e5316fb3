package plan

import (
	"reflect"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// kube.cni carries calico's manifest file, or for flannel the pod network and the
// bundle's image under the site's image repository.
func TestRenderKubernetesCNI(t *testing.T) {
	const admin = "plinth-secret:output/ctl-0/kube.init/admin.conf"
	for _, tc := range []struct {
		name string
		k    api.KubernetesSpec
		want kubespec.CNIInputs
	}{
		{"calico by default", api.KubernetesSpec{},
			kubespec.CNIInputs{Plugin: api.CNICalico, Manifest: api.DefaultCNIManifest, Kubeconfig: admin}},
		{"calico from the site's file", api.KubernetesSpec{CNI: api.CNISpec{Plugin: api.CNICalico, Manifest: "/srv/calico.yaml"}},
			kubespec.CNIInputs{Plugin: api.CNICalico, Manifest: "/srv/calico.yaml", Kubeconfig: admin}},
		{"flannel on the default pod network", api.KubernetesSpec{ImageRepository: "registry.local", CNI: api.CNISpec{Plugin: api.CNIFlannel}},
			kubespec.CNIInputs{Plugin: api.CNIFlannel, Kubeconfig: admin,
				Flannel: &kubespec.FlannelInputs{Network: api.DefaultPodSubnet, Image: "registry.local/flannel:v0.28.10"}}},
		{"flannel on the site's pod network and registry", api.KubernetesSpec{PodSubnet: "172.20.0.0/16", ImageRepository: "registry.example:5000/k8s",
			CNI: api.CNISpec{Plugin: api.CNIFlannel}},
			kubespec.CNIInputs{Plugin: api.CNIFlannel, Kubeconfig: admin,
				Flannel: &kubespec.FlannelInputs{Network: "172.20.0.0/16", Image: "registry.example:5000/k8s/flannel:v0.28.10"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			st, ok := kubeSteps(t, true, &k)["ctl-0/kube.cni"]
			if !ok {
				t.Fatal("no ctl-0/kube.cni")
			}
			if got := inputsOf[kubespec.CNIInputs](t, st); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("inputs\n got %+v (flannel %+v)\nwant %+v (flannel %+v)", got, got.Flannel, tc.want, tc.want.Flannel)
			}
		})
	}
}
