package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// TestJSONShape pins the encoding of every message against testdata/json.golden,
// recorded from the types before they moved here: agents and coordinators of
// neighbouring releases must keep understanding each other.
func TestJSONShape(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	for _, v := range []any{
		AgentSteps{Host: "h", Steps: []AgentStep{{ID: "h/k", Kind: "k", Inputs: json.RawMessage(`{"a":1}`), InputsHash: "ih", State: "Failed", RetryAt: at, AppliedHash: "ah", Attempts: 2}}, DriftCheckSeconds: 60},
		AgentStep{},
		StepReport{ID: "i", InputsHash: "h", RunID: "r", Result: &driver.Result{Changes: []string{"c"}, Outputs: map[string]string{"k": "v"}, Error: "e", Retryable: true}, Changes: []string{"d"}},
		StepReport{},
		FactsReport{Facts: json.RawMessage(`{}`), Hash: "h"},
		RenewRequest{CSR: "c"}, CertResponse{Cert: "c", CA: "a"},
		AgentConfig{Coordinators: []string{"a"}, GossipSeeds: []string{"b"}, GossipKey: []byte("k")}, AgentConfig{},
		EnrollRequest{Token: "t", Name: "n", CSR: "c", IPs: []string{"1"}},
		EnrollResponse{Cert: "c", CA: "a", CAKey: "k", DataKey: []byte("d")}, EnrollResponse{},
		RaftJoinRequest{Name: "n", RaftAddr: "r", APIAddr: "a", GossipAddr: "g", Witness: true}, RaftJoinRequest{},
		Applied{Index: 3},
		ApplyRequest{File: "f", YAML: "y", DryRun: true}, ApplyRequest{},
		ApplyResponse{DryRun: true, Plan: []string{"p"}, Index: 4}, ApplyResponse{},
		RetryRequest{ID: "i"},
		TokenRequest{Name: "n", Role: "r", TTL: time.Hour},
		TokenResponse{Token: "t", ID: "i", Name: "n", Role: "r", Expires: at},
		Member{Name: "n", RaftAddr: "r", APIAddr: "a", Suffrage: "Voter", Leader: true, Witness: true}, Member{},
		Status{Name: "n", State: "Leader", Leader: "l", AppliedIndex: 5},
		ErrorBody{Error: "e", Fields: []api.FieldError{{Path: "f", Msg: "m"}}}, ErrorBody{},
	} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		fmt.Fprintf(&b, "%T\t%s\n", v, j)
	}
	want, err := os.ReadFile("testdata/json.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("wire encoding changed:\n got:\n%s\nwant:\n%s", got, want)
	}
}
