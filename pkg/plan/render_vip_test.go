package plan

import (
	"reflect"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

func TestRenderVIP(t *testing.T) {
	id := vrrpRouterID("lab")
	for _, tc := range []struct {
		name string
		k    api.KubernetesSpec
		host string
		want kubespec.VIPInputs
	}{
		{"keepalived by default, first controller", api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10"}, "ctl-0",
			kubespec.VIPInputs{Provider: kubespec.VIPKeepalived, VIP: "10.50.0.10", Port: 6443, Interface: "eth1",
				RouterID: id, Priority: kubespec.KeepalivedPriorityFirst, Address: "10.50.0.11", Peers: []string{"10.50.0.12"}}},
		{"keepalived, second controller", api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10", APIServerPort: 16443}, "ctl-1",
			kubespec.VIPInputs{Provider: kubespec.VIPKeepalived, VIP: "10.50.0.10", Port: 16443, Interface: "eth1",
				RouterID: id, Priority: kubespec.KeepalivedPrioritySecond, Address: "10.50.0.12", Peers: []string{"10.50.0.11"}}},
		{"kube-vip chosen", api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10", VIPProvider: api.VIPKubeVIP}, "ctl-0",
			kubespec.VIPInputs{Provider: kubespec.VIPKubeVIP, VIP: "10.50.0.10", Port: 6443, Interface: "eth1",
				Image: api.DefaultKubeVIPImage, FirstControlPlane: true}},
		{"kubeVIPImage alone still means kube-vip", api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10", KubeVIPImage: "r.local/kube-vip:v1"}, "ctl-1",
			kubespec.VIPInputs{Provider: kubespec.VIPKubeVIP, VIP: "10.50.0.10", Port: 6443, Interface: "eth1", Image: "r.local/kube-vip:v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			s, hs := kubeSite(true, &k)
			s.Metadata.Name = "lab"
			steps, err := Render(s, hs)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				if st.ID == tc.host+"/kube.vip" {
					if got := inputsOf[kubespec.VIPInputs](t, st); !reflect.DeepEqual(got, tc.want) {
						t.Fatalf("inputs\n got %+v\nwant %+v", got, tc.want)
					}
					return
				}
			}
			t.Fatalf("no %s/kube.vip", tc.host)
		})
	}
}

func TestVRRPRouterIDIsStableAndInRange(t *testing.T) {
	seen := map[int]bool{}
	for _, site := range []string{"lab", "site-a", "site-b", "x", "a-very-long-site-name-with-many-characters"} {
		id := vrrpRouterID(site)
		if id < 1 || id > 255 || id != vrrpRouterID(site) {
			t.Errorf("%s: router id %d", site, id)
		}
		seen[id] = true
	}
	if len(seen) < 4 {
		t.Errorf("router ids barely differ between sites: %v", seen)
	}
}
