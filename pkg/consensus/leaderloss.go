package consensus

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Leader loss on a closed connection.
//
// Raft alone notices a dead leader only when a follower's heartbeat timer, re-armed
// at a random 1–2× HeartbeatTimeout, finds no contact for a whole HeartbeatTimeout:
// 1–2.5× the timeout after the crash. Worse, with pre-vote the first follower to
// campaign is refused by the other one, which still names the old leader, and
// waits out an ElectionTimeout while the second campaigns in turn (measured: 1.2 s
// median on the "fast" profile, twice etcd's).
//
// A leader whose process died (crash, OOM, kill -9, a restart) has its connections
// closed by its kernel, and followers see that at once. On that signal a follower
// runs raft's own heartbeat check early — but only once it has had no contact from
// that leader for LeaderLeaseTimeout, the time after which a leader cut off from
// its quorum steps down by itself, so a live leader whose connection merely closed
// (it heartbeats every HeartbeatTimeout/10) is never deposed. The survivors run the
// check in a fixed order, witnesses first, leadAfterStep apart: by the time the last
// one campaigns the others have let go of the old leader and vote for it, so one
// election decides and a controller, not the witness, wins it. A leader lost to a
// power cut or a partition closes nothing; raft's timers handle that as before.

// leadAfterStep is the gap between two survivors' checks, as a fraction of
// HeartbeatTimeout: far above a vote's round trip.
const leadAfterStep = 5 // HeartbeatTimeout/5

// peerGone is called by the stream layer when a connection from peer ended
// without this node closing it. It must not block.
func (n *Node) peerGone(peer string) {
	select {
	case n.goneCh <- raft.ServerID(peer):
	default: // one pending signal is enough
	}
}

// leaderLossLoop turns "the leader's connection closed" into an early heartbeat
// check. Stopped by Close.
func (n *Node) leaderLossLoop() {
	defer n.wg.Done()
	lease, hb := n.rcfg.LeaderLeaseTimeout, n.rcfg.HeartbeatTimeout
	if lease >= hb {
		return // the check would be no earlier than raft's own
	}
	var (
		timer   *time.Timer
		timerC  <-chan time.Time
		leader  raft.ServerID
		rank    int
		contact time.Time
		since   time.Time // when this episode's first connection closed
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	arm := func() {
		at := contact.Add(lease + time.Duration(rank)*(hb/leadAfterStep))
		timer = time.NewTimer(time.Until(at))
		timerC = timer.C
	}
	for {
		select {
		case <-n.ctx.Done():
			return
		case peer := <-n.goneCh:
			if timerC != nil {
				continue
			}
			_, id := n.raft.LeaderWithID()
			if n.raft.State() != raft.Follower || id == "" || id != peer {
				continue
			}
			r, ok := n.campaignRank(id)
			if !ok {
				continue
			}
			leader, rank, contact, since = id, r, n.raft.LastContact(), time.Now()
			arm()
			n.log.Debug("consensus: leader's connection closed", "leader", string(id), "rank", rank)
		case <-timerC:
			timerC = nil
			_, id := n.raft.LeaderWithID()
			if n.raft.State() != raft.Follower || id != leader {
				continue
			}
			// A leader shutting down may heartbeat once more after its first
			// connection closed: look again from that contact, for as long as raft's
			// own check would not come sooner.
			if last := n.raft.LastContact(); last.After(contact) {
				if time.Since(since) < hb {
					contact = last
					arm()
				}
				continue
			}
			n.checkLeaderNow(leader, contact)
		}
	}
}

// campaignRank is this node's place among the voters that survive leader: the
// witnesses first, then by ID. ok is false if this node is no voter.
func (n *Node) campaignRank(leader raft.ServerID) (int, bool) {
	c, err := n.configuration()
	if err != nil {
		return 0, false
	}
	var ids []raft.ServerID
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter && s.ID != leader {
			ids = append(ids, s.ID)
		}
	}
	witness := func(id raft.ServerID) bool {
		if string(id) == n.cfg.NodeID {
			return n.cfg.Witness
		}
		return n.cfg.IsWitness != nil && n.cfg.IsWitness(id)
	}
	slices.SortFunc(ids, func(a, b raft.ServerID) int {
		if wa, wb := witness(a), witness(b); wa != wb {
			if wa {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a), string(b))
	})
	i := slices.Index(ids, raft.ServerID(n.cfg.NodeID))
	return i, i >= 0
}

// checkLeaderNow runs raft's heartbeat check at once with HeartbeatTimeout
// lowered to LeaderLeaseTimeout. The caller has just seen this node still a
// follower of leader that heard nothing from it since contact. Raft reruns the check when the timeout
// is lowered; the timeout is restored once the node has left the follower state
// or a lease has passed.
func (n *Node) checkLeaderNow(leader raft.ServerID, contact time.Time) {
	orig := n.raft.ReloadableConfig()
	orig.HeartbeatTimeout = n.rcfg.HeartbeatTimeout
	quick := orig
	quick.HeartbeatTimeout = n.rcfg.LeaderLeaseTimeout
	silent := time.Since(contact).Round(time.Millisecond)
	if err := n.raft.ReloadConfig(quick); err != nil {
		n.log.Warn("consensus: early leader check", "error", err)
		return
	}
	n.log.Info("consensus: leader's connection closed and no contact since; checking the leader now", "leader", string(leader), "silent_for", silent)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(n.rcfg.LeaderLeaseTimeout)
	for n.raft.State() == raft.Follower && time.Now().Before(deadline) {
		select {
		case <-n.ctx.Done():
			deadline = time.Time{}
		case <-t.C:
		}
	}
	if err := n.raft.ReloadConfig(orig); err != nil {
		n.log.Warn("consensus: restore heartbeat timeout", "error", err)
	}
}
