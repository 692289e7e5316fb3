package wire

import (
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
)

func TestDocumentPaths(t *testing.T) {
	for kind, want := range map[string]string{api.KindSite: PathSite, api.KindHost: PathHosts} {
		k, _ := api.LookupDocumentKind(kind)
		if got := DocumentPath(k); got != want {
			t.Errorf("DocumentPath(%s) = %s, want %s", kind, got, want)
		}
	}
}
