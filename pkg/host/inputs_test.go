package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// TestUnknownInputFieldRefused: inputs the planner and the driver disagree on are
// refused before the host is looked at, for each of the area's kinds.
func TestUnknownInputFieldRefused(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []driver.Driver{NewNetworkDriver(dir), NewSysctlDriver(dir), NewHugepagesDriver(dir)} {
		_, err := d.Diff(context.Background(), json.RawMessage(`{"colour":"red"}`))
		if !driver.IsPermanent(err) || !strings.Contains(err.Error(), d.Kind()) || !strings.Contains(err.Error(), `unknown field "colour"`) {
			t.Errorf("%s: err %v, want a permanent unknown field error naming the kind", d.Kind(), err)
		}
	}
}
