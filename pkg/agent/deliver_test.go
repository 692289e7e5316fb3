package agent

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// A quick run's result is not written to disk before its first delivery; when that
// delivery fails it is written before the retry (a crash during the outage replays
// it), and removed once a coordinator takes it.
func TestQuickResultWrittenWhenDeliveryFails(t *testing.T) {
	dir := t.TempDir()
	ps := newPendingStore(dir)
	var mu sync.Mutex
	var posts []wire.StepReport
	var onDisk []int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == "POST" && r.URL.Path == wire.PathAgentResult:
			var rep wire.StepReport
			_ = json.NewDecoder(r.Body).Decode(&rep)
			posts = append(posts, rep)
			left, _ := ps.List()
			onDisk = append(onDisk, len(left))
			if len(posts) == 1 {
				http.Error(w, `{"error":"no leader"}`, http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("X-Plinth-Index", "7")
			_, _ = w.Write([]byte(`{}`))
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, wire.PathAgentSteps+"/"):
			_ = json.NewEncoder(w).Encode(wire.AgentStep{ID: "h/k", State: plan.Ready, InputsHash: "ih"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	a := &agent{log: slog.New(slog.DiscardHandler), pending: ps, drift: newDriftMemo(),
		cl: client.New([]string{strings.TrimPrefix(srv.URL, "https://")}, tc)}
	p := Pending{ID: "h/k", Kind: "k", InputsHash: "ih", RunID: "r1", Result: driver.Result{Changes: []string{"c"}}, Unstarted: true}
	o, at := a.deliver(t.Context(), a.log, p, false)
	if o != recorded || at != 7 {
		t.Fatalf("deliver: outcome %v at %d, want recorded at 7", o, at)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 2 || !posts[1].Unstarted || posts[1].RunID != "r1" {
		t.Fatalf("posts %+v, want the result twice, as unstarted run r1", posts)
	}
	if onDisk[0] != 0 || onDisk[1] != 1 {
		t.Fatalf("results on disk at each post: %v, want [0 1]", onDisk)
	}
	if left, _ := ps.List(); len(left) != 0 {
		t.Fatalf("left on disk after delivery: %+v", left)
	}
}
