package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/api"
)

// TestCommittedSchemaIsCurrent regenerates the schema and compares it with both
// committed copies: a changed type, comment, enum or default must be regenerated.
func TestCommittedSchemaIsCurrent(t *testing.T) {
	files, err := Generate("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "../../../docs/schema"} {
		for name, want := range files {
			p := filepath.Join(dir, name)
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale: run go generate ./pkg/api/schema", p)
			}
		}
	}
}

// compile loads the committed schemas into a real JSON Schema 2020-12 validator.
func compile(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	docs, err := Documents()
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const base = "file:///schema/"
	for _, f := range []string{"site.json", "host.json", "application.json", "manifest.json"} {
		b, err := embedded.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(base+f, v); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, d := range append(docs, Document{Kind: "manifest", File: "manifest.json"}) {
		s, err := c.Compile(base + d.File)
		if err != nil {
			t.Fatalf("%s does not compile as JSON Schema: %v", d.File, err)
		}
		out[d.Kind] = s
	}
	return out
}

// documents splits a YAML stream at its "---" lines and returns each document as JSON.
func documents(t *testing.T, name string, data []byte) []any {
	t.Helper()
	var out []any
	for i, text := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(data), -1) {
		j, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			t.Fatalf("%s document %d: %v", name, i+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// examples are the manifests the repository shows operators: the lab site and the
// YAML blocks of docs/manifest.md that are whole documents.
func examples(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	lab, err := os.ReadFile("../../../examples/lab/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out["examples/lab/site.yaml"] = lab
	out["application example"] = []byte(exampleApplication)
	apps, err := filepath.Glob("../../../examples/apps/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range apps {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "apiVersion: plinth.dev/") {
			out[strings.TrimPrefix(p, "../../../")] = b
		}
	}
	md, err := os.ReadFile("../../../docs/manifest.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(md), -1) {
		if strings.Contains(m[1], "apiVersion: plinth.dev/") {
			out["docs/manifest.md block "+string(rune('1'+i))] = []byte(m[1])
		}
	}
	return out
}

// exampleApplication is the Application of issue 12's brief: every kind of gate
// but dpdk, a sequenced group, values and a wait policy.
const exampleApplication = `apiVersion: plinth.dev/v1alpha1
kind: Application
metadata: {name: demo}
spec:
  passwords: [admin]
  groups:
  - name: base
    charts:
    - {name: web, source: {archive: web-0.1.0.tgz}, values: {replicas: 2, nested: {list: [1, a]}}}
  - name: top
    sequenced: true
    gates: [{nodesLabelled: {label: openstack-compute-node=enabled, min: 2}}, {cephUsers: [kube-rbd]}, {chart: web}]
    charts:
    - {name: api, source: {archive: api-0.1.0.tgz}, namespace: demo, wait: {timeoutSeconds: 120}, protected: true}
`

func TestExamplesMatchSchema(t *testing.T) {
	schemas := compile(t)
	checked := 0
	for name, data := range examples(t) {
		// The examples are valid for pkg/api itself; the schema must agree.
		if _, err := api.Decode(name, data); err != nil {
			t.Errorf("%s: Decode: %v", name, err)
		}
		for i, doc := range documents(t, name, data) {
			kind, _ := doc.(map[string]any)["kind"].(string)
			s, ok := schemas[kind]
			if !ok {
				t.Errorf("%s document %d: kind %q has no schema", name, i+1, kind)
				continue
			}
			if err := s.Validate(doc); err != nil {
				t.Errorf("%s document %d: %v", name, i+1, err)
			}
			if err := schemas["manifest"].Validate(doc); err != nil {
				t.Errorf("%s document %d: manifest.json: %v", name, i+1, err)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("only %d example documents found", checked)
	}
	t.Logf("%d example documents match the schema", checked)
}

// TestSchemaRejectsWhatDecodeRejects: a misspelt field, a wrong type, a value outside
// a validator's list and a missing required field fail the schema, as they fail
// Decode or Validate.
func TestSchemaRejectsWhatDecodeRejects(t *testing.T) {
	schemas := compile(t)
	base := `apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: compute-0}
spec:
  roles: [worker]
  managementAddress: 10.0.0.5
`
	for _, tc := range []struct{ name, yaml, want string }{
		{"misspelt field", base + "  interfaces: [{name: eth0, tpye: bond}]\n", "tpye"},
		{"wrong type", base + "  interfaces: [{name: eth0, mtu: big}]\n", "mtu"},
		{"bad enum", base + "  interfaces: [{name: eth0, type: team}]\n", "type"},
		{"bad list item", strings.Replace(base, "[worker]", "[worker, boss]", 1), "roles"},
		{"bad map key", "apiVersion: plinth.dev/v1alpha1\nkind: Site\nmetadata: {name: s}\nspec:\n  controllers: [c0]\n  ceph: {users: [{name: u, caps: {rgw: x}}]}\n", "rgw"},
		{"missing required", strings.Replace(base, "  managementAddress: 10.0.0.5\n", "", 1), "managementAddress"},
		{"bad wait", strings.Replace(exampleApplication, "timeoutSeconds: 120", "for: everything", 1), "for"},
		{"unknown gate", strings.Replace(exampleApplication, "{chart: web}", "{pods: web}", 1), "pods"},
		{"values not a map", strings.Replace(exampleApplication, "values: {replicas: 2, nested: {list: [1, a]}}", "values: [replicas]", 1), "values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := api.Decode("test.yaml", []byte(tc.yaml))
			if err == nil {
				m.Default()
				if errs := m.Validate("test.yaml"); len(errs) == 0 {
					t.Fatalf("pkg/api accepts the case; fix the test")
				}
			}
			doc := documents(t, tc.name, []byte(tc.yaml))[0]
			kind := doc.(map[string]any)["kind"].(string)
			for _, s := range []string{kind, "manifest"} {
				err = schemas[s].Validate(doc)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s schema error %v, want one about %s", s, err, tc.want)
				}
			}
		})
	}
}

func TestFind(t *testing.T) {
	docs, err := Documents()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"site":                           "site",
		"Sites":                          "site",
		"site.spec.kubernetes":           "site.spec.kubernetes",
		"site.spec.kubernetes.cni":       "site.spec.kubernetes.cni",
		"host.spec.interfaces.bond.mode": "host.spec.interfaces.bond.mode",
		"host.spec.interfaces.Bond":      "host.spec.interfaces.bond",
		"site.spec.kubernetes.containerd.mirrors.endpoints": "site.spec.kubernetes.containerd.mirrors.endpoints",
	} {
		f, err := Find(docs, path)
		if err != nil || f.Path != want {
			t.Errorf("Find(%q) = %q, %v; want %q", path, f.Path, err, want)
		}
	}
	f, _ := Find(docs, "site.spec.policy.drift")
	if f.Schema.Default != api.DefaultDrift || len(f.Schema.Enum) != len(api.DriftPolicies) || f.Schema.Description == "" {
		t.Errorf("site.spec.policy.drift: default %v, enum %v, description %q", f.Schema.Default, f.Schema.Enum, f.Schema.Description)
	}
	for path, want := range map[string]string{
		"site.spec.kubernets":      "site.spec.kubernets: no such field; site.spec has: ceph, controllers, kubernetes, networks, ovs, policy, witness",
		"pod.spec":                 "pod: no such kind; valid kinds are site, host, application",
		"site.spec.witness.name":   "site.spec.witness.name: no such field; site.spec.witness is a string and has no fields",
		"host.spec.roles.whatever": "host.spec.roles.whatever: no such field; host.spec.roles is a []string and has no fields",
	} {
		if _, err := Find(docs, path); err == nil || err.Error() != want {
			t.Errorf("Find(%q) error %v, want %q", path, err, want)
		}
	}
}

// TestDefaultsComeFromPackageAPI spot-checks that probing pkg/api's defaulting found
// its defaults, and left out the ones that depend on other fields.
func TestDefaultsComeFromPackageAPI(t *testing.T) {
	d, err := probeDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"site.spec.policy.maxAttempts":                api.DefaultMaxAttempts,
		"site.spec.kubernetes.version":                api.DefaultKubernetesVersion,
		"site.spec.kubernetes.etcd.peerPort":          api.DefaultEtcdPeerPort,
		"site.spec.kubernetes.containerd.snapshotter": api.DefaultSnapshotter,
		"host.spec.interfaces.bond.mode":              api.DefaultBondMode,
		"host.spec.interfaces.vxlan.port":             api.DefaultVXLANPort,
		"site.spec.ceph.pools.application":            api.DefaultCephApp,
	} {
		if d[path] != want {
			t.Errorf("default of %s = %v, want %v", path, d[path], want)
		}
	}
	for _, path := range []string{"site.spec.ceph.pools.size", "site.spec.ceph.pools.minSize", "site.spec.kubernetes.containerd.sandboxImage"} {
		if v, ok := d[path]; ok {
			t.Errorf("%s has default %v, but it depends on other fields", path, v)
		}
	}
}
