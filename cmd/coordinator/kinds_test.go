package main

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// TestEveryDocumentKindPrints: get prints every document kind, describe every one
// whose row says Describe.
func TestEveryDocumentKindPrints(t *testing.T) {
	for _, k := range api.DocumentKinds() {
		if _, ok := documentGets[k.Kind]; !ok {
			t.Errorf("%s: no printer in documentGets", k.Kind)
		}
		if _, ok := documentDescribes[k.Kind]; ok != k.Describe {
			t.Errorf("%s: documentDescribes has it: %v; the api row says Describe: %v", k.Kind, ok, k.Describe)
		}
	}
}

// TestGetKinds: the step kind table, offline, in every -o format.
func TestGetKinds(t *testing.T) {
	out, err := run(t, "get", "kinds")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(stepkind.All()) || !strings.HasPrefix(lines[0], "KIND") {
		t.Fatalf("want a header and one line per kind:\n%s", out)
	}
	for _, want := range []string{"ceph.pool/<pool>", "hostspec.NetworkInputs", "kube.labels/<node>"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	for _, format := range []string{"json", "yaml"} {
		out, err := run(t, "get", "kinds", "-o", format)
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if format == "json" {
			err = json.Unmarshal([]byte(out), &rows)
		} else {
			err = yaml.Unmarshal([]byte(out), &rows)
		}
		if err != nil || len(rows) != len(stepkind.All()) || rows[0]["name"] != "host.network" || rows[0]["inputs"] != "hostspec.NetworkInputs" {
			t.Errorf("-o %s: %v\n%s", format, err, out)
		}
	}
}

func TestDescribeKind(t *testing.T) {
	out, err := run(t, "describe", "kind", "ovs.dpdk")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Kind:", "ovs.dpdk", "ovsspec.DPDKInputs", "Waits for:", "host.network", "pkg/ovs"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if out, err := run(t, "describe", "kind", "ceph.pool/volumes"); err != nil || !strings.Contains(out, "cephspec.PoolInputs") {
		t.Errorf("describe kind ceph.pool/volumes: %v\n%s", err, out)
	}
	if _, err := run(t, "describe", "kind", "host.teleport"); err == nil || !strings.Contains(err.Error(), "host.network") {
		t.Errorf("unknown step kind: %v", err)
	}
	for args, want := range map[string]string{
		"describe pods x": `describe: unknown kind "pods": want site, host, application or kind`,
		"delete site x":   `delete: unknown kind "site": want host or application`,
		"get pods":        `unknown kind "pods": want site, hosts, applications, steps, events, tokens or kinds`,
	} {
		if _, err := run(t, strings.Fields(args)...); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", args, err, want)
		}
	}
}
