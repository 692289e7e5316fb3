package api

import (
	"strings"
	"testing"
)

// TestDocumentKinds checks what every row needs and that the words the CLI uses
// find it.
func TestDocumentKinds(t *testing.T) {
	for _, k := range DocumentKinds() {
		if k.Name != strings.ToLower(k.Kind) {
			t.Errorf("%s: name %q, want %q", k.Kind, k.Name, strings.ToLower(k.Kind))
		}
		if k.Type == nil || k.start == nil || k.keep == nil || k.Resource == "" || k.Short == "" {
			t.Errorf("%s: type, resource, short, start and keep are required", k.Kind)
		}
		if _, ok := k.Type.FieldByName("TypeMeta"); !ok {
			t.Errorf("%s: %v has no TypeMeta", k.Kind, k.Type)
		}
		for _, w := range []string{k.Name, k.Name + "s", k.Resource} {
			if got, ok := DocumentKindNamed(w); !ok || got.Kind != k.Kind {
				t.Errorf("DocumentKindNamed(%q) = %v, %v", w, got.Kind, ok)
			}
		}
		if got, ok := LookupDocumentKind(k.Kind); !ok || got.Name != k.Name {
			t.Errorf("LookupDocumentKind(%q) = %v, %v", k.Kind, got.Name, ok)
		}
	}
	if got := kindList("and"); got != "Site, Host and Application" {
		t.Errorf("kindList = %q", got)
	}
}
