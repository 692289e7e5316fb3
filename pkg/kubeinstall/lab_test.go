package kubeinstall

import (
	"os"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// The lab manifest's kubernetes part is valid and renders the whole bootstrap on the
// lab's hosts (where the lab shows those steps as not run).
func TestLabManifestKubernetesPart(t *testing.T) {
	b, err := os.ReadFile("../../examples/lab/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	render := func(yaml string) []plan.Step {
		m, err := api.Decode("site.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		m.Default()
		if errs := m.Validate("site.yaml"); len(errs) > 0 {
			t.Fatal(errs)
		}
		steps, err := plan.Render(m.Site, m.Hosts)
		if err != nil {
			t.Fatal(err)
		}
		return steps
	}
	got := map[string]plan.Step{}
	for _, st := range render(string(b)) {
		got[st.ID] = st
	}
	for _, id := range []string{"controller-0/kube.vip", "controller-0/kube.init", "controller-1/kube.join-control-plane",
		"witness/kube.etcd", "compute-0/kube.join", "controller-0/kube.labels/compute-0", "controller-0/kube.cni"} {
		if _, ok := got[id]; !ok {
			t.Errorf("the lab's kubernetes part does not render %s", id)
		}
	}
	if in := string(got["controller-0/kube.init"].Inputs); !strings.Contains(in, `"endpoint":"10.214.0.10:6443"`) || !strings.Contains(in, `"ip":"10.214.0.1`) {
		t.Errorf("init should advertise a cluster-host pool address behind the VIP: %s", in)
	}
	if !strings.Contains(string(got["controller-0/kube.labels/compute-0"].Inputs), `"sriov":"enabled"`) {
		t.Error("compute-0 should be labelled sriov=enabled")
	}
}
