package consensus

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/plinth-dev/plinth/internal/poll"
)

// slowRaftTimers widens n's raft timers far beyond the test's waits, so that only
// the closed-connection path can explain an election within them.
func slowRaftTimers(t *testing.T, n *testNode) {
	t.Helper()
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = 20*time.Second, 20*time.Second
	if err := n.raft.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}
}

// A leader whose process ends closes its connections: the survivors elect a new
// leader in one round, long before raft's heartbeat timeout, and the controller
// (not the witness) wins it.
func TestLeaderCrashElectsAtOnce(t *testing.T) {
	h := newHarness(t)
	a, b, c := threeNodes(t, h, func(cfg *Config) {
		cfg.IsWitness = func(id raft.ServerID) bool { return id == "c" }
		cfg.Witness = cfg.NodeID == "c"
	})
	mustApply(t, a, "before")
	waitList(t, b, []string{"before"})
	waitList(t, c, []string{"before"})
	slowRaftTimers(t, b)
	slowRaftTimers(t, c)
	// Let the timers armed with the old timeout run out (they re-arm with the new).
	time.Sleep(2 * h.config("x").HeartbeatTimeout)

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var leader *testNode
	poll.True(t, 10*time.Second, "a new leader", func() bool {
		switch {
		case b.IsLeader():
			leader = b
		case c.IsLeader():
			leader = c
		}
		return leader != nil
	})
	if leader != b {
		t.Fatalf("leader = %s, want the controller b (c is the witness)", leader.ID())
	}
	mustApply(t, b, "after")
	waitList(t, c, []string{"before", "after"})
	if !strings.Contains(h.logs.String(), "checking the leader now") {
		t.Fatal("expected the early check to be logged")
	}
	// The early check restored raft's own timeout.
	if got := b.raft.ReloadableConfig().HeartbeatTimeout; got != b.rcfg.HeartbeatTimeout {
		t.Fatalf("b heartbeat timeout = %s after the check, want %s", got, b.rcfg.HeartbeatTimeout)
	}
}

// A live leader that closes a connection (here: every one it dialed) keeps
// heartbeating over new ones, so no follower deposes it.
func TestClosedConnectionKeepsLiveLeader(t *testing.T) {
	h := newHarness(t)
	a, b, c := threeNodes(t, h, nil)
	mustApply(t, a, "before")
	waitList(t, b, []string{"before"})
	waitList(t, c, []string{"before"})
	term := a.Stats()["term"]

	a.layer.mu.Lock()
	var dialed []*trackedConn
	for tc := range a.layer.conns {
		if tc.gone == nil {
			dialed = append(dialed, tc)
		}
	}
	a.layer.mu.Unlock()
	if len(dialed) == 0 {
		t.Fatal("leader has no dialed connections")
	}
	for _, tc := range dialed {
		_ = tc.Close()
	}
	poll.True(t, 5*time.Second, "followers to see the closed connection", func() bool {
		return strings.Contains(h.logs.String(), "consensus: leader's connection closed")
	})
	// Past every follower's last possible check, the leader still leads.
	cfg := h.config("x")
	time.Sleep(cfg.HeartbeatTimeout + cfg.LeaderLeaseTimeout + 2*cfg.HeartbeatTimeout/leadAfterStep + 200*time.Millisecond)
	if !a.IsLeader() || a.Stats()["term"] != term {
		t.Fatalf("leader a deposed: leader=%v term %s -> %s", a.IsLeader(), term, a.Stats()["term"])
	}
	if strings.Contains(h.logs.String(), "checking the leader now") {
		t.Fatal("a follower ran the early check against a live leader")
	}
	mustApply(t, a, "after")
	waitList(t, b, []string{"before", "after"})
}
