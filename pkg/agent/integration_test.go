package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/freeport"
	"github.com/plinth-dev/plinth/internal/logbuf"
	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/coordinator"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/server"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// fakeNet stands in for host.network: it "configures" by remembering the inputs it
// applied, so the test machine's network is never touched.
type fakeNet struct {
	mu       sync.Mutex
	have     string
	failures int  // fail this many applies, retryably
	block    bool // apply hangs until its context ends (an agent killed mid-step)
	delay    time.Duration
	applies  int
	diffs    int
}

func newFakeNet() *fakeNet { return &fakeNet{} }

func (f *fakeNet) Kind() string { return hostspec.KindNetwork }

func (f *fakeNet) Diff(_ context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diffs++
	want := string(inputs)
	if f.have == want {
		return nil, nil
	}
	return []driver.Change{{Summary: "configure links", Apply: func(ctx context.Context) error {
		f.mu.Lock()
		f.applies++
		block, fail, delay := f.block, f.failures > 0, f.delay
		if fail {
			f.failures--
		}
		f.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if block {
			<-ctx.Done()
			return ctx.Err()
		}
		if fail {
			return errors.New("transient failure")
		}
		f.mu.Lock()
		f.have = want
		f.mu.Unlock()
		return nil
	}}}, nil
}

func (f *fakeNet) counts() (applies, diffs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applies, f.diffs
}

func freeAddr(t *testing.T) string { return freeport.Addr(t) }

// hostYAML declares lo, which every host reports in its facts, so the coordinator's
// facts checks pass; the fake driver never touches it.
func hostYAML(mtu int) string {
	return fmt.Sprintf(`apiVersion: plinth.dev/v1alpha1
kind: Host
metadata:
  name: node-1
spec:
  roles: [worker]
  managementAddress: 127.0.0.1
  interfaces:
  - name: lo
    mtu: %d
`, mtu)
}

// TestIntegrationAgentWithCoordinator runs a real coordinator (one member, "fast"
// profile, loopback) and the agent against it, with a fake host.network driver:
// enrolment, READY, facts, gossip reachability, a retried failure, certificate
// renewal, re-running a step cut short by a kill, and replaying a persisted result
// exactly once.
func TestIntegrationAgentWithCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator: skipped with -short")
	}
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PLINTH_TEST_LOGS") != "" {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tc := startCoordinator(t, ctx, log, 30*time.Second)
	dir, ccfg, admin := tc.dir, tc.cfg, tc.admin

	// Enrol node-1.
	var tok wire.TokenResponse
	poll.Until(t, 20*time.Second, "coordinator accepts writes", func() error {
		_, err := admin.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: "node-1", Role: "agent", TTL: time.Hour}, &tok)
		return err
	})
	apply(t, ctx, admin, hostYAML(9000))
	stateDir := filepath.Join(dir, "agent")
	jo := JoinOptions{StateDir: stateDir, Name: "node-1", Token: tok.Token, JoinAddrs: []string{ccfg.JoinAddr}}
	if err := Join(ctx, jo); err != nil {
		t.Fatalf("join: %v", err)
	}
	if err := Join(ctx, jo); !errors.Is(err, ErrAlreadyEnrolled) {
		t.Fatalf("second join: %v, want ErrAlreadyEnrolled", err)
	}
	for _, f := range []string{"pki/agent.key", "pki/gossip.key"} {
		if fi, err := os.Stat(filepath.Join(stateDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	id, err := agentid.Load(stateDir)
	if err != nil || id.Name != "node-1" || id.Coordinators[0] != ccfg.APIAddr {
		t.Fatalf("identity %+v, %v", id, err)
	}
	b, _ := LoadBundle(stateDir)
	joinSerial := serialOf(t, b)

	gossipAddr := freeAddr(t)
	start := func(d *fakeNet) (func(), *notes) {
		reg, err := driver.NewRegistry(d)
		if err != nil {
			t.Fatal(err)
		}
		nt := &notes{}
		actx, astop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- Run(actx, Config{StateDir: stateDir, GossipAddr: gossipAddr, GossipProfile: "fast",
				FactsInterval: time.Second, Logger: log.With("who", "agent"), Drivers: reg,
				Notify: nt.add, WatchdogInterval: 100 * time.Millisecond})
		}()
		return func() {
			astop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("agent Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("agent did not stop within 20s")
			}
		}, nt
	}
	step := func() plan.Record {
		var d server.HostDetail
		if _, err := admin.Do(ctx, "GET", "/v1/hosts/node-1", nil, &d); err != nil || len(d.Steps) != 1 {
			t.Fatalf("host detail: %v (%d steps)", err, len(d.Steps))
		}
		return d.Steps[0]
	}
	waitState := func(what string, ok func(plan.Record) bool) plan.Record {
		t.Helper()
		var r plan.Record
		poll.Until(t, 30*time.Second, what, func() error {
			if r = step(); !ok(r) {
				return fmt.Errorf("step is %s (attempts %d, applied %s, inputs %s)", r.State, r.Attempts, r.AppliedHash, r.InputsHash)
			}
			return nil
		})
		return r
	}
	succeededWith := func(hash string) func(plan.Record) bool {
		return func(r plan.Record) bool { return r.State == plan.Succeeded && r.AppliedHash == hash }
	}

	// First run: one retryable failure, then success after the backoff.
	d1 := newFakeNet()
	d1.failures = 1
	stop, n := start(d1)
	r := waitState("step succeeds after a retry", succeededWith(step().InputsHash))
	if applies, _ := d1.counts(); applies != 2 || r.Attempts != 0 {
		t.Fatalf("applies = %d, attempts = %d; want 2 applies (fail, success)", applies, r.Attempts)
	}
	poll.Until(t, 10*time.Second, "READY=1 and watchdog", func() error {
		if !n.has("READY=1") || !n.has("WATCHDOG=1") {
			return fmt.Errorf("notified %v", n.list())
		}
		return nil
	})
	poll.Until(t, 30*time.Second, "facts and reachability", func() error {
		var d server.HostDetail
		if _, err := admin.Do(ctx, "GET", "/v1/hosts/node-1", nil, &d); err != nil {
			return err
		}
		if d.Host.FactsHash == "" || d.Host.Reachable != "True" {
			return fmt.Errorf("factsHash %q, reachable %q (%s)", d.Host.FactsHash, d.Host.Reachable, d.Host.ReachableMsg)
		}
		return nil
	})
	// The coordinator's metrics count the agent among the gossip members it sees.
	poll.Until(t, 10*time.Second, "gossip members in the metrics", func() error {
		var buf bytes.Buffer
		if _, err := admin.Do(ctx, "GET", wire.PathMetrics, nil, &buf); err != nil {
			return err
		}
		if !strings.Contains(buf.String(), `plinth_gossip_members{role="agent",state="alive"} 1`) {
			return fmt.Errorf("no alive agent in plinth_gossip_members")
		}
		return nil
	})
	// The 30s certificate was renewed at start-up (past half-life), and the agent
	// keeps working with the new one: new inputs are applied.
	poll.Until(t, 20*time.Second, "certificate renewed", func() error {
		b, err := LoadBundle(stateDir)
		if err != nil {
			return err
		}
		if serialOf(t, b) == joinSerial {
			return errors.New("serial unchanged")
		}
		return nil
	})
	apply(t, ctx, admin, hostYAML(1500))
	waitState("new inputs applied after renewal", func(r plan.Record) bool { return succeededWith(r.InputsHash)(r) })

	// Killed mid-step: the step stays Running and is run again after a restart.
	d1.mu.Lock()
	d1.block = true
	d1.mu.Unlock()
	apply(t, ctx, admin, hostYAML(1400))
	waitState("step running", func(r plan.Record) bool { return r.State == plan.Running })
	stop()
	if r := step(); r.State != plan.Running {
		t.Fatalf("after kill: step is %s, want Running", r.State)
	}
	d2 := newFakeNet()
	stop, _ = start(d2)
	r = waitState("interrupted step re-run", func(r plan.Record) bool { return succeededWith(r.InputsHash)(r) })
	if applies, _ := d2.counts(); applies != 1 {
		t.Fatalf("re-run applied %d times, want 1", applies)
	}

	// Killed after the run finished and its result was persisted, before it was
	// reported: the restarted agent reports it without running the step again.
	d2.mu.Lock()
	d2.block = true
	d2.mu.Unlock()
	apply(t, ctx, admin, hostYAML(1300))
	r = waitState("step running", func(r plan.Record) bool { return r.State == plan.Running })
	stop()
	ps := newPendingStore(filepath.Join(stateDir, pendingDir))
	if _, err := ps.Put(Pending{ID: r.ID, Kind: r.Kind, InputsHash: r.InputsHash, Result: driver.Result{Changes: []string{"configure links"}}}); err != nil {
		t.Fatal(err)
	}
	d3 := newFakeNet()
	stop, _ = start(d3)
	r = waitState("persisted result replayed", succeededWith(r.InputsHash))
	if applies, _ := d3.counts(); applies != 0 {
		t.Fatalf("replayed step was run again (%d applies)", applies)
	}
	if r.LastResult == nil || len(r.LastResult.Changes) != 1 {
		t.Fatalf("last result %+v, want the persisted one", r.LastResult)
	}
	if left, _ := ps.List(); len(left) != 0 {
		t.Fatalf("pending results left: %v", left)
	}
	st, err := GetStatus(ctx, stateDir)
	if err != nil || st.Name != "node-1" || len(st.Steps) != 1 || st.Steps[0].Inputs != nil || st.StepsError != "" {
		t.Fatalf("status %+v, %v", st, err)
	}
	stop()
}

// A run that ends within the start grace is recorded by its result alone, one
// write; a longer one reports its start when the grace ends, so it shows Running
// while it runs, and its start time is when it began.
func TestIntegrationStartReportedOnlyForLongRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator: skipped with -short")
	}
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PLINTH_TEST_LOGS") != "" {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := startCoordinator(t, ctx, log, time.Hour)
	var tok wire.TokenResponse
	poll.Until(t, 20*time.Second, "coordinator accepts writes", func() error {
		_, err := tc.admin.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: "node-1", Role: "agent", TTL: time.Hour}, &tok)
		return err
	})
	apply(t, ctx, tc.admin, hostYAML(9000))
	stateDir := filepath.Join(tc.dir, "agent")
	if err := Join(ctx, JoinOptions{StateDir: stateDir, Name: "node-1", Token: tok.Token, JoinAddrs: []string{tc.cfg.JoinAddr}}); err != nil {
		t.Fatalf("join: %v", err)
	}
	commands := func(cmd string) int {
		t.Helper()
		var buf bytes.Buffer
		if _, err := tc.admin.Do(ctx, "GET", wire.PathMetrics, nil, &buf); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, `plinth_fsm_apply_seconds_count{command="`+cmd+`",result="ok"}`) {
				n, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				return int(n)
			}
		}
		return 0
	}
	step := func() plan.Record {
		t.Helper()
		var d server.HostDetail
		if _, err := tc.admin.Do(ctx, "GET", "/v1/hosts/node-1", nil, &d); err != nil || len(d.Steps) != 1 {
			t.Fatalf("host detail: %v (%d steps)", err, len(d.Steps))
		}
		return d.Steps[0]
	}
	d := newFakeNet()
	reg, err := driver.NewRegistry(d)
	if err != nil {
		t.Fatal(err)
	}
	actx, astop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(actx, Config{StateDir: stateDir, GossipAddr: freeAddr(t), GossipProfile: "fast",
			FactsInterval: time.Second, Logger: log.With("who", "agent"), Drivers: reg})
	}()
	defer func() {
		astop()
		if err := <-done; err != nil {
			t.Errorf("agent Run: %v", err)
		}
	}()

	var r plan.Record
	poll.Until(t, 30*time.Second, "quick run recorded", func() error {
		if r = step(); r.State != plan.Succeeded {
			return fmt.Errorf("step is %s", r.State)
		}
		return nil
	})
	if n := commands("StepStart"); n != 0 {
		t.Fatalf("a quick run wrote %d StepStart commands, want 0", n)
	}
	if n := commands("StepResult"); n != 1 {
		t.Fatalf("a quick run wrote %d StepResult commands, want 1", n)
	}
	if r.StartedAt.IsZero() || r.StartedAt.After(r.FinishedAt) || r.FinishedAt.Sub(r.StartedAt) > startGrace+time.Second || r.RunID == "" || r.RunID != r.FinishedRunID {
		t.Fatalf("quick run recorded as started %v, finished %v, run %q/%q", r.StartedAt, r.FinishedAt, r.RunID, r.FinishedRunID)
	}
	// Delivered at once, a quick run's result never went to disk.
	pending := filepath.Join(stateDir, pendingDir)
	if _, err := os.Stat(pending); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pending results directory after a quick run: %v, want none made", err)
	}

	const slow = startGrace + 2*time.Second
	d.mu.Lock()
	d.delay = slow
	d.mu.Unlock()
	apply(t, ctx, tc.admin, hostYAML(1500))
	poll.Until(t, 30*time.Second, "slow run shown Running", func() error {
		if r = step(); r.State != plan.Running {
			return fmt.Errorf("step is %s", r.State)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, "slow run recorded", func() error {
		if r = step(); r.State != plan.Succeeded || r.AppliedHash != r.InputsHash {
			return fmt.Errorf("step is %s", r.State)
		}
		return nil
	})
	if n := commands("StepStart"); n != 1 {
		t.Fatalf("a slow run wrote %d StepStart commands, want 1", n)
	}
	if took := r.FinishedAt.Sub(r.StartedAt); took < slow {
		t.Fatalf("slow run recorded as taking %v", took)
	}
	if applies, _ := d.counts(); applies != 2 {
		t.Fatalf("applies = %d, want 2", applies)
	}
	// A slow run's result was written before it was reported, and removed after.
	if ents, err := os.ReadDir(pending); err != nil || len(ents) != 0 {
		t.Fatalf("pending results after a slow run: %v, %v; want an empty directory", ents, err)
	}

	// The inputs change while a slow run is in its grace: the coordinator refuses its
	// late start, yet the run changed the host, so the log still says how it ended.
	// The change must land within the grace; a loaded machine may miss it, so try again.
	refused := func() bool {
		return strings.Contains(logs.String(), "step changed on the coordinator before it started")
	}
	for mtu := 1400; !refused(); mtu -= 100 {
		if mtu < 1100 {
			t.Fatal("no late start was refused in three tries: the test did not test what it says")
		}
		before, _ := d.counts()
		apply(t, ctx, tc.admin, hostYAML(mtu))
		poll.Until(t, 30*time.Second, "slow run under way", func() error {
			if n, _ := d.counts(); n == before {
				return errors.New("not applying yet")
			}
			return nil
		})
		apply(t, ctx, tc.admin, hostYAML(mtu-50))
		poll.Until(t, 60*time.Second, "changed inputs applied", func() error {
			if r = step(); r.State != plan.Succeeded || r.AppliedHash != r.InputsHash || !strings.Contains(string(r.Inputs), strconv.Itoa(mtu-50)) {
				return fmt.Errorf("step is %s", r.State)
			}
			return nil
		})
	}
	if open := runsWithoutEnd(logs.String()); len(open) > 0 {
		t.Fatalf("runs started without an end in the log: %v", open)
	}
}

// runsWithoutEnd lists the runs in an agent's JSON log that started and never
// logged how they ended.
func runsWithoutEnd(log string) []string {
	open := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Run string }
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Run == "" {
			continue
		}
		switch rec.Msg {
		case LogRunStarted:
			open[rec.Run] = true
		case LogRunSucceeded, LogRunFailed, LogRunInterrupted:
			delete(open, rec.Run)
		}
	}
	return slices.Sorted(maps.Keys(open))
}

type notes struct {
	mu sync.Mutex
	l  []string
}

func (n *notes) add(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.l = append(n.l, s)
}

func (n *notes) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.l...)
}

func (n *notes) has(s string) bool {
	for _, x := range n.list() {
		if x == s {
			return true
		}
	}
	return false
}

func apply(t *testing.T, ctx context.Context, admin *client.Client, yaml string) {
	t.Helper()
	var resp wire.ApplyResponse
	if _, err := admin.Do(ctx, "POST", "/v1/apply", wire.ApplyRequest{File: "hosts.yaml", YAML: yaml}, &resp); err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("apply: %s", strings.Join(resp.Plan, "; "))
}

// testCoordinator is one real coordinator ("c0", fast profile) that runs until the
// test ends, and an admin client for it.
type testCoordinator struct {
	cfg   coordinator.Config
	dir   string // the test's directory; the coordinator's data is under it
	admin *client.Client
}

// startCoordinator initialises and runs a coordinator issuing agent certificates of
// agentTTL; it is stopped (and waited for) when the test ends.
func startCoordinator(t *testing.T, ctx context.Context, log *slog.Logger, agentTTL time.Duration) testCoordinator {
	t.Helper()
	dir := t.TempDir()
	adminPath := filepath.Join(dir, "admin.json")
	ccfg := coordinator.Config{
		Name: "c0", Site: "lab", APIAddr: freeAddr(t), JoinAddr: freeAddr(t), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t),
		Profile: "fast", AgentCertTTL: coordinator.Duration(agentTTL),
	}
	cdir := filepath.Join(dir, "coordinator")
	if err := coordinator.Init(coordinator.InitOptions{DataDir: cdir, Config: ccfg, AdminIdentity: adminPath}); err != nil {
		t.Fatal(err)
	}
	cctx, cstop := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- coordinator.Run(cctx, cdir, coordinator.RunOptions{Logger: log.With("who", "coordinator")})
	}()
	t.Cleanup(func() {
		cstop()
		select {
		case <-cdone:
		case <-time.After(30 * time.Second):
			t.Error("coordinator did not stop")
		}
	})
	admin, err := client.FromIdentityFile(adminPath)
	if err != nil {
		t.Fatal(err)
	}
	return testCoordinator{cfg: ccfg, dir: dir, admin: admin}
}
