package api

import (
	"reflect"
	"strings"
	"testing"
)

const demoApp = `apiVersion: plinth.dev/v1alpha1
kind: Application
metadata: {name: demo}
spec:
  passwords: [admin]
  groups:
  - name: base
    charts:
    - {name: web, source: {archive: web-0.1.0.tgz}, values: {replicas: 2}}
  - name: top
    sequenced: true
    gates: [{nodesLabelled: {label: openstack-compute-node=enabled, min: 2}}, {cephUsers: [kube-rbd]}, {chart: web}]
    charts:
    - {name: api, source: {archive: api-0.1.0.tgz}, namespace: demo, wait: {timeoutSeconds: 120}, protected: true}
`

func TestApplicationDecodesDefaultsValidates(t *testing.T) {
	m, err := Decode("demo.yaml", []byte(demoApp))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Applications) != 1 || m.Site != nil {
		t.Fatalf("decoded %+v", m)
	}
	m.Default()
	if errs := m.Validate("demo.yaml"); len(errs) > 0 {
		t.Fatal(errs)
	}
	a := m.Applications[0]
	web, api := a.Spec.Groups[0].Charts[0], a.Spec.Groups[1].Charts[0]
	want := Chart{Name: "web", Source: ChartSource{Archive: "web-0.1.0.tgz"}, Release: "web", Namespace: DefaultChartNamespace,
		Values: map[string]any{"replicas": float64(2)}, Wait: ChartWait{For: WaitAll, TimeoutSeconds: DefaultChartTimeout}, Remediation: RemediateRollback}
	if !reflect.DeepEqual(web, want) {
		t.Errorf("web defaulted to\n%+v, want\n%+v", web, want)
	}
	if api.Namespace != "demo" || api.Wait.TimeoutSeconds != 120 || api.Release != "api" {
		t.Errorf("api defaulted to %+v: explicit values must win", api)
	}
	if n := a.Spec.Groups[1].Gates[0].NodesLabelled; n.Min != 2 {
		t.Errorf("min %d, want 2", n.Min)
	}
	// Idempotent: a second Default changes nothing.
	again := a
	again.Spec.Default()
	if !reflect.DeepEqual(again, a) {
		t.Errorf("Default is not idempotent")
	}
	g := NodesGate{Label: "x"}.Effective()
	if g.Min != DefaultNodesGateMin {
		t.Errorf("nodes gate min default %d", g.Min)
	}
}

// TestGateNamesAreGateFields: GateNames is the one list of gate fields; the
// decoder's unknown-field message lists the same names.
func TestGateNamesAreGateFields(t *testing.T) {
	_, names := jsonFields(reflect.TypeFor[Gate]())
	if !reflect.DeepEqual(names, GateNames) {
		t.Errorf("Gate's fields %v, GateNames %v", names, GateNames)
	}
	_, err := Decode("a.yaml", []byte(strings.Replace(demoApp, "{chart: web}", "{pods: 3}", 1)))
	want := `applications[demo].spec.groups[top].gates[2].pods: unknown field "pods"; valid fields are nodesLabelled, cephPools, cephUsers, dpdk, chart`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want ...%s", err, want)
	}
}

func TestApplicationDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, path, msg string }{
		{"secret in values", strings.Replace(demoApp, "values: {replicas: 2}", "values: {conf: {db: [x, 'plinth-secret:db']}}", 1),
			"applications[demo].spec.groups[base].charts[web].values[conf][db][1]", "secret references"},
		{"secret in values key", strings.Replace(demoApp, "values: {replicas: 2}", "values: {'plinth-secret:k': 1}", 1),
			`applications[demo].spec.groups[base].charts[web].values["plinth-secret:k"]`, "secret references"},
		{"values not a map", strings.Replace(demoApp, "values: {replicas: 2}", "values: [a]", 1),
			"applications[demo].spec.groups[base].charts[web].values", "expected a mapping"},
		{"site charts", "apiVersion: plinth.dev/v1alpha1\nkind: Site\nmetadata: {name: s}\nspec:\n  controllers: [c0]\n  charts: [{name: g}]\n",
			"site.spec.charts", "moved to the Application kind (`plinth-coordinator app upload -f FILE`)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("a.yaml", []byte(tc.in))
			if err == nil {
				t.Fatal("decoded")
			}
			for _, e := range err.(ErrorList) {
				if e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					if strings.Contains(e.Msg, "unknown field") {
						t.Errorf("bare unknown field: %v", e)
					}
					return
				}
			}
			t.Errorf("want %s: ...%s...; got\n%v", tc.path, tc.msg, err)
		})
	}
}

func TestValidateApplication(t *testing.T) {
	archive := ChartSource{Archive: "c.tgz"}
	ch := func(name string) Chart { return Chart{Name: name, Source: archive} }
	app := func(groups ...ChartGroup) *Application {
		return &Application{Metadata: ObjectMeta{Name: "demo"}, Spec: ApplicationSpec{Groups: groups}}
	}
	grp := func(name string, charts ...Chart) ChartGroup { return ChartGroup{Name: name, Charts: charts} }
	with := func(c Chart, f func(*Chart)) Chart { f(&c); return c }
	gated := func(g ChartGroup, gates ...Gate) ChartGroup { g.Gates = gates; return g }
	const base = "applications[demo].spec.groups[g]"
	const c0 = base + ".charts[a]"

	for _, tc := range []struct {
		name string
		app  *Application
		path string // "" for valid
		msg  string
	}{
		{"valid", app(grp("g", ch("a")), gated(grp("h", ch("b")), Gate{Chart: "a"}, Gate{Chart: "other/x"}, Gate{DPDK: true})), "", ""},
		{"bad name", &Application{Metadata: ObjectMeta{Name: "Demo"}, Spec: ApplicationSpec{Groups: []ChartGroup{grp("g", ch("a"))}}},
			`applications["Demo"].metadata.name`, "not a valid name"},
		{"no groups", app(), "applications[demo].spec.groups", "at least one chart group"},
		{"empty group", app(grp("g")), base + ".charts", "at least one chart"},
		{"duplicate group", app(grp("g", ch("a")), grp("g", ch("b"))), "applications[demo].spec.groups[g].name", "duplicate group name"},
		{"chart in two groups", app(grp("g", ch("a")), grp("h", ch("a"))), "applications[demo].spec.groups[h].charts[a].name",
			"declared twice (also at applications[demo].spec.groups[g].charts[a])"},
		{"chart twice in a group", app(grp("g", ch("a"), ch("a"))), c0 + ".name", "declared twice"},
		{"too many charts", app(grp("g", func() []Chart {
			var cs []Chart
			for i := range MaxChartsPerApp + 1 {
				cs = append(cs, with(ch("c"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))), func(*Chart) {}))
			}
			return cs
		}()...)), "applications[demo].spec.groups", "at most 200"},
		{"release too long", app(grp("g", with(ch("a"), func(c *Chart) { c.Release = strings.Repeat("r", 54) }))), c0 + ".release", "at most 53"},
		{"chart name as release too long", app(grp("g", ch(strings.Repeat("r", 54)))), base + ".charts[" + strings.Repeat("r", 54) + "].name", "at most 53"},
		{"release twice in namespace", app(grp("g", ch("a"), with(ch("b"), func(c *Chart) { c.Release = "a" }))),
			base + ".charts[b].release", "unique per namespace"},
		{"same release other namespace", app(grp("g", ch("a"), with(ch("b"), func(c *Chart) { c.Release = "a"; c.Namespace = "x" }))), "", ""},
		{"bad namespace", app(grp("g", with(ch("a"), func(c *Chart) { c.Namespace = "Open_Stack" }))), c0 + ".namespace", "not a valid namespace"},
		{"no source", app(grp("g", with(ch("a"), func(c *Chart) { c.Source = ChartSource{} }))), c0 + ".source", "required: one of archive"},
		{"two sources", app(grp("g", with(ch("a"), func(c *Chart) { c.Source.OCI = "oci://r/c:1" }))), c0 + ".source", "sets archive and oci"},
		{"archive path", app(grp("g", with(ch("a"), func(c *Chart) { c.Source.Archive = "../c.tgz" }))), c0 + ".source.archive", "is a path"},
		{"archive suffix", app(grp("g", with(ch("a"), func(c *Chart) { c.Source.Archive = "c.tar" }))), c0 + ".source.archive", "ending .tgz"},
		{"oci scheme", app(grp("g", with(ch("a"), func(c *Chart) { c.Source = ChartSource{OCI: "registry/c:1"} }))), c0 + ".source.oci", "oci://"},
		{"repo scheme", app(grp("g", with(ch("a"), func(c *Chart) { c.Source = ChartSource{Repo: "ftp://x", Chart: "c"} }))), c0 + ".source.repo", "http(s)"},
		{"repo needs chart", app(grp("g", with(ch("a"), func(c *Chart) { c.Source = ChartSource{Repo: "https://x/charts"} }))), c0 + ".source.chart", "required with repo"},
		{"repo ok", app(grp("g", with(ch("a"), func(c *Chart) { c.Source = ChartSource{Repo: "https://x/charts", Chart: "c", Version: "1.0.0"} }))), "", ""},
		{"version without repo", app(grp("g", with(ch("a"), func(c *Chart) { c.Source.Version = "1" }))), c0 + ".source.version", "only with repo"},
		{"wait for", app(grp("g", with(ch("a"), func(c *Chart) { c.Wait.For = "pods" }))), c0 + ".wait.for", "valid values are all, hooks"},
		{"timeout", app(grp("g", with(ch("a"), func(c *Chart) { c.Wait.TimeoutSeconds = 3601 }))), c0 + ".wait.timeoutSeconds", "1..3600"},
		{"negative timeout", app(grp("g", with(ch("a"), func(c *Chart) { c.Wait.TimeoutSeconds = -1 }))), c0 + ".wait.timeoutSeconds", "1..3600"},
		{"min ready", app(grp("g", with(ch("a"), func(c *Chart) { c.Wait.MinReadySeconds = 601 }))), c0 + ".wait.minReadySeconds", "0..600"},
		{"remediation", app(grp("g", with(ch("a"), func(c *Chart) { c.Remediation = "delete" }))), c0 + ".remediation", "valid values are rollback, reinstall"},
		{"protected reinstall", app(grp("g", with(ch("a"), func(c *Chart) { c.Protected = true; c.Remediation = RemediateReinstall }))), c0 + ".remediation", "contradicts protected"},
		{"protected rollback", app(grp("g", with(ch("a"), func(c *Chart) { c.Protected = true; c.Remediation = RemediateRollback }))), "", ""},
		{"empty gate", app(gated(grp("g", ch("a")), Gate{})), base + ".gates[0]", "set one of nodesLabelled, cephPools, cephUsers, dpdk, chart"},
		{"empty list gate", app(gated(grp("g", ch("a")), Gate{CephPools: []string{}})), base + ".gates[0]", "empty gate"},
		{"two-field gate", app(gated(grp("g", ch("a")), Gate{DPDK: true, CephUsers: []string{"u"}})), base + ".gates[0]", "sets cephUsers and dpdk; a gate is one condition"},
		{"label key", app(gated(grp("g", ch("a")), Gate{NodesLabelled: &NodesGate{Label: "-bad=x"}})), base + ".gates[0].nodesLabelled.label", "not a valid label key"},
		{"label value", app(gated(grp("g", ch("a")), Gate{NodesLabelled: &NodesGate{Label: "k=-x"}})), base + ".gates[0].nodesLabelled.label", "not a valid label value"},
		{"label required", app(gated(grp("g", ch("a")), Gate{NodesLabelled: &NodesGate{}})), base + ".gates[0].nodesLabelled.label", "required"},
		{"label any value", app(gated(grp("g", ch("a")), Gate{NodesLabelled: &NodesGate{Label: "example.com/sriov", Min: 1000}})), "", ""},
		{"min", app(gated(grp("g", ch("a")), Gate{NodesLabelled: &NodesGate{Label: "k", Min: 1001}})), base + ".gates[0].nodesLabelled.min", "1..1000"},
		{"pool twice", app(gated(grp("g", ch("a")), Gate{CephPools: []string{"p", "p"}})), base + ".gates[0].cephPools[1]", "listed twice"},
		{"user empty", app(gated(grp("g", ch("a")), Gate{CephUsers: []string{""}})), base + ".gates[0].cephUsers[0]", "required"},
		{"chart gate unknown", app(gated(grp("g", ch("a")), Gate{Chart: "zz"})), base + ".gates[0].chart", `no chart "zz" in application "demo"; valid charts are a`},
		{"chart gate same group", app(gated(grp("g", ch("a")), Gate{Chart: "a"})), base + ".gates[0].chart", "never start"},
		{"chart gate own app by name", app(gated(grp("g", ch("a")), Gate{Chart: "demo/a"})), base + ".gates[0].chart", "never start"},
		{"chart gate later group", app(gated(grp("g", ch("a")), Gate{Chart: "b"}), grp("h", ch("b"))), base + ".gates[0].chart", `later group ("h")`},
		{"chart gate syntax", app(gated(grp("g", ch("a")), Gate{Chart: "a/b/c"})), base + ".gates[0].chart", "not a chart reference"},
		{"password twice", &Application{Metadata: ObjectMeta{Name: "demo"}, Spec: ApplicationSpec{Passwords: []string{"a", "a"}, Groups: []ChartGroup{grp("g", ch("a"))}}},
			"applications[demo].spec.passwords[1]", "listed twice"},
		{"password key", &Application{Metadata: ObjectMeta{Name: "demo"}, Spec: ApplicationSpec{Passwords: []string{"a/b"}, Groups: []ChartGroup{grp("g", ch("a"))}}},
			"applications[demo].spec.passwords[0]", "not a valid Secret data key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateApplication("a.yaml", tc.app)
			if tc.path == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				// Defaulting keeps a valid application valid.
				d := *tc.app
				d.Spec.Groups = append([]ChartGroup(nil), d.Spec.Groups...)
				for i := range d.Spec.Groups {
					d.Spec.Groups[i].Charts = append([]Chart(nil), d.Spec.Groups[i].Charts...)
				}
				d.Spec.Default()
				if errs := ValidateApplication("a.yaml", &d); len(errs) > 0 {
					t.Fatalf("defaulted: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Path == tc.path && strings.Contains(e.Msg, tc.msg) && e.File == "a.yaml" {
					return
				}
			}
			t.Errorf("want %s: ...%s...; got\n%v", tc.path, tc.msg, errs)
		})
	}
}

func TestManifestValidatesApplications(t *testing.T) {
	in := demoApp + "---\n" + strings.Replace(demoApp, "web-0.1.0.tgz", "web.tar", 1)
	m, err := Decode("a.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	errs := m.Validate("a.yaml")
	var sawDup, sawArchive bool
	for _, e := range errs {
		sawDup = sawDup || (e.Doc == 2 && strings.Contains(e.Msg, "declared twice in this file (documents 1 and 2)"))
		sawArchive = sawArchive || (e.Doc == 2 && e.Path == "applications[demo].spec.groups[base].charts[web].source.archive")
	}
	if !sawDup || !sawArchive {
		t.Errorf("got %v", errs)
	}
}

func TestParseNodeLabel(t *testing.T) {
	for in, want := range map[string]NodeLabel{
		"openstack-compute-node=enabled": {Key: "openstack-compute-node", Value: "enabled"},
		"sriov":                          {Key: "sriov", AnyValue: true},
		"k=":                             {Key: "k"},
	} {
		got, err := ParseNodeLabel(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseNodeLabel(%q) = %+v (%s), %v", in, got, got.String(), err)
		}
	}
	l, _ := ParseNodeLabel("sriov")
	if !l.Matches(map[string]string{"sriov": "x"}) || l.Matches(map[string]string{"other": "x"}) {
		t.Error("any-value match")
	}
	l, _ = ParseNodeLabel("a=b")
	if l.Matches(map[string]string{"a": "c"}) || !l.Matches(map[string]string{"a": "b"}) {
		t.Error("value match")
	}
}
