package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

var (
	chaosRounds = flag.Int("chaos.rounds", envInt("PLINTH_CHAOS_ROUNDS", 0), "chaos rounds over the lab (0: skip TestChaos); make chaos runs 100")
	chaosSeed   = flag.Uint64("chaos.seed", uint64(envInt("PLINTH_CHAOS_SEED", 0)), "chaos seed (0: a new one, printed); a failing seed replays its rounds")
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// A fault is one thing that goes wrong in a round; it returns how to heal it.
type fault struct {
	name   string
	inject func(e *labEnv, r *rand.Rand) (what string, heal func(), err error)
}

var faults = []fault{
	{"kill -9 the leader coordinator", func(e *labEnv, r *rand.Rand) (string, func(), error) {
		leader, err := e.l.Leader(e.ctx)
		if err != nil {
			return "", nil, err
		}
		return leader, func() {}, e.l.Coordinator(leader).Kill(e.ctx) // systemd restarts it
	}},
	{"kill -9 a coordinator", func(e *labEnv, r *rand.Rand) (string, func(), error) {
		cs := e.l.Coordinators()
		c := cs[r.IntN(len(cs))]
		return c.Name, func() {}, c.Kill(e.ctx)
	}},
	{"kill -9 an agent in the middle of its steps", func(e *labEnv, r *rand.Rand) (string, func(), error) {
		h := pick(e, r)
		return h.Name, func() {
			if err := e.l.StartAgent(e.ctx, h); err != nil {
				e.t.Errorf("start agent on %s: %v", h.Name, err)
			}
		}, e.l.KillAgent(e.ctx, h)
	}},
	{"partition a host", func(e *labEnv, r *rand.Rand) (string, func(), error) {
		h := pick(e, r)
		return h.Name, func() {
			if err := e.l.Heal(e.ctx, h); err != nil {
				e.t.Errorf("heal %s: %v", h.Name, err)
			}
		}, e.l.Partition(e.ctx, h)
	}},
	{"restart a host", func(e *labEnv, r *rand.Rand) (string, func(), error) {
		h := pick(e, r)
		if err := h.Machine.Poweroff(e.ctx); err != nil {
			return h.Name, nil, err
		}
		return h.Name, func() {
			if err := h.Machine.Start(e.ctx); err != nil {
				e.t.Errorf("start %s: %v", h.Name, err)
			}
		}, nil
	}},
	{"full power loss", func(e *labEnv, r *rand.Rand) (string, func(), error) {
		for _, h := range e.l.Hosts() {
			if err := h.Machine.PowerLoss(); err != nil {
				return "every host", nil, err
			}
		}
		// Power returns to every host at once: booted one by one, a coordinator's
		// unit would wait for a quorum that the hosts not yet started cannot give.
		return "every host", func() {
			var wg sync.WaitGroup
			for _, h := range e.l.Hosts() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := h.Machine.Start(e.ctx); err != nil {
						e.t.Errorf("start %s: %v", h.Name, err)
					}
				}()
			}
			wg.Wait()
		}, nil
	}},
}

func pick(e *labEnv, r *rand.Rand) *lab.Host {
	hs := e.l.Hosts()
	return hs[r.IntN(len(hs))]
}

// TestChaos runs randomised rounds over the lab (make chaos: 100; make test: 10). Each
// round applies a change, injects a fault while the steps run (kill -9 the leader or
// any coordinator, kill -9 an agent, partition a host, restart a host, lose power on
// every host), heals it, and checks: the site is Ready again within a bound; nothing
// acknowledged was lost (a dry run of the last acknowledged manifest changes nothing,
// and every host carries it for real); every coordinator holds the same state; no
// step ran twice at once on a host; no private key in the clear in any Raft store.
// The seed is printed; -chaos.seed replays a failing one.
func TestChaos(t *testing.T) {
	if *chaosRounds <= 0 {
		t.Skip("chaos rounds not asked for: make chaos (or -chaos.rounds N / PLINTH_CHAOS_ROUNDS)")
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("chaos seed %d (replay: make chaos CHAOS_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// A round takes ~15 s; the bound leaves room for slow heals (each has its own).
	e := startLabFor(t, max(12*time.Minute, 3*time.Minute+time.Duration(*chaosRounds)*45*time.Second))
	counts := map[string]int{}
	var worst time.Duration
	mtu := 9000
	octet := 21
	for round := 1; round <= *chaosRounds && !t.Failed(); round++ {
		mtu = []int{9000, 8000, 7000, 1500}[r.IntN(4)]
		octet = 21 + 20*r.IntN(2)
		manifest := labManifest(e.n, mtu, map[string]int{"compute-0": octet})
		f := faults[r.IntN(len(faults))]
		e.apply(manifest) // acknowledged: from here it must never be lost
		time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
		who, heal, err := f.inject(e, r)
		if err != nil {
			t.Fatalf("round %d (seed %d): %s on %s: %v", round, seed, f.name, who, err)
		}
		time.Sleep(time.Duration(500+r.IntN(3000)) * time.Millisecond)
		heal()
		began := time.Now()
		for _, c := range e.l.Coordinators() {
			if err := e.l.WaitReady(e.ctx, c, 2*time.Minute); err != nil {
				t.Fatalf("round %d (seed %d): %v", round, seed, err)
			}
		}
		e.waitReady(3 * time.Minute)
		took := time.Since(began)
		worst = max(worst, took)
		counts[f.name]++
		t.Logf("round %d: %s (%s), mtu %d, compute-0 .%d: Ready %s after heal", round, f.name, who, mtu, octet, took.Round(100*time.Millisecond))
		e.checkInvariants(round, seed, manifest, mtu, octet)
	}
	t.Logf("chaos summary, seed %d: %d rounds, worst heal -> Ready %s", seed, *chaosRounds, worst.Round(100*time.Millisecond))
	for _, f := range faults {
		t.Logf("  %-45s %d rounds", f.name, counts[f.name])
	}
}

func (e *labEnv) checkInvariants(round int, seed uint64, manifest string, mtu, octet int) {
	t := e.t
	t.Helper()
	fail := func(format string, args ...any) {
		t.Errorf("round %d (seed %d): "+format, append([]any{round, seed}, args...)...)
	}
	// Nothing acknowledged is lost: the stored site is exactly the last manifest.
	f := fmt.Sprintf("%s/chaos-%d.yaml", e.dir, round)
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.l.CLI(e.ctx, "apply", "--dry-run", "-f", f); err != nil || !strings.Contains(out, "no changes") {
		fail("a dry run of the last acknowledged manifest wants changes: %v\n%s", err, out)
	}
	// And every host carries it for real.
	for _, h := range e.l.Hosts() {
		gotMTU, addrs := e.link(h.Name)
		o := lab.DefaultSpec("").Hosts[indexOf(h.Name)].Octet
		if h.Name == "compute-0" {
			o = octet
		}
		if want := fmt.Sprintf("10.%d.0.%d/24", e.n+1, o); gotMTU != mtu || strings.Join(addrs, ",") != want {
			fail("%s data0: mtu %d addrs %v, want %d %s", h.Name, gotMTU, addrs, mtu, want)
		}
	}
	// Every step reported done was verified: its driver, asked again by the drift
	// check (every 2 s here, repair policy), finds nothing to change, so after a few
	// checks every step is still Succeeded with its current inputs applied.
	time.Sleep(5 * time.Second)
	for id, st := range e.stepsByID() {
		if st.State != plan.Succeeded || st.AppliedHash != st.InputsHash || len(st.Drift) > 0 {
			fail("step %s: %s, applied %s, inputs %s, drift %v", id, st.State, st.AppliedHash, st.InputsHash, st.Drift)
		}
	}
	// Every coordinator holds the same state once they have applied the same log.
	poll.Until(t, 30*time.Second, "coordinators agree", func() error { return e.coordinatorsAgree() })
	// No step ran twice at once on a host; no private key in the clear in Raft.
	for _, h := range e.l.Hosts() {
		if err := e.noOverlappingRuns(h); err != nil {
			fail("%s: %v", h.Name, err)
		}
	}
	for _, c := range e.l.Coordinators() {
		out, _ := e.l.Exec(e.ctx, c.Host, "sh", "-c", "grep -rlas 'PRIVATE KEY-----' /var/lib/plinth-coordinator/ --include='*.wal' --include='*.snap' --include=state.bin || true")
		if strings.TrimSpace(out) != "" {
			fail("%s: a private key in the clear in %s", c.Name, strings.TrimSpace(out))
		}
	}
}

// coordinatorsAgree compares every coordinator's local state (its own snapshot
// export, no forwarding), ignoring only the index.
func (e *labEnv) coordinatorsAgree() error {
	var first []byte
	var firstName string
	for _, c := range e.l.Coordinators() {
		cl, err := e.l.NodeClient(c)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if _, err := cl.Do(e.ctx, "GET", wire.PathSnapshot, nil, &buf); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		var snap struct {
			Tables map[string]json.RawMessage `json:"tables"`
		}
		if err := json.Unmarshal(buf.Bytes(), &snap); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		delete(snap.Tables, "index")
		delete(snap.Tables, "Index")
		b, _ := json.Marshal(snap.Tables)
		if first == nil {
			first, firstName = b, c.Name
			continue
		}
		if !bytes.Equal(first, b) {
			return fmt.Errorf("%s and %s differ (%d vs %d bytes)", firstName, c.Name, len(first), len(b))
		}
	}
	return nil
}

func (e *labEnv) stepsByID() map[string]plan.Record {
	e.t.Helper()
	var steps []plan.Record
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/steps?consistent", nil, &steps); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]plan.Record{}
	for _, s := range steps {
		out[s.ID] = s
	}
	return out
}

var journalLine = regexp.MustCompile(`plinth-agent\[(\d+)\]: (\{.*\})$`)

// linesOf is the lines of a journal that name any of runs.
func linesOf(journal string, runs ...string) string {
	var out []string
	for _, line := range strings.Split(journal, "\n") {
		if slices.ContainsFunc(runs, func(r string) bool { return strings.Contains(line, r) }) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// noOverlappingRuns reads h's agent journal: within one agent process, a step is never
// started again before its previous run ended (reported or failed).
func (e *labEnv) noOverlappingRuns(h *lab.Host) error {
	out, err := e.l.Exec(e.ctx, h, "journalctl", "-u", "plinth-agent", "--no-pager", "-o", "short")
	if err != nil {
		return err
	}
	open := map[string]string{} // pid/step -> run
	for _, line := range strings.Split(out, "\n") {
		m := journalLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var rec struct {
			Msg  string `json:"msg"`
			Step string `json:"step"`
			Run  string `json:"run"`
		}
		if json.Unmarshal([]byte(m[2]), &rec) != nil || rec.Step == "" {
			continue
		}
		k := m[1] + "/" + rec.Step
		switch rec.Msg {
		case agent.LogRunStarted:
			if run, ok := open[k]; ok && run != rec.Run {
				return fmt.Errorf("step %s started (run %s) while run %s of it was still going (agent pid %s); the runs' journal:\n%s",
					rec.Step, rec.Run, run, m[1], linesOf(out, run, rec.Run))
			}
			open[k] = rec.Run
		case agent.LogRunSucceeded, agent.LogRunFailed, agent.LogRunInterrupted:
			delete(open, k)
		}
	}
	return nil
}
