package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecodeExample(t *testing.T) {
	m := example(t)
	if m.Site == nil || m.Site.Metadata.Name != "lab1" || m.Site.docIndex != 1 {
		t.Fatalf("site = %+v", m.Site)
	}
	if len(m.Hosts) != 6 {
		t.Fatalf("got %d hosts, want 6", len(m.Hosts))
	}
	for i, h := range m.Hosts {
		if h.docIndex != i+2 {
			t.Errorf("host %s: docIndex %d, want %d", h.Metadata.Name, h.docIndex, i+2)
		}
	}
	h := m.Hosts[3]
	if h.Spec.Interfaces[1].MTU != 9000 || h.Spec.Interfaces[0].MAC != "52:54:00:00:00:21" ||
		h.Spec.Labels["topology.kubernetes.io/zone"] != "a" || h.Spec.Routes[1].Table != 10 {
		t.Errorf("compute-0 decoded wrong: %+v", h.Spec)
	}
	if !m.Site.Spec.OVS.DPDK || m.Site.Spec.Kubernetes.ControlPlaneVIP != "10.0.1.10" {
		t.Errorf("site decoded wrong: %+v", m.Site.Spec)
	}
	m.Default()
	if errs := m.Validate("site.yaml"); len(errs) > 0 {
		t.Fatalf("example is invalid:\n%v", errs)
	}
}

func TestDecodeErrors(t *testing.T) {
	const site = "apiVersion: plinth.dev/v1alpha1\nkind: Site\nmetadata: {name: s}\nspec: {controllers: [a]}\n"
	const host = "apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: compute-0}\n"
	tests := []struct {
		name string
		in   string
		doc  int
		path string
		msg  string
	}{
		{"wrong apiVersion", "apiVersion: v1\nkind: Site\n", 1, "apiVersion", `"v1" is not supported; valid: "plinth.dev/v1alpha1"`},
		{"missing apiVersion", "kind: Site\n", 1, "apiVersion", "missing is not supported"},
		{"wrong kind", "apiVersion: plinth.dev/v1alpha1\nkind: Cluster\n", 1, "kind", `"Cluster" is not a valid kind; valid kinds are Site, Host and Application`},
		{"kind not a string", "apiVersion: plinth.dev/v1alpha1\nkind: [Site]\n", 1, "kind", "a list is not a valid kind"},
		{"not a mapping", "- a\n- b\n", 1, "", "expected a mapping with apiVersion and kind, got a list"},
		{"scalar document", "hello\n", 1, "", `got string "hello"`},
		{"unknown top-level field", site + "extra: 1\n", 1, "site.extra", `unknown field "extra"; valid fields are apiVersion, kind, metadata, spec, status`},
		{"unknown network field", site[:len(site)-2] + ", networks: [{name: mgmt, cidrs: 10.0.0.0/24}]}\n", 1,
			"site.spec.networks[mgmt].cidrs", `unknown field "cidrs"; valid fields are name, role, cidr, gateway, vlan, mtu`},
		{"unknown interface field", host + "spec:\n  interfaces:\n  - name: a\n  - {name: b, mtux: 1}\n", 1,
			"hosts[compute-0].spec.interfaces[1].mtux", `unknown field "mtux"`},
		{"field case matters", host + "spec: {Roles: [worker]}\n", 1, "hosts[compute-0].spec.Roles", `unknown field "Roles"`},
		{"unnamed host by position", "---\n" + site + "---\napiVersion: plinth.dev/v1alpha1\nkind: Host\nspec: {bogus: 1}\n", 2,
			"hosts[0].spec.bogus", "unknown field"},
		{"int as string", host + "spec:\n  interfaces: [{name: a, mtu: \"1500\"}]\n", 1,
			"hosts[compute-0].spec.interfaces[0].mtu", `expected an integer, got string "1500"`},
		{"fraction", host + "spec:\n  interfaces: [{name: a, mtu: 1500.5}]\n", 1,
			"hosts[compute-0].spec.interfaces[0].mtu", "expected an integer, got number 1500.5"},
		{"int out of range", host + "spec:\n  routes: [{to: default, metric: 99999999999999999999}]\n", 1,
			"hosts[compute-0].spec.routes[0].metric", "out of range"},
		{"unquoted version", site[:len(site)-2] + ", kubernetes: {version: 1.30}}\n", 1,
			"site.spec.kubernetes.version", "expected a string, got number 1.3; quote the value"},
		{"yaml 1.1 boolean", host + "spec:\n  interfaces: [{name: a, state: on}]\n", 1,
			"hosts[compute-0].spec.interfaces[0].state", "expected a string, got boolean true; quote the value"},
		{"label not a string", host + "spec: {labels: {rack: 7}}\n", 1, "hosts[compute-0].spec.labels[rack]", "expected a string"},
		{"list expected", host + "spec: {roles: worker}\n", 1, "hosts[compute-0].spec.roles", `expected a list, got string "worker"`},
		{"bool expected", site[:len(site)-2] + ", ovs: {dpdk: 1}}\n", 1, "site.spec.ovs.dpdk", "expected true or false, got number 1"},
		{"two sites", site + "---\n" + site, 2, "kind", "a manifest holds at most one Site; another is in document 1"},
		{"duplicate key", host + "metadata: {name: x}\n", 1, "", `invalid YAML: line 4: key "metadata" already set in map`},
		{"syntax error line is file-relative", site + "---\n" + host + "spec: [\n", 2, "", "invalid YAML: line 9"},
		{"empty docs keep numbering", "---\n---\n# only a comment\n---\n" + host + "spec: {x: 1}\n", 3,
			"hosts[compute-0].spec.x", "unknown field"},
		{"content after marker", "--- {apiVersion: v2, kind: Host}\n", 1, "apiVersion", `"v2"`},
		{"document end marker", site + "...\n" + host + "spec: {x: 1}\n", 2, "hosts[compute-0].spec.x", "unknown field"},
		{"crlf", strings.ReplaceAll(site+"---\n"+host+"spec: {x: 1}\n", "\n", "\r\n"), 2, "hosts[compute-0].spec.x", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode("site.yaml", []byte(tt.in))
			if m != nil {
				t.Errorf("got a manifest along with an error")
			}
			var errs ErrorList
			if !errors.As(err, &errs) {
				t.Fatalf("error %v (%T) is not an ErrorList", err, err)
			}
			for _, e := range errs {
				if e.File == "site.yaml" && e.Doc == tt.doc && e.Path == tt.path && strings.Contains(e.Msg, tt.msg) {
					return
				}
			}
			t.Errorf("want document %d %q: ...%s...; got:\n%v", tt.doc, tt.path, tt.msg, err)
		})
	}
}

func TestDecodeReportsEveryError(t *testing.T) {
	in := "apiVersion: v1\nkind: Site\n---\n" +
		"apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: a}\nspec: {x: 1, z: 2}\n---\n" +
		"kind: Nope\n"
	_, err := Decode("m.yaml", []byte(in))
	var errs ErrorList
	if !errors.As(err, &errs) {
		t.Fatalf("got %v", err)
	}
	want := []string{
		`m.yaml: document 1: apiVersion: "v1" is not supported; valid: "plinth.dev/v1alpha1"`,
		`m.yaml: document 2: hosts[a].spec.x: unknown field "x"`,
		`m.yaml: document 2: hosts[a].spec.z: unknown field "z"`,
		`m.yaml: document 3: apiVersion: missing is not supported`,
		`m.yaml: document 3: kind: "Nope" is not a valid kind`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestDecodeDropsCoordinatorFields(t *testing.T) {
	in := `apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: a, generation: 7, labels: {x: z}}
spec: {roles: [worker], managementAddress: 10.0.0.1}
status:
  observedGeneration: 7
  conditions: [{type: Ready, status: "True", bogus: field}]
`
	m, err := Decode("", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Hosts[0]
	if h.Metadata.Generation != 0 || h.Status.ObservedGeneration != 0 || len(h.Status.Conditions) != 0 {
		t.Errorf("coordinator-owned fields were kept: %+v %+v", h.Metadata, h.Status)
	}
	if h.Metadata.Labels["x"] != "z" {
		t.Errorf("labels lost: %+v", h.Metadata)
	}
}

// An empty file (or one of markers and comments only) is an error: applying it would
// say "no changes" about a file that was probably not the one meant.
func TestDecodeEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "# nothing\n", "---\n", "---\n...\n", "---\n---\n"} {
		m, err := Decode("site.yaml", []byte(in))
		if err == nil || m != nil || !strings.HasPrefix(err.Error(), "site.yaml: holds no document") {
			t.Errorf("Decode(%q) = %+v, %v; want a 'holds no document' error", in, m, err)
		}
	}
}

// A host declared twice in one file is refused at the later document, naming both.
func TestDecodeDuplicateHost(t *testing.T) {
	host := "apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: %s}\nspec: {roles: [worker], managementAddress: 10.0.0.%d}\n"
	in := fmt.Sprintf(host, "w1", 1) + "---\n" + fmt.Sprintf(host, "w2", 2) + "---\n" + fmt.Sprintf(host, "w1", 3)
	_, err := Decode("site.yaml", []byte(in))
	want := `site.yaml: document 3: hosts[w1].metadata.name: host "w1" is declared twice in this file (documents 1 and 3); declare each host once`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{"site.yaml", 3, "hosts[compute-0].spec.interfaces[1].mtu", "70000 is above 65535"},
			"site.yaml: document 3: hosts[compute-0].spec.interfaces[1].mtu: 70000 is above 65535"},
		{FieldError{"", 3, "kind", "bad"}, "document 3: kind: bad"},
		{FieldError{"a.yaml", 0, "", "bad"}, "a.yaml: bad"},
		{FieldError{Msg: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	if ErrorList(nil).Err() != nil {
		t.Error("empty ErrorList.Err() is not nil")
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "a: 1\n---\nb: 2\n--- # c\nc: 3\n----\n...\nd: 4\n---x\n"
	var got []string
	for _, c := range splitDocuments([]byte(in)) {
		got = append(got, strings.TrimSpace(string(c.text)))
	}
	want := []string{"a: 1", "b: 2", "# c\nc: 3\n----", "d: 4\n---x"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A manifest over the size or host limit is refused, naming the limit.
func TestDecodeLimits(t *testing.T) {
	big := []byte("# " + strings.Repeat("x", MaxManifestBytes) + "\n")
	if _, err := Decode("big.yaml", big); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a manifest may be at most %d bytes (4 MiB)", MaxManifestBytes)) {
		t.Errorf("oversized manifest: %v", err)
	}
	var b strings.Builder
	for i := range MaxHostsPerManifest + 1 {
		fmt.Fprintf(&b, "---\napiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: h%d}\nspec: {roles: [worker]}\n", i)
	}
	if _, err := Decode("many.yaml", []byte(b.String())); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("declares %d hosts; one manifest may declare at most %d", MaxHostsPerManifest+1, MaxHostsPerManifest)) {
		t.Errorf("too many hosts: %v", err)
	}
}

// A secret reference anywhere in a manifest is refused: value, label, map key, list.
func TestDecodeRefusesSecretReferences(t *testing.T) {
	doc := "apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: w1}\nspec:\n  roles: [worker]\n  managementAddress: 10.0.0.1\n"
	for _, tc := range []struct{ extra, path string }{
		{"  labels: {steal: \"plinth-secret:generated/etcd-ca-key\"}\n", "hosts[w1].spec.labels[steal]"},
		{"  sysctls: {\"plinth-secret:x\": \"1\"}\n", `hosts[w1].spec.sysctls["plinth-secret:x"]`},
		{"  interfaces: [{name: eth0, addresses: [\"x plinth-secret:output/c0/kube.init/admin.conf\"]}]\n", "hosts[w1].spec.interfaces[0].addresses[0]"},
	} {
		_, err := Decode("site.yaml", []byte(doc+tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.path+": holds ") || !strings.Contains(err.Error(), "a manifest cannot reference secrets") {
			t.Errorf("%s: %v", tc.path, err)
		}
	}
}
