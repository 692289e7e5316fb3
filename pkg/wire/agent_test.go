package wire

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// TestAgentStepFromCarriesEveryField builds an AgentStep from a record with every
// field set and checks each AgentStep field is filled from the record field of the
// same name (Inputs from the resolved inputs), so a field added to AgentStep but
// not to AgentStepFrom fails here, as Attempts once did.
func TestAgentStepFromCarriesEveryField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := plan.Record{
		Step: plan.Step{ID: "h1/host.network", Host: "h1", Kind: "host.network",
			Inputs: json.RawMessage(`{"mtu":"plinth-secret:x"}`), InputsHash: "in", Deps: []string{"d"}, Depth: 2},
		State: plan.Failed, Attempts: 3, AppliedHash: "ap", RetryAt: at,
		LastResult: &driver.Result{Error: "boom"}, Drift: []string{"mtu"}, StartedAt: at,
		RunID: "r", FinishedRunID: "f", FinishedAt: at, ModifyIndex: 7,
	}
	resolved := json.RawMessage(`{"mtu":"9000"}`)
	got := AgentStepFrom(rec, resolved)

	gv, rv := reflect.ValueOf(got), reflect.ValueOf(rec)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		f := gv.Field(i)
		if f.IsZero() {
			t.Errorf("AgentStep.%s is empty: AgentStepFrom does not fill it", name)
			continue
		}
		want := reflect.ValueOf(resolved)
		if name != "Inputs" {
			want = rv.FieldByName(name)
			if !want.IsValid() {
				t.Errorf("AgentStep.%s has no plan.Record field of that name to come from", name)
				continue
			}
		}
		if !reflect.DeepEqual(f.Interface(), want.Interface()) {
			t.Errorf("AgentStep.%s = %v, want %v", name, f.Interface(), want.Interface())
		}
	}
	if got.Attempts != 3 {
		t.Errorf("Attempts = %d, want 3", got.Attempts)
	}
}
