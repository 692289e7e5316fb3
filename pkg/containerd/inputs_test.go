package containerd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// TestUnknownInputFieldRefused: inputs the planner and the driver disagree on are
// refused before containerd is asked. (They were once decoded leniently: a field
// the agent did not know was silently dropped.)
func TestUnknownInputFieldRefused(t *testing.T) {
	for _, d := range []driver.Driver{NewConfigDriver(t.TempDir()), NewImportDriver("")} {
		_, err := d.Diff(context.Background(), json.RawMessage(`{"snapshotter":"overlayfs","colour":"red"}`))
		if !driver.IsPermanent(err) || !strings.Contains(err.Error(), d.Kind()) || !strings.Contains(err.Error(), `unknown field "colour"`) {
			t.Errorf("%s: err %v, want a permanent unknown field error naming the kind", d.Kind(), err)
		}
	}
}
