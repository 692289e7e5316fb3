package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/api/schema"
)

// run executes the CLI with args and no identity file: explain must work offline.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--identity", t.TempDir() + "/missing.json"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestExplainField(t *testing.T) {
	out, err := run(t, "explain", "site.spec.kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"KIND:     Site",
		"FIELD:    site.spec.kubernetes <object>",
		"DESCRIPTION:",
		"FIELDS:",
		"podSubnet is the CIDR pod addresses come from. (default " + api.DefaultPodSubnet + ")",
		"cni                     <object>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}

	out, err = run(t, "explain", "site.spec.policy.drift")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DEFAULT:  " + api.DefaultDrift, "VALUES:   " + strings.Join(api.DriftPolicies, ", ")} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestExplainRecursiveAndJSON(t *testing.T) {
	out, err := run(t, "explain", "host.spec.interfaces", "--recursive")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\n    mode        <string>              default "+api.DefaultBondMode) || !strings.Contains(out, "vni         <integer> -required-") {
		t.Errorf("recursive output lacks nested fields:\n%s", out)
	}

	out, err = run(t, "explain", "site.spec.kubernetes.cni", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s schema.Schema
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("-o json is not a schema: %v\n%s", err, out)
	}
	if s.Properties["plugin"] == nil || len(s.Properties["plugin"].Enum) != len(api.CNIPlugins) {
		t.Errorf("schema fragment lacks plugin's enum: %s", out)
	}
}

func TestExplainUnknownPath(t *testing.T) {
	_, err := run(t, "explain", "site.spec.kubernets")
	want := "site.spec.kubernets: no such field; site.spec has: ceph, controllers, kubernetes, networks, ovs, policy, witness"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestExplainEveryPath explains every field of both documents, as an operator
// walking the tree would.
func TestExplainEveryPath(t *testing.T) {
	docs, err := schema.Documents()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(path string, s *schema.Schema)
	walk = func(path string, s *schema.Schema) {
		paths = append(paths, path)
		props, names := s.Children()
		for _, n := range names {
			walk(path+"."+n, props[n])
		}
	}
	for _, d := range docs {
		walk(d.Root, d.Schema)
	}
	for _, p := range paths {
		out, err := run(t, "explain", p)
		if err != nil {
			t.Errorf("explain %s: %v", p, err)
			continue
		}
		if strings.Contains(out, "<no description>") {
			t.Errorf("explain %s: field has no description (add a doc comment in pkg/api)", p)
		}
	}
	t.Logf("explained %d paths", len(paths))
}

func TestExplainCompletion(t *testing.T) {
	got, _ := completePath(nil, nil, "")
	if strings.Join(got, " ") != "site. host. application." {
		t.Errorf("kinds: %q", got)
	}
	got, _ = completePath(nil, nil, "site.spec.ku")
	if len(got) != 1 || !strings.HasPrefix(got[0], "site.spec.kubernetes.\t") {
		t.Errorf("site.spec.ku: %q", got)
	}
	got, _ = completePath(nil, nil, "site.spec.policy.dr")
	if len(got) != 2 || !strings.HasPrefix(got[0], "site.spec.policy.drift\t") {
		t.Errorf("site.spec.policy.dr: %q", got)
	}
}
