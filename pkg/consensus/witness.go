package consensus

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

const (
	handoffInterval   = time.Second
	handoffBackoffMin = 2 * time.Second
	handoffBackoffMax = time.Minute
)

// peerState is what the leader knows about one follower's heartbeats.
type peerState struct {
	failing      bool
	lastFailure  time.Time
	backoff      time.Duration
	backoffUntil time.Time
}

// leaderHealth tracks follower heartbeats during this node's leadership.
// Guarded by Node.mu.
type leaderHealth struct {
	leaderSince time.Time // zero when not leader
	peers       map[raft.ServerID]*peerState
}

func (h *leaderHealth) reset() {
	h.leaderSince = time.Time{}
	h.peers = make(map[raft.ServerID]*peerState)
}

func (h *leaderHealth) becameLeader() {
	h.reset()
	h.leaderSince = time.Now()
}

func (h *leaderHealth) peer(id raft.ServerID) *peerState {
	p := h.peers[id]
	if p == nil {
		p = &peerState{}
		h.peers[id] = p
	}
	return p
}

func (h *leaderHealth) failed(id raft.ServerID) {
	p := h.peer(id)
	p.failing = true
	p.lastFailure = time.Now()
}

func (h *leaderHealth) resumed(id raft.ServerID) { h.peer(id).failing = false }

func (h *leaderHealth) forget(id raft.ServerID) { delete(h.peers, id) }

// healthy: we have led long enough for heartbeats to have failed, and the
// peer's have not failed recently, and it is not in hand-off backoff.
func (h *leaderHealth) healthy(id raft.ServerID, now time.Time, quiet time.Duration) bool {
	if h.leaderSince.IsZero() || now.Sub(h.leaderSince) < quiet {
		return false
	}
	p := h.peers[id]
	if p == nil {
		return true
	}
	return !p.failing && now.Sub(p.lastFailure) >= quiet && !now.Before(p.backoffUntil)
}

// transferFailed backs off hand-offs to id exponentially.
func (h *leaderHealth) transferFailed(id raft.ServerID, now time.Time) time.Duration {
	p := h.peer(id)
	p.backoff = min(max(2*p.backoff, handoffBackoffMin), handoffBackoffMax)
	p.backoffUntil = now.Add(p.backoff)
	return p.backoff
}

// witnessLoop runs on every node but acts only on a witness that leads.
// Stopped by Close.
func (n *Node) witnessLoop() {
	defer n.wg.Done()
	if !n.cfg.Witness {
		return
	}
	t := time.NewTicker(handoffInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.handOff()
		}
	}
}

// handOff transfers leadership from this witness to a healthy non-witness
// voter, if there is one. Raft's transfer itself brings the target up to
// date first and fails after ElectionTimeout if it cannot.
func (n *Node) handOff() {
	if n.raft.State() != raft.Leader {
		return
	}
	target, ok := n.handOffTarget()
	if !ok {
		return
	}
	n.log.Info("consensus: witness is leader, handing leadership to voter", "to", string(target.ID), "addr", string(target.Address))
	err := n.await(n.ctx, "witness hand-off", n.raft.LeadershipTransferToServer(target.ID, target.Address))
	if err == nil {
		n.log.Info("consensus: witness handed off leadership", "to", string(target.ID))
		return
	}
	if n.ctx.Err() != nil {
		return
	}
	n.mu.Lock()
	wait := n.health.transferFailed(target.ID, time.Now())
	n.mu.Unlock()
	n.log.Warn("consensus: witness hand-off failed", "to", string(target.ID), "error", err, "retry_in", wait)
}

// handOffTarget picks the first healthy non-witness voter by ID.
func (n *Node) handOffTarget() (raft.Server, bool) {
	c, err := n.configuration()
	if err != nil {
		return raft.Server{}, false
	}
	var cands []raft.Server
	for _, s := range c.Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == n.cfg.NodeID {
			continue
		}
		if n.cfg.IsWitness != nil && n.cfg.IsWitness(s.ID) {
			continue
		}
		cands = append(cands, s)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].ID < cands[j].ID })
	quiet := 2 * n.rcfg.HeartbeatTimeout
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range cands {
		if n.health.healthy(s.ID, now, quiet) {
			return s, true
		}
	}
	return raft.Server{}, false
}
