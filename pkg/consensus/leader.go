package consensus

import (
	"context"

	"github.com/hashicorp/raft"
)

// LeaderCh returns a channel that first receives this node's current
// leadership and then every change (true = became leader). It is buffered:
// a slow reader misses intermediate values, never the latest. It is closed
// when the node closes. Each call subscribes anew; prefer WatchLeadership
// for consumers that stop before the node does.
func (n *Node) LeaderCh() <-chan bool {
	return n.WatchLeadership(context.Background())
}

// WatchLeadership is LeaderCh whose channel is also closed when ctx ends.
func (n *Node) WatchLeadership(ctx context.Context) <-chan bool {
	ch := make(chan bool, 1)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		close(ch)
		return ch
	}
	n.subs[ch] = struct{}{}
	ch <- n.raft.State() == raft.Leader
	n.mu.Unlock()
	context.AfterFunc(ctx, func() { n.unsubscribe(ch) })
	return ch
}

func (n *Node) unsubscribe(ch chan bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.subs[ch]; ok {
		delete(n.subs, ch)
		close(ch)
	}
}

// publish offers v to every subscriber, replacing an unread value.
func (n *Node) publish(v bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- v:
		default:
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- v:
			default:
			}
		}
	}
}

// eventLoop fans raft's leadership signal out to subscribers and tracks peer
// health from raft observations. Stopped by Close.
func (n *Node) eventLoop() {
	defer n.wg.Done()
	defer func() {
		n.mu.Lock()
		for ch := range n.subs {
			close(ch)
		}
		n.subs = nil
		n.mu.Unlock()
	}()
	leaderCh := n.raft.LeaderCh()
	for {
		select {
		case <-n.ctx.Done():
			return
		case v := <-leaderCh:
			n.log.Info("consensus: leadership changed", "leader", v)
			n.publish(v)
		case o := <-n.obsCh:
			n.observe(o)
		}
	}
}

// observe records one raft observation.
func (n *Node) observe(o raft.Observation) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.LeaderObservation:
		if string(d.LeaderID) == n.cfg.NodeID {
			n.health.becameLeader()
		} else {
			n.health.reset()
		}
		if d.LeaderID != "" {
			n.log.Info("consensus: leader observed", "leader_id", string(d.LeaderID), "leader_addr", string(d.LeaderAddr))
		}
	case raft.FailedHeartbeatObservation:
		n.health.failed(d.PeerID)
	case raft.ResumedHeartbeatObservation:
		n.health.resumed(d.PeerID)
		n.log.Info("consensus: peer heartbeats resumed", "peer", string(d.PeerID))
	case raft.PeerObservation:
		if d.Removed {
			n.health.forget(d.Peer.ID)
		}
	}
}
