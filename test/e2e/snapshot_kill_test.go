package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/consensus"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// snapKillRounds is how many kills each phase of TestSnapshotKills makes
// (PLINTH_SNAPSHOT_KILLS): 20 under make chaos; 8 by default, which keeps the test
// near a minute in make test's e2e run; 0 skips it.
var snapKillRounds = envInt("PLINTH_SNAPSHOT_KILLS", 8)

// snapKillTokens is how many token records the big state holds (about 250 bytes each),
// so that saving and restoring it takes long enough for a kill to land inside.
var snapKillTokens = envInt("PLINTH_SNAPSHOT_KILL_TOKENS", 30000)

// TestSnapshotKills kills -9 one coordinator (a one-member cluster, so nothing but its
// own disk can bring the state back) while it works on a large state:
//   - during a Raft snapshot save (a new snapshot's temporary directory exists; the
//     kill comes after a random part of the measured save time), with writers running;
//   - during Raft's restore at start-up (snapshot then log), at a random point of the
//     measured restore time;
//   - during an operator `snapshot restore` (one large log entry), at a random point of
//     its measured time.
//
// After each kill the coordinator must start again; every acknowledged write must be
// there (the whole exported state before the kill is contained in the one after, or
// equal to it when nothing was in flight; an operator restore is all or nothing, and
// done if acknowledged); every snapshot on disk must pass its CRC and decode; and no
// temporary snapshot is left behind.
func TestSnapshotKills(t *testing.T) {
	rounds := snapKillRounds
	if rounds <= 0 {
		t.Skip("PLINTH_SNAPSHOT_KILLS=0")
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (the kill delays; PLINTH_CHAOS_SEED=%d picks them again, the timing of the process does not repeat)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(60+rounds*3*6)*time.Second)
	defer cancel()
	l, c, cl := oneCoordinator(t, ctx, siteYAML)
	// Snapshot after 16 new entries, checked every 50-100 ms.
	c.Proc.Stop(5 * time.Second)
	if err := editConfig(c.DataDir, map[string]any{"raftSnapshotThreshold": 16, "raftSnapshotInterval": "50ms"}); err != nil {
		t.Fatal(err)
	}
	k := &snapKiller{t: t, ctx: ctx, l: l, c: c, cl: cl, r: rand.New(rand.NewPCG(seed, 1))}
	k.restart()

	began := time.Now()
	y := k.bigState("y")
	x := k.bigState("x")
	t.Logf("big state: %d tokens, %.1f MB; made in %s", snapKillTokens, float64(len(x))/1e6, time.Since(began).Round(time.Millisecond))

	k.saveKills(rounds)
	k.startupKills(rounds)
	k.restoreKills(rounds, x, y)
	t.Logf("restarts that finished a raft log segment rotation the kill interrupted: %d of %d", k.rotations, k.restarts)
}

type snapKiller struct {
	t   *testing.T
	ctx context.Context
	l   *lab.Lab
	c   *lab.Coordinator
	cl  *client.Client
	r   *rand.Rand
	// logAt is the size of the coordinator's log when it was last started.
	logAt int64
	seq   int
	// restarts counts restartChecked's restarts; rotations those that finished a
	// log segment rotation the kill had interrupted.
	restarts, rotations int
}

func (k *snapKiller) snapDir() string { return filepath.Join(k.c.DataDir, "raft", "snapshots") }

// tmpSnaps lists the temporary (unfinished) snapshot directories.
func (k *snapKiller) tmpSnaps() []string {
	es, _ := os.ReadDir(k.snapDir())
	var out []string
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}

// restart starts the coordinator and waits until it leads again.
func (k *snapKiller) restart() time.Duration {
	k.t.Helper()
	if st, err := os.Stat(k.logPath()); err == nil {
		k.logAt = st.Size()
	}
	began := time.Now()
	if err := k.l.StartCoordinator(k.c); err != nil {
		k.t.Fatal(err)
	}
	if err := k.l.WaitReady(k.ctx, k.c, 60*time.Second); err != nil {
		k.t.Fatalf("the coordinator does not start again after kill -9: %v", err)
	}
	return time.Since(began)
}

func (k *snapKiller) logPath() string {
	return filepath.Join(k.l.Dir, "logs", "coordinator-"+k.c.Name+".log")
}

// logSinceStart is what the coordinator logged since it was last started.
func (k *snapKiller) logSinceStart() string {
	b, _ := os.ReadFile(k.logPath())
	if int64(len(b)) < k.logAt {
		return ""
	}
	return string(b[k.logAt:])
}

// export reads the whole state, once the restarted coordinator has applied its log.
func (k *snapKiller) export() []byte {
	k.t.Helper()
	var buf bytes.Buffer
	poll.Until(k.t, 30*time.Second, "the state can be read", func() error {
		buf.Reset()
		_, err := k.cl.Do(k.ctx, "GET", wire.PathSnapshot+"?consistent", nil, &buf)
		return err
	})
	return buf.Bytes()
}

func (k *snapKiller) restore(snap []byte) {
	k.t.Helper()
	if _, err := k.cl.Do(k.ctx, "POST", wire.PathSnapshot, snap, nil); err != nil {
		k.t.Fatal(err)
	}
}

// bigState restores the current state with snapKillTokens token records added, and
// returns its export.
func (k *snapKiller) bigState(prefix string) []byte {
	k.t.Helper()
	var tok wire.TokenResponse
	if _, err := k.cl.Do(k.ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: "model-" + prefix, Role: "agent", TTL: 24 * time.Hour}, &tok); err != nil {
		k.t.Fatal(err)
	}
	var snap struct {
		V      int                        `json:"v"`
		Tables map[string]json.RawMessage `json:"tables"`
	}
	if err := json.Unmarshal(k.export(), &snap); err != nil {
		k.t.Fatal(err)
	}
	var toks map[string]map[string]any
	if err := json.Unmarshal(snap.Tables["tokens"], &toks); err != nil {
		k.t.Fatal(err)
	}
	model := toks[tok.ID]
	if model == nil {
		k.t.Fatalf("token %s not in the export", tok.ID)
	}
	for id := range toks {
		if strings.HasPrefix(id, "big-") { // another big state's
			delete(toks, id)
		}
	}
	for i := range snapKillTokens {
		rec := map[string]any{}
		for f, v := range model {
			rec[f] = v
		}
		id := fmt.Sprintf("big-%s-%06d", prefix, i)
		rec["id"], rec["name"] = id, id
		toks[id] = rec
	}
	snap.Tables["tokens"], _ = json.Marshal(toks)
	out, err := json.Marshal(snap)
	if err != nil {
		k.t.Fatal(err)
	}
	k.restore(out)
	return k.export()
}

// writers create tokens until stop is closed; acked are the ones acknowledged.
func (k *snapKiller) writers(stop <-chan struct{}) (wait func() []string) {
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	k.seq++
	base := k.seq
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var resp wire.TokenResponse
				wctx, cancel := context.WithTimeout(k.ctx, 5*time.Second)
				_, err := k.cl.Do(wctx, "POST", "/v1/tokens", wire.TokenRequest{Name: fmt.Sprintf("w%d-%d-%d", base, w, i), Role: "agent", TTL: 24 * time.Hour}, &resp)
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, resp.ID)
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return func() []string { wg.Wait(); return acked }
}

// awaitSave waits for a Raft snapshot save to begin and returns its temporary directory.
func (k *snapKiller) awaitSave(timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ts := k.tmpSnaps(); len(ts) > 0 {
			return ts[0], true
		}
		time.Sleep(time.Millisecond)
	}
	return "", false
}

func (k *snapKiller) saveKills(rounds int) {
	t := k.t
	// Measure how long a save's temporary directory lives.
	stop := make(chan struct{})
	wait := k.writers(stop)
	var saves []time.Duration
	for len(saves) < 5 {
		tmp, ok := k.awaitSave(20 * time.Second)
		if !ok {
			t.Fatal("no Raft snapshot save began within 20s while writing")
		}
		seen := time.Now()
		for slices.Contains(k.tmpSnaps(), tmp) {
			time.Sleep(time.Millisecond)
		}
		saves = append(saves, time.Since(seen))
	}
	close(stop)
	wait()
	slices.Sort(saves)
	// The shortest save seen is the window: a kill at a random point of it lands inside
	// most saves (the directory is seen a little after it is made).
	window := saves[0]
	t.Logf("raft snapshot save of the big state: %s to %s (seen from its temporary directory)", saves[0].Round(time.Millisecond), saves[len(saves)-1].Round(time.Millisecond))

	landed := 0
	var took []time.Duration
	for round := 1; round <= rounds && !t.Failed(); round++ {
		began := time.Now()
		before := k.export()
		stop := make(chan struct{})
		wait := k.writers(stop)
		tmp, ok := k.awaitSave(20 * time.Second)
		if !ok {
			t.Fatalf("save round %d: no snapshot save began within 20s", round)
		}
		delay := time.Duration(k.r.Int64N(int64(window) + 1))
		time.Sleep(delay)
		k.c.Proc.Kill()
		inside := slices.Contains(k.tmpSnaps(), tmp)
		if inside {
			landed++
		}
		close(stop)
		acked := wait()
		restart := k.restartChecked(fmt.Sprintf("save round %d", round))
		after := k.export()
		if err := contains(before, after); err != nil {
			t.Errorf("save round %d: state before the kill not all there after: %v", round, err)
		}
		if err := hasTokens(after, acked); err != nil {
			t.Errorf("save round %d: %v", round, err)
		}
		took = append(took, time.Since(began))
		t.Logf("save round %d: kill %s after the save began, inside the save: %v; %d writes acknowledged, all there; restart %s",
			round, delay.Round(time.Millisecond), inside, len(acked), restart.Round(time.Millisecond))
	}
	t.Logf("snapshot save kills: %d/%d landed inside a save (its temporary directory still there); mean round %s", landed, rounds, mean(took))
}

func (k *snapKiller) startupKills(rounds int) {
	t := k.t
	// A few acknowledged writes after the last snapshot, so start-up replays a log too.
	k.writeSome(40)
	before := k.export()
	k.c.Proc.Kill()
	began := time.Now()
	k.restart()
	from, to := k.loggedAfter(began, "starting restore from snapshot"), k.loggedAfter(began, "restored from snapshot")
	t.Logf("start-up: restore from the snapshot from %s to %s after start", from.Round(time.Millisecond), to.Round(time.Millisecond))
	if err := equalState(before, k.export()); err != nil {
		t.Fatalf("after a plain restart: %v", err)
	}

	var counts [3]int // before the restore began, inside it, after it
	var took []time.Duration
	for round := 1; round <= rounds && !t.Failed(); round++ {
		rb := time.Now()
		k.writeSome(20)
		before := k.export()
		k.c.Proc.Kill()
		if st, err := os.Stat(k.logPath()); err == nil {
			k.logAt = st.Size()
		}
		if err := k.l.StartCoordinator(k.c); err != nil {
			t.Fatal(err)
		}
		delay := from + time.Duration(k.r.Int64N(int64(to-from)+1))
		time.Sleep(delay)
		k.c.Proc.Kill()
		logged := k.logSinceStart()
		phase := 0
		switch {
		case strings.Contains(logged, "restored from snapshot"):
			phase = 2
		case strings.Contains(logged, "starting restore from snapshot"):
			phase = 1
		}
		counts[phase]++
		restart := k.restartChecked(fmt.Sprintf("start-up round %d", round))
		if err := equalState(before, k.export()); err != nil {
			t.Errorf("start-up round %d: %v", round, err)
		}
		took = append(took, time.Since(rb))
		t.Logf("start-up round %d: kill %s after start (%s); restart %s", round, delay.Round(time.Millisecond),
			[]string{"before the restore", "inside the restore", "after the restore"}[phase], restart.Round(time.Millisecond))
	}
	t.Logf("start-up restore kills: %d before the restore began, %d inside it, %d after it; mean round %s", counts[0], counts[1], counts[2], mean(took))
}

// loggedAfter is how long after began the current start logged msg.
func (k *snapKiller) loggedAfter(began time.Time, msg string) time.Duration {
	k.t.Helper()
	for _, line := range strings.Split(k.logSinceStart(), "\n") {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
			return rec.Time.Sub(began)
		}
	}
	k.t.Fatalf("%q not logged at start-up:\n%s", msg, k.logSinceStart())
	return 0
}

func (k *snapKiller) restoreKills(rounds int, x, y []byte) {
	t := k.t
	// Measure one operator restore.
	began := time.Now()
	k.restore(y)
	window := time.Since(began)
	cur := k.export()
	if err := equalState(y, cur); err != nil {
		t.Fatalf("after an operator restore: %v", err)
	}
	t.Logf("operator snapshot restore: %s", window.Round(time.Millisecond))

	var inFlight, acked int
	var took []time.Duration
	targets := [][]byte{x, y}
	for round := 1; round <= rounds && !t.Failed(); round++ {
		rb := time.Now()
		before := k.export()
		target := targets[round%2]
		done := make(chan error, 1)
		go func() {
			_, err := k.cl.Do(k.ctx, "POST", wire.PathSnapshot, target, nil)
			done <- err
		}()
		delay := time.Duration(k.r.Int64N(int64(window)*5/4 + 1))
		time.Sleep(delay)
		k.c.Proc.Kill()
		err := <-done
		if err == nil {
			acked++
		} else {
			inFlight++
		}
		restart := k.restartChecked(fmt.Sprintf("restore round %d", round))
		after := k.export()
		eqNew, eqOld := equalState(target, after), equalState(before, after)
		switch {
		case err == nil && eqNew != nil:
			t.Errorf("restore round %d: the restore was acknowledged but the state is not the restored one: %v", round, eqNew)
		case eqNew != nil && eqOld != nil:
			t.Errorf("restore round %d: the state is neither the old nor the restored one: %v; %v", round, eqOld, eqNew)
		}
		took = append(took, time.Since(rb))
		t.Logf("restore round %d: kill %s after the request, acknowledged: %v, state is the restored one: %v; restart %s",
			round, delay.Round(time.Millisecond), err == nil, eqNew == nil, restart.Round(time.Millisecond))
	}
	t.Logf("operator restore kills: %d in flight, %d after acknowledgement; mean round %s", inFlight, acked, mean(took))
}

// writeSome makes n acknowledged writes.
func (k *snapKiller) writeSome(n int) {
	k.t.Helper()
	for i := range n {
		k.seq++
		if _, err := k.cl.Do(k.ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: fmt.Sprintf("s%d-%d", k.seq, i), Role: "agent", TTL: 24 * time.Hour}, nil); err != nil {
			k.t.Fatal(err)
		}
	}
}

// restartChecked checks what the killed coordinator left on disk, starts it again
// and checks the start: every finished snapshot passes its CRC and decodes as state;
// the start loads the newest of them (never an unfinished one) and removes the
// unfinished ones. It returns how long the start took.
func (k *snapKiller) restartChecked(round string) time.Duration {
	t := k.t
	t.Helper()
	store, err := raft.NewFileSnapshotStore(filepath.Dir(k.snapDir()), 3, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) == 0 {
		t.Errorf("%s: no finished snapshot on disk", round)
	}
	for _, m := range metas {
		_, rc, err := store.Open(m.ID)
		if err != nil {
			t.Errorf("%s: snapshot %s: %v", round, m.ID, err)
			continue
		}
		var v struct {
			Tables map[string]json.RawMessage `json:"tables"`
		}
		err = json.NewDecoder(rc).Decode(&v)
		rc.Close()
		if err != nil || v.Tables == nil {
			t.Errorf("%s: snapshot %s does not decode: %v", round, m.ID, err)
		}
	}
	unfinished := k.tmpSnaps()
	took := k.restart()
	logged := k.logSinceStart()
	loaded := ""
	for _, line := range strings.Split(logged, "\n") {
		var rec struct {
			Msg string `json:"msg"`
			ID  string `json:"id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "restored from snapshot" {
			loaded = rec.ID
		}
	}
	if len(metas) > 0 && loaded != metas[0].ID {
		t.Errorf("%s: start-up loaded snapshot %q, want the newest finished one %s", round, loaded, metas[0].ID)
	}
	k.restarts++
	if strings.Contains(logged, consensus.RotationFinished) {
		k.rotations++
	}
	if strings.Contains(logged, "failed to restore snapshot") {
		t.Errorf("%s: a snapshot failed to restore at start-up", round)
	}
	for _, u := range unfinished {
		if slices.Contains(k.tmpSnaps(), u) {
			t.Errorf("%s: unfinished snapshot %s still there after the restart", round, u)
		}
	}
	return took
}

// stateTables are an export's tables without what changes by itself: the index, the
// declared index (a restore moves it to its own), the event log and the FSM's
// bookkeeping times (last full refresh, last token prune).
func stateTables(export []byte) (map[string]json.RawMessage, error) {
	var snap struct {
		Tables map[string]json.RawMessage `json:"tables"`
	}
	if err := json.Unmarshal(export, &snap); err != nil {
		return nil, err
	}
	for _, k := range []string{"index", "declaredIndex", "events", "nextEventID", "refreshed", "tokensPruned"} {
		delete(snap.Tables, k)
	}
	return snap.Tables, nil
}

// equalState compares two exports' tables.
func equalState(want, got []byte) error {
	w, err := stateTables(want)
	if err != nil {
		return err
	}
	g, err := stateTables(got)
	if err != nil {
		return err
	}
	for name := range w {
		if _, ok := g[name]; !ok {
			return fmt.Errorf("table %s missing", name)
		}
	}
	for name, gv := range g {
		if !bytes.Equal(w[name], gv) {
			return fmt.Errorf("table %s differs (%d vs %d bytes)", name, len(w[name]), len(gv))
		}
	}
	return nil
}

// contains checks every record of before is in after, unchanged (tables that are maps),
// and every other table is equal.
func contains(before, after []byte) error {
	b, err := stateTables(before)
	if err != nil {
		return err
	}
	a, err := stateTables(after)
	if err != nil {
		return err
	}
	var errs []error
	for name, bv := range b {
		var bm, am map[string]json.RawMessage
		if json.Unmarshal(bv, &bm) != nil || json.Unmarshal(a[name], &am) != nil {
			if !bytes.Equal(bv, a[name]) {
				errs = append(errs, fmt.Errorf("table %s differs", name))
			}
			continue
		}
		for key, rec := range bm {
			if !bytes.Equal(rec, am[key]) {
				errs = append(errs, fmt.Errorf("%s/%s lost or changed", name, key))
			}
		}
	}
	return errors.Join(errs...)
}

func hasTokens(export []byte, ids []string) error {
	tb, err := stateTables(export)
	if err != nil {
		return err
	}
	var toks map[string]json.RawMessage
	if err := json.Unmarshal(tb["tokens"], &toks); err != nil {
		return err
	}
	var lost []string
	for _, id := range ids {
		if _, ok := toks[id]; !ok {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("%d acknowledged writes lost: %v", len(lost), lost)
	}
	return nil
}

// editConfig sets fields of a coordinator's coordinator.json.
func editConfig(dataDir string, fields map[string]any) error {
	p := filepath.Join(dataDir, "coordinator.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for f, v := range fields {
		cfg[f] = v
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o600)
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(time.Millisecond)
}
