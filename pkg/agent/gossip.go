package agent

import (
	"context"
	"slices"
	"time"

	"github.com/plinth-dev/plinth/pkg/membership"
)

func (a *agent) setGossipKey(key []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.key != nil {
		return // a running pool keeps its key; a rotated key is used after restart
	}
	a.key = slices.Clone(key)
	close(a.keyReady)
}

func (a *agent) gossipSeeds() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seeds)
}

// gossipLoop joins the gossip pool as "agent:<host>" once the gossip key is known,
// and keeps trying the seeds while it is alone.
func (a *agent) gossipLoop(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.keyReady:
	}
	a.mu.Lock()
	key := a.key
	a.mu.Unlock()
	bo := newBackoff(time.Second, time.Minute)
	var pool *membership.Pool
	for pool == nil {
		p, err := membership.Start(ctx, membership.Config{
			Name: MemberName(a.name), Role: membership.RoleAgent, BindAddr: a.cfg.GossipAddr,
			Key: key, Seeds: a.gossipSeeds(), Logger: a.log, Profile: a.cfg.GossipProfile,
		})
		if err != nil {
			a.log.Error("gossip not started; retrying", "addr", a.cfg.GossipAddr, "err", err)
			if !bo.wait(ctx) {
				return nil
			}
			continue
		}
		pool = p
	}
	defer pool.Close()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	events := pool.Events()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Drained so the pool's queue does not grow; the leader acts on membership.
			a.log.Debug("gossip", "member", ev.Member.Name, "event", ev.Kind, "state", ev.Member.State)
		case <-tick.C:
			if alive(pool.Members()) < 2 {
				if seeds := a.gossipSeeds(); len(seeds) > 0 {
					if _, err := pool.Join(seeds); err != nil {
						a.log.Warn("gossip: no seed reachable", "err", err)
					}
				}
			}
		}
	}
}

func alive(ms []membership.Member) int {
	n := 0
	for _, m := range ms {
		if m.State == membership.StateAlive {
			n++
		}
	}
	return n
}
