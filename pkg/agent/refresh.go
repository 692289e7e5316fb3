package agent

import (
	"context"
	"slices"
	"time"

	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/wire"
)

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
	var cfg wire.AgentConfig
	if _, err := a.do(ctx, "GET", wire.PathAgentConfig, nil, &cfg); err != nil {
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
		if err := a.followKeys(cfg.GossipKeys); err != nil {
			return err
		}
	}
	a.mu.Lock()
	newAddrs := len(cfg.Coordinators) > 0 && !slices.Equal(cfg.Coordinators, a.addrs)
	newSeeds := len(cfg.GossipSeeds) > 0 && !slices.Equal(cfg.GossipSeeds, a.seeds)
	if newAddrs {
		// Only on a change: SetAddrs also forgets which coordinator answered last.
		a.addrs = slices.Clone(cfg.Coordinators)
		a.cl.SetAddrs(cfg.Coordinators)
	}
	if newSeeds {
		a.seeds = slices.Clone(cfg.GossipSeeds)
	}
	id := agentid.Identity{Name: a.name, Coordinators: slices.Clone(a.addrs), GossipSeeds: slices.Clone(a.seeds)}
	a.mu.Unlock()
	if !newAddrs && !newSeeds {
		return nil
	}
	a.log.Info("coordinators changed", "coordinators", id.Coordinators, "gossipSeeds", id.GossipSeeds)
	return id.Save(a.cfg.StateDir)
}
