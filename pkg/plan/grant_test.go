package plan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

func TestGrant(t *testing.T) {
	steps := map[string]Step{
		"c0/kube.init":    {ID: "c0/kube.init", Host: "c0", Kind: kubespec.KindInit, Deps: []string{"c0/kube.etcd"}},
		"c0/kube.etcd":    {ID: "c0/kube.etcd", Host: "c0", Kind: kubespec.KindEtcd},
		"w0/kube.join":    {ID: "w0/kube.join", Host: "w0", Kind: kubespec.KindJoin, Deps: []string{"c0/kube.init"}},
		"c0/kube.labels":  {ID: "c0/kube.labels/w0", Host: "c0", Kind: kubespec.KindLabels, Deps: []string{"w0/kube.join"}},
		"w0/host.network": {ID: "w0/host.network", Host: "w0", Kind: "host.network"},
	}
	lookup := func(id string) (Step, bool) { s, ok := steps[id]; return s, ok }
	for _, c := range []struct {
		step, secret string
		ok           bool
		why          string
	}{
		{"w0/kube.join", secretref.OutputName("c0/kube.init", kubespec.OutputCACertHash), true, ""},
		{"c0/kube.labels", secretref.OutputName("c0/kube.init", kubespec.OutputAdminConf), true, ""}, // through w0/kube.join
		{"w0/host.network", secretref.OutputName("c0/kube.init", kubespec.OutputAdminConf), false, "does not depend on"},
		{"c0/kube.etcd", secretref.OutputName("c0/kube.init", kubespec.OutputAdminConf), false, "does not depend on"},
		{"c0/kube.etcd", secretref.GeneratedName(secretref.GenEtcdCA, "s"), true, ""},
		{"w0/kube.join", secretref.GeneratedName(secretref.GenEtcdCA, "s"), false, "only to steps of kind kube.etcd"},
		{"w0/kube.join", secretref.GeneratedName(secretref.GenBootstrapToken, "s-kube-0"), true, ""},
		{"w0/kube.join", secretref.GeneratedName(secretref.GenHex32, "s-kube-certificate-key-0"), false, "not kube.join"},
		{"w0/host.network", secretref.GeneratedName(secretref.GenPassword, "x"), false, "granted to no step"},
		{"w0/host.network", "gossip-key", false, "may resolve only"},
		{"w0/host.network", "output/broken", false, "may resolve only"},
	} {
		err := Grant(steps[c.step], c.secret, lookup)
		var ge *GrantError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s asking for %s: %v, want granted", c.step, c.secret, err)
		case !c.ok && (!errors.As(err, &ge) || !strings.Contains(err.Error(), c.why)):
			t.Errorf("%s asking for %s: %v, want a refusal saying %q", c.step, c.secret, err, c.why)
		case !c.ok && (ge.Step != steps[c.step].ID || ge.Host != steps[c.step].Host || ge.Secret != c.secret):
			t.Errorf("refusal %+v does not name step, host and secret", ge)
		}
	}
}

// Every reference the planner renders into the lab site's steps passes its own grant
// rule: the rule and the renderers agree.
func TestGrantCoversEveryRenderedReference(t *testing.T) {
	for _, witness := range []bool{false, true} {
		s, hs := kubeSite(witness, &api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10"})
		steps, err := Render(s, hs)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]Step{}
		for _, st := range steps {
			byID[st.ID] = st
		}
		lookup := func(id string) (Step, bool) { s, ok := byID[id]; return s, ok }
		refs := 0
		for _, st := range steps {
			for _, name := range references(t, st.Inputs) {
				refs++
				if err := Grant(st, name, lookup); err != nil {
					t.Errorf("rendered reference refused: %v", err)
				}
			}
		}
		if refs == 0 {
			t.Fatal("no secret references rendered: the test proves nothing")
		}
	}
}

func references(t *testing.T, inputs json.RawMessage) []string {
	t.Helper()
	if len(inputs) == 0 {
		return nil
	}
	var doc any
	if err := json.Unmarshal(inputs, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(x any)
	walk = func(x any) {
		switch v := x.(type) {
		case string:
			if name, ok := secretref.Parse(v); ok {
				out = append(out, name)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return out
}
