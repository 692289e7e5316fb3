package secretref

import "testing"

func TestNamesRoundTrip(t *testing.T) {
	ref := OutputRef("compute-0/kube.labels/ctl-0", "admin.conf")
	name, ok := Parse(ref)
	if !ok || name != "output/compute-0/kube.labels/ctl-0/admin.conf" {
		t.Fatalf("Parse(%q) = %q, %v", ref, name, ok)
	}
	if step, key, ok := ParseOutput(name); !ok || step != "compute-0/kube.labels/ctl-0" || key != "admin.conf" {
		t.Fatalf("ParseOutput(%q) = %q, %q, %v", name, step, key, ok)
	}
	g, _ := Parse(GeneratedRef(GenEtcdCA, "lab"))
	if kind, id, ok := ParseGenerated(g); !ok || kind != GenEtcdCA || id != "lab" {
		t.Fatalf("ParseGenerated(%q) = %q, %q, %v", g, kind, id, ok)
	}
	for _, bad := range []string{"output/", "output/x", "output/x/", "generated/", "generated/kind", "generated//id", "gossip-key"} {
		if _, _, ok := ParseOutput(bad); ok {
			t.Errorf("ParseOutput accepted %q", bad)
		}
		if _, _, ok := ParseGenerated(bad); ok {
			t.Errorf("ParseGenerated accepted %q", bad)
		}
	}
}
