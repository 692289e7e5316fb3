package consensus

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/plinth-dev/plinth/internal/poll"
)

func TestSingleNodeBootstrapAndApply(t *testing.T) {
	h := newHarness(t)
	a := h.open(h.config("a"))

	has, err := a.HasState()
	if err != nil || has {
		t.Fatalf("HasState before bootstrap = %v, %v; want false, nil", has, err)
	}
	bootstrap(t, a)
	if err := a.Bootstrap(); err != nil {
		t.Fatalf("second bootstrap should be a no-op: %v", err)
	}
	if has, err := a.HasState(); err != nil || !has {
		t.Fatalf("HasState after bootstrap = %v, %v; want true, nil", has, err)
	}

	resp, idx, err := a.Apply(ctxT(t, 5*time.Second), []byte("one"))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if resp != 1 || idx == 0 {
		t.Fatalf("apply = %v, %d; want 1, >0", resp, idx)
	}
	// An FSM error comes back as err, with the committed index.
	_, fidx, err := a.Apply(ctxT(t, 5*time.Second), []byte("fail:nope"))
	if err == nil || !strings.Contains(err.Error(), "rejected: fail:nope") || fidx <= idx {
		t.Fatalf("fsm error apply = %d, %v", fidx, err)
	}
	if err := a.Barrier(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	if got := a.fsm.list(); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("fsm = %v", got)
	}

	members, err := a.Members()
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{{ID: "a", Addr: a.Addr(), Suffrage: "voter", Leader: true}}
	if !slices.Equal(members, want) {
		t.Fatalf("members = %+v, want %+v", members, want)
	}
	if id, addr := a.Leader(); id != "a" || addr != a.Addr() {
		t.Fatalf("leader = %s %s", id, addr)
	}
	m := a.Observe()
	if !m.IsLeader || m.State != "Leader" || m.LeaderID != "a" || m.Term == 0 || m.AppliedIndex < fidx || m.Voters != 1 {
		t.Fatalf("observe = %+v", m)
	}
	if a.State() != "Leader" || a.Stats()["state"] != "Leader" {
		t.Fatalf("state = %s / %s", a.State(), a.Stats()["state"])
	}

	// A deadline already passed is refused before reaching raft.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := a.Apply(ctx, []byte("late")); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply with canceled ctx = %v", err)
	}

	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, _, err := a.Apply(ctxT(t, time.Second), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("apply after close = %v", err)
	}
	if a.State() != "Shutdown" || a.Observe().State != "Shutdown" {
		t.Fatalf("state after close = %s", a.State())
	}
	if _, ok := <-a.LeaderCh(); ok {
		t.Fatal("LeaderCh after close should be closed")
	}
}

func TestConfigValidation(t *testing.T) {
	h := newHarness(t)
	good := h.config("a")
	good.FSM = &listFSM{}
	cases := map[string]func(*Config){
		"no id":        func(c *Config) { c.NodeID = "" },
		"no tls":       func(c *Config) { c.TLS = nil },
		"no client ca": func(c *Config) { c.TLS = c.TLS.Clone(); c.TLS.ClientCAs = nil },
		"weak auth":    func(c *Config) { c.TLS = c.TLS.Clone(); c.TLS.ClientAuth = 0 },
		"insecure":     func(c *Config) { c.TLS = c.TLS.Clone(); c.TLS.InsecureSkipVerify = true },
		"unspecified":  func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7000" },
		"bad lease":    func(c *Config) { c.LeaderLeaseTimeout = time.Hour },
	}
	for name, mut := range cases {
		c := good
		mut(&c)
		if n, err := Open(context.Background(), c); err == nil {
			_ = n.Close()
			t.Errorf("%s: Open succeeded", name)
		} else if !strings.HasPrefix(err.Error(), "consensus: ") {
			t.Errorf("%s: error not prefixed: %v", name, err)
		}
	}
}

// threeNodes forms a cluster of a (bootstrapped) plus two voters.
func threeNodes(t *testing.T, h *harness, mut func(*Config)) (a, b, c *testNode) {
	t.Helper()
	cfgs := []Config{h.config("a"), h.config("b"), h.config("c")}
	for i := range cfgs {
		if mut != nil {
			mut(&cfgs[i])
		}
	}
	a, b, c = h.open(cfgs[0]), h.open(cfgs[1]), h.open(cfgs[2])
	bootstrap(t, a)
	for _, n := range []*testNode{b, c} {
		if err := a.AddVoter(ctxT(t, 10*time.Second), n.ID(), n.Addr()); err != nil {
			t.Fatalf("add voter %s: %v", n.ID(), err)
		}
	}
	return a, b, c
}

func TestClusterFailoverAndCatchUp(t *testing.T) {
	h := newHarness(t)
	a, b, c := threeNodes(t, h, nil)

	// Re-adding an existing voter is a no-op.
	if err := a.AddVoter(ctxT(t, 5*time.Second), b.ID(), b.Addr()); err != nil {
		t.Fatalf("idempotent add voter: %v", err)
	}
	members, err := a.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 || !members[0].Leader || members[1].Suffrage != "voter" || members[2].Suffrage != "voter" {
		t.Fatalf("members = %+v", members)
	}

	var acked []string
	for i := range 5 {
		cmd := fmt.Sprintf("w%d", i)
		mustApply(t, a, cmd)
		acked = append(acked, cmd)
	}

	// A follower refuses writes and names the leader.
	waitList(t, b, acked)
	_, _, err = b.Apply(ctxT(t, 5*time.Second), []byte("on-follower"))
	var nle *NotLeaderError
	if !errors.As(err, &nle) {
		t.Fatalf("follower apply err = %v, want *NotLeaderError", err)
	}
	if nle.LeaderID != "a" || nle.LeaderAddr != a.Addr() || !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("NotLeaderError = %+v", nle)
	}
	if err := b.Barrier(ctxT(t, 5*time.Second)); !errors.As(err, &nle) {
		t.Fatalf("follower barrier err = %v", err)
	}

	// Leader dies: a new one is elected and takes writes.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, b, c)
	for i := 5; i < 10; i++ {
		cmd := fmt.Sprintf("w%d", i)
		mustApply(t, leader, cmd)
		acked = append(acked, cmd)
	}
	waitList(t, b, acked)
	waitList(t, c, acked)

	// The old leader restarts from its DataDir and catches up.
	a2 := h.reopen(a)
	waitList(t, a2, acked)
	mustApply(t, leader, "after-restart")
	acked = append(acked, "after-restart")
	for _, n := range []*testNode{a2, b, c} {
		waitList(t, n, acked)
	}
	if id, _ := a2.Leader(); id != leader.ID() {
		t.Fatalf("restarted node sees leader %q, want %q", id, leader.ID())
	}
}

func TestSnapshotAndRestore(t *testing.T) {
	h := newHarness(t)
	a := h.open(h.config("a"))
	bootstrap(t, a)
	var want []string
	for i := range 20 {
		cmd := fmt.Sprintf("s%d", i)
		mustApply(t, a, cmd)
		want = append(want, cmd)
	}
	if err := a.Snapshot(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	snaps, err := os.ReadDir(filepath.Join(a.cfg.DataDir, "snapshots"))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots dir: %v, %v", snaps, err)
	}
	if m := a.Observe(); m.LastSnapshotIndex == 0 {
		t.Fatalf("observe after snapshot: %+v", m)
	}
	for i := 20; i < 25; i++ {
		cmd := fmt.Sprintf("s%d", i)
		mustApply(t, a, cmd)
		want = append(want, cmd)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	a2 := h.reopen(a)
	if a2.fsm.restoreCount() != 1 {
		t.Fatalf("FSM restored %d times on open, want 1", a2.fsm.restoreCount())
	}
	if err := a2.Bootstrap(); err != nil {
		t.Fatalf("bootstrap with state should be a no-op: %v", err)
	}
	waitLeader(t, a2)
	waitList(t, a2, want)
}

// A process killed during a snapshot save leaves the snapshot's temporary directory:
// the next Open removes it, never loads it, and restores the last finished snapshot.
func TestUnfinishedSnapshotRemovedOnOpen(t *testing.T) {
	h := newHarness(t)
	a := h.open(h.config("a"))
	bootstrap(t, a)
	var want []string
	for i := range 10 {
		cmd := fmt.Sprintf("s%d", i)
		mustApply(t, a, cmd)
		want = append(want, cmd)
	}
	if err := a.Snapshot(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	mustApply(t, a, "after")
	want = append(want, "after")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// What a save killed half-way leaves: a newer snapshot's directory, torn state.
	torn := filepath.Join(a.cfg.DataDir, "snapshots", "9-999-1700000000000.tmp")
	if err := os.MkdirAll(torn, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"state.bin": `["s0","s1`, "meta.json": `{"ID":"9-999-1700000000000","Index":999,"Term":9}`} {
		if err := os.WriteFile(filepath.Join(torn, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	a2 := h.reopen(a)
	if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unfinished snapshot still there after open: %v", err)
	}
	if n := a2.fsm.restoreCount(); n != 1 {
		t.Fatalf("FSM restored %d times on open, want 1 (the finished snapshot)", n)
	}
	waitLeader(t, a2)
	waitList(t, a2, want)
}

func TestForeignCARejected(t *testing.T) {
	h := newHarness(t)
	a := h.open(h.config("a"))
	bootstrap(t, a)
	mustApply(t, a, "x")
	termBefore := a.Observe().Term

	// The rogue's certificate comes from another CA; it even trusts ours.
	other := newCA(t, "other-ca")
	trust := other.pool.Clone()
	trust.AddCert(h.ca.cert)
	rcfg := h.config("rogue")
	rcfg.TLS = tlsConfig(other.issue(t, "rogue"), trust)
	rogue := h.open(rcfg)
	bootstrap(t, rogue)

	// The rogue tries to pull a into its cluster. (Raft commits a single
	// voter's first AddVoter on its own, so the rogue may believe it.)
	_ = rogue.AddVoter(ctxT(t, 2*time.Second), "a", a.Addr())
	poll.True(t, 5*time.Second, "a to refuse the rogue", func() bool {
		return strings.Contains(h.logs.String(), "node=a remote=")
	})
	// Transport level: the rogue's connection is refused by a...
	if c, err := rogue.layer.Dial(raft.ServerAddress(a.Addr()), 2*time.Second); err == nil {
		// TLS 1.3 clients finish before the server checks their cert;
		// the refusal shows on the first read.
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write([]byte{0})
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("rogue connection was accepted")
		}
		_ = c.Close()
	}
	// ...and a refuses the rogue's server certificate when dialing it.
	if c, err := a.layer.Dial(raft.ServerAddress(rogue.Addr()), 2*time.Second); err == nil {
		_ = c.Close()
		t.Fatal("a accepted the rogue's server certificate")
	}

	// The cluster did not admit it and was not disturbed.
	members, err := a.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].ID != "a" {
		t.Fatalf("members = %+v", members)
	}
	if !a.IsLeader() || a.Observe().Term != termBefore {
		t.Fatalf("a disturbed: leader=%v term %d -> %d", a.IsLeader(), termBefore, a.Observe().Term)
	}
	mustApply(t, a, "y")
}

func TestVerifyPeerRejectsRole(t *testing.T) {
	h := newHarness(t)
	requireCtl := func(c *x509.Certificate) error {
		if !strings.HasPrefix(c.Subject.CommonName, "ctl-") {
			return errors.New("not a coordinator")
		}
		return nil
	}
	acfg := h.config("ctl-a")
	acfg.VerifyPeer = requireCtl
	a := h.open(acfg)
	// Same CA, wrong role.
	x := h.open(h.config("intruder"))
	ok := h.open(h.config("ctl-b"))

	// Inbound: a drops the intruder after the handshake.
	c, err := x.layer.Dial(raft.ServerAddress(a.Addr()), 2*time.Second)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write([]byte{0})
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("intruder connection was accepted")
		}
		_ = c.Close()
	}
	// Outbound: a refuses to talk to the intruder.
	if c, err := a.layer.Dial(raft.ServerAddress(x.Addr()), 2*time.Second); err == nil || !strings.Contains(err.Error(), "not a coordinator") {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial intruder err = %v", err)
	}
	// A coordinator gets through both ways.
	c, err = a.layer.Dial(raft.ServerAddress(ok.Addr()), 2*time.Second)
	if err != nil {
		t.Fatalf("dial ctl-b: %v", err)
	}
	_ = c.Close()
	// And a real cluster forms between coordinators.
	bootstrap(t, a)
	if err := a.AddVoter(ctxT(t, 10*time.Second), ok.ID(), ok.Addr()); err != nil {
		t.Fatalf("add ctl-b: %v", err)
	}
	mustApply(t, a, "z")
	waitList(t, ok, []string{"z"})
}

func TestWitnessHandsOffLeadership(t *testing.T) {
	h := newHarness(t)
	isWitness := func(id raft.ServerID) bool { return id == "c" }
	a, b, c := threeNodes(t, h, func(cfg *Config) {
		cfg.IsWitness = isWitness
		cfg.Witness = cfg.NodeID == "c"
	})
	mustApply(t, a, "before")

	watch := c.WatchLeadership(ctxT(t, 30*time.Second))
	if v := <-watch; v {
		t.Fatal("witness should not lead yet")
	}
	if err := a.TransferLeadership(ctxT(t, 5*time.Second), "c"); err != nil {
		t.Fatalf("transfer to witness: %v", err)
	}
	// The witness became leader...
	waitChan(t, watch, true)
	// ...and hands leadership back to a non-witness within a few seconds.
	waitChan(t, watch, false)
	leader := waitLeader(t, a, b, c)
	if leader == c {
		t.Fatal("witness is still leader")
	}
	mustApply(t, leader, "after")
	for _, n := range []*testNode{a, b, c} {
		waitList(t, n, []string{"before", "after"})
	}
	if !strings.Contains(h.logs.String(), "witness handed off leadership") {
		t.Fatal("expected the hand-off to be logged")
	}
}

// waitChan waits up to 10s for want on ch.
func waitChan(t *testing.T, ch <-chan bool, want bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatal("leadership channel closed")
			}
			if v == want {
				return
			}
		case <-timeout:
			t.Fatalf("timed out waiting for leadership=%v", want)
		}
	}
}

func TestRecoverSingle(t *testing.T) {
	h := newHarness(t)
	a := h.open(h.config("a"))
	b := h.open(h.config("b"))
	bootstrap(t, a)
	if err := a.AddVoter(ctxT(t, 10*time.Second), b.ID(), b.Addr()); err != nil {
		t.Fatal(err)
	}
	want := []string{"r0", "r1", "r2"}
	for _, cmd := range want {
		mustApply(t, a, cmd)
	}
	waitList(t, b, want)

	// Recovery refuses to run while raft holds the stores.
	if err := RecoverSingle(Config{NodeID: "a", DataDir: a.cfg.DataDir, BindAddr: a.Addr(), FSM: &listFSM{}}); err == nil {
		t.Fatal("RecoverSingle succeeded on an open node")
	}

	// b dies for good: a alone cannot commit.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err := a.Apply(ctxT(t, 2*time.Second), []byte("lost-quorum"))
	if err == nil {
		t.Fatal("apply without quorum succeeded")
	}
	t.Logf("apply without quorum: %v", err)
	poll.True(t, 5*time.Second, "a to step down", func() bool { return !a.IsLeader() })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Operator fences b and recovers a as the only voter.
	rcfg := a.cfg
	rcfg.FSM = &listFSM{}
	rcfg.AdvertiseAddr = a.cfg.BindAddr
	if err := RecoverSingle(rcfg); err != nil {
		t.Fatalf("recover: %v", err)
	}
	a2 := h.reopen(a)
	waitLeader(t, a2)
	members, err := a2.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].ID != "a" || members[0].Addr != a2.Addr() || !members[0].Leader {
		t.Fatalf("members after recovery = %+v", members)
	}
	mustApply(t, a2, "after-recovery")
	poll.True(t, 5*time.Second, "earlier data intact", func() bool {
		got := a2.fsm.list()
		// The uncommitted "lost-quorum" entry may survive recovery: its
		// client was told the outcome is unknown.
		return len(got) >= 4 && slices.Equal(got[:3], want) && got[len(got)-1] == "after-recovery"
	})

	// Recovering an empty data dir is refused.
	empty := h.config("z")
	empty.FSM = &listFSM{}
	empty.AdvertiseAddr = "127.0.0.1:7999"
	if err := RecoverSingle(empty); err == nil {
		t.Fatal("RecoverSingle on an empty dir succeeded")
	}
}
