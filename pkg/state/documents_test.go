package state

import (
	"errors"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
)

// TestDocumentTables: every document kind has a table, which describes and deletes
// exactly when the kind's api row says so.
func TestDocumentTables(t *testing.T) {
	for _, k := range api.DocumentKinds() {
		tab, ok := documents[k.Kind]
		if !ok {
			t.Errorf("%s: no table in pkg/state/documents.go", k.Kind)
			continue
		}
		if tab.list == nil || (tab.describe != nil) != k.Describe || (tab.remove != nil) != k.Delete {
			t.Errorf("%s: table list=%v describe=%v delete=%v; the api row says describe=%v delete=%v",
				k.Kind, tab.list != nil, tab.describe != nil, tab.remove != nil, k.Describe, k.Delete)
		}
	}
	if len(documents) != len(api.DocumentKinds()) {
		t.Errorf("%d tables for %d document kinds", len(documents), len(api.DocumentKinds()))
	}
}

func TestDocumentViews(t *testing.T) {
	s := New(nil)
	s.Read(func(v View) {
		site, _, err := v.List(api.KindSite)
		if err != nil || site != nil {
			t.Errorf("List(Site) on an empty store = %v, %v", site, err)
		}
		hosts, _, err := v.List(api.KindHost)
		if hs, ok := hosts.([]HostRecord); err != nil || !ok || len(hs) != 0 {
			t.Errorf("List(Host) on an empty store = %#v, %v", hosts, err)
		}
		if _, _, err := v.Describe(api.KindHost, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Describe(missing host) = %v, want ErrNotFound", err)
		}
		if _, _, err := v.List("Pod"); err == nil {
			t.Error("List(Pod) succeeded")
		}
	})
	if typ, body, err := DeleteCommand(api.KindHost, "h1"); err != nil || typ != CmdDeleteHost || body.(DeleteHost).Name != "h1" {
		t.Errorf("DeleteCommand(Host) = %v, %v, %v", typ, body, err)
	}
	if _, _, err := DeleteCommand(api.KindSite, "s"); err == nil {
		t.Error("DeleteCommand(Site) succeeded")
	}
}
