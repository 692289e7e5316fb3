package agent

import (
	"context"
	"slices"
	"time"

	"github.com/plinth-dev/plinth/pkg/membership"
	"github.com/plinth-dev/plinth/pkg/server"
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

// configLoop refreshes the coordinator addresses, gossip seeds and gossip key from
// GET /v1/agent/config, and records them for the next start.
func (a *agent) configLoop(ctx context.Context) error {
	for {
		next := configRefresh
		if err := a.refreshConfig(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("agent config not refreshed", "err", err)
			next = 10 * time.Second
		}
		if !sleep(ctx, next) {
			return nil
		}
	}
}

func (a *agent) refreshConfig(ctx context.Context) error {
	var cfg server.AgentConfig
	if _, err := a.do(ctx, "GET", "/v1/agent/config", nil, &cfg); err != nil {
		return err
	}
	if len(cfg.GossipKey) > 0 {
		a.mu.Lock()
		known := a.key != nil
		a.mu.Unlock()
		if !known {
			if err := saveGossipKey(a.cfg.StateDir, cfg.GossipKey); err != nil {
				return err
			}
			a.setGossipKey(cfg.GossipKey)
			a.log.Info("learnt the gossip key")
		}
	}
	a.mu.Lock()
	changed := len(cfg.Coordinators) > 0 && !slices.Equal(cfg.Coordinators, a.addrs) ||
		len(cfg.GossipSeeds) > 0 && !slices.Equal(cfg.GossipSeeds, a.seeds)
	if len(cfg.Coordinators) > 0 {
		a.addrs = slices.Clone(cfg.Coordinators)
		a.cl.SetAddrs(cfg.Coordinators)
	}
	if len(cfg.GossipSeeds) > 0 {
		a.seeds = slices.Clone(cfg.GossipSeeds)
	}
	id := Identity{Name: a.name, Coordinators: slices.Clone(a.addrs), GossipSeeds: slices.Clone(a.seeds)}
	a.mu.Unlock()
	if !changed {
		return nil
	}
	a.log.Info("coordinators changed", "coordinators", id.Coordinators, "gossipSeeds", id.GossipSeeds)
	return id.save(a.cfg.StateDir)
}
