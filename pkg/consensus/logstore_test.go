package consensus

import (
	"bytes"
	"errors"
	stdlog "log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/plinth-dev/plinth/internal/freeport"
	"github.com/plinth-dev/plinth/internal/poll"
)

// A data directory written by raft on raft-boltdb (as Plinth's earlier versions
// did) opens with its state: the log replays into the FSM, the term and vote
// carry over, and the old database is gone.
func TestOpenMigratesBoltDataDir(t *testing.T) {
	h := newHarness(t)
	cfg := h.config("a")
	cfg.BindAddr = freeport.Addr(t)
	want := writeBoltRaft(t, cfg, "one", "two", "three")

	a := h.open(cfg)
	waitLeader(t, a)
	waitList(t, a, want)
	before := a.LogBytesWritten()
	mustApply(t, a, "four")
	if after := a.LogBytesWritten(); after < before+uint64(len("four")) {
		t.Fatalf("log bytes written %d -> %d after an apply", before, after)
	}
	for _, gone := range []string{boltFile, walMigrating} {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after migration: %v, want it gone", gone, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = h.reopen(a)
	waitLeader(t, a)
	waitList(t, a, append(want, "four"))
}

// writeBoltRaft runs a single-voter raft on raft-boltdb in cfg.DataDir at
// cfg.BindAddr, applies cmds and shuts it down.
func writeBoltRaft(t *testing.T, cfg Config, cmds ...string) []string {
	t.Helper()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(cfg.DataDir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, snapshotsRetained, newHCLog(cfg.Logger, "raft-snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.BindAddr))
	defer trans.Close()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = newHCLog(cfg.Logger, "raft")
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	fsm := &listFSM{}
	r, err := raft.NewRaft(rc, fsm, bolt, bolt, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown().Error() }()
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
	}}}).Error(); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "bolt raft to lead", func() bool { return r.State() == raft.Leader })
	for _, c := range cmds {
		if err := r.Apply([]byte(c), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return fsm.list()
}

type testLog struct {
	index, term uint64
	data        string
}

// seedBolt writes a raft-boltdb database as raft leaves it after a snapshot
// compacted its head: logs 10..25 and the stable keys (LastVoteCand only when
// voted).
func seedBolt(t *testing.T, dir string, voted bool) []testLog {
	t.Helper()
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var logs []*raft.Log
	var want []testLog
	for i := uint64(10); i <= 25; i++ {
		l := testLog{index: i, term: 2 + i/20, data: strings.Repeat("x", int(i))}
		want = append(want, l)
		logs = append(logs, &raft.Log{Index: l.index, Term: l.term, Type: raft.LogCommand, Data: []byte(l.data)})
	}
	if err := b.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if voted {
		if err := b.SetUint64([]byte("LastVoteTerm"), 3); err != nil {
			t.Fatal(err)
		}
		if err := b.Set([]byte("LastVoteCand"), []byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func checkStore(t *testing.T, s *logStore, want []testLog, voted bool) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != want[0].index || last != want[len(want)-1].index {
		t.Fatalf("indexes %d..%d, want %d..%d", first, last, want[0].index, want[len(want)-1].index)
	}
	for _, w := range want {
		var l raft.Log
		if err := s.GetLog(w.index, &l); err != nil {
			t.Fatalf("log %d: %v", w.index, err)
		}
		if l.Term != w.term || l.Type != raft.LogCommand || !bytes.Equal(l.Data, []byte(w.data)) {
			t.Fatalf("log %d = term %d type %v %q, want term %d %q", w.index, l.Term, l.Type, l.Data, w.term, w.data)
		}
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Fatalf("CurrentTerm = %d, %v", term, err)
	}
	cand, err := s.Get([]byte("LastVoteCand"))
	switch {
	case voted && (err != nil || string(cand) != "b"):
		t.Fatalf("LastVoteCand = %q, %v; want b", cand, err)
	case !voted && (len(cand) != 0 || err != nil):
		t.Fatalf("LastVoteCand of a server that never voted = %q, %v; want none", cand, err)
	}
}

func openStoreT(t *testing.T, dir string) *logStore {
	t.Helper()
	s, err := openLogStore(dir, newHarness(t).log)
	if err != nil {
		t.Fatalf("open log store: %v", err)
	}
	return s
}

func TestMigrateBolt(t *testing.T) {
	for _, voted := range []bool{true, false} {
		t.Run(map[bool]string{true: "voted", false: "never voted"}[voted], func(t *testing.T) {
			dir := t.TempDir()
			want := seedBolt(t, dir, voted)
			// A copy a killed process left half done is started again.
			if err := os.MkdirAll(filepath.Join(dir, walMigrating), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, walMigrating, "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := openStoreT(t, dir)
			checkStore(t, s, want, voted)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			names := dirNames(t, dir)
			if slices.Contains(names, boltFile) || slices.Contains(names, walMigrating) || !slices.Contains(names, walDir) {
				t.Fatalf("data dir after migration holds %v", names)
			}
			// Opening again reads the WAL; nothing is migrated twice.
			s = openStoreT(t, dir)
			checkStore(t, s, want, voted)
			_ = s.Close()
		})
	}
}

// Killed after the WAL was complete but before raft.db was removed: the WAL
// stands and the stale database goes.
func TestMigrateBoltFinishesRemoval(t *testing.T) {
	dir := t.TempDir()
	want := seedBolt(t, dir, true)
	s := openStoreT(t, dir)
	_ = s.Close()
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLog(&raft.Log{Index: 1, Term: 1, Data: []byte("stale")}); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	s = openStoreT(t, dir)
	defer s.Close()
	checkStore(t, s, want, true)
	if slices.Contains(dirNames(t, dir), boltFile) {
		t.Fatal("stale raft.db left after open")
	}
}

// A raft.db that is not a database is an error naming it, and nothing is
// removed or half-written.
func TestMigrateBoltCorrupt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, boltFile), bytes.Repeat([]byte("not bolt"), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openLogStore(dir, newHarness(t).log)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, boltFile)) {
		t.Fatalf("open with a corrupt raft.db = %v, want an error naming it", err)
	}
	if names := dirNames(t, dir); !slices.Contains(names, boltFile) || slices.Contains(names, walDir) {
		t.Fatalf("data dir after a failed migration holds %v", names)
	}
}

// A second process on the same data directory is refused at once, and the lock
// goes with the store.
func TestLogStoreLocked(t *testing.T) {
	dir := t.TempDir()
	s := openStoreT(t, dir)
	if _, err := openLogStore(dir, newHarness(t).log); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("second open = %v, want a locked error", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStoreT(t, dir)
	_ = s.Close()
}

// Linking raft-wal leaves the standard logger as Go sets it up.
func TestStandardLoggerKept(t *testing.T) {
	if stdlog.Writer() != os.Stderr || stdlog.Flags() != stdlog.LstdFlags || stdlog.Prefix() != "" {
		t.Fatalf("standard logger: writer %T, flags %d, prefix %q; want os.Stderr, LstdFlags, none", stdlog.Writer(), stdlog.Flags(), stdlog.Prefix())
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
