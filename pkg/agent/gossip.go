package agent

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/plinth-dev/plinth/pkg/membership"
)

func (a *agent) setGossipKey(key []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.key != nil {
		return // the first key starts the pool; rotations come through followKeys
	}
	a.key = slices.Clone(key)
	close(a.keyReady)
}

// followKeys applies a rotation the coordinators announced (keys: the primary
// first): the primary is saved for the next start and the running pool's keyring
// follows (see membership.SetKeys). Before gossip starts it only records them.
func (a *agent) followKeys(keys [][]byte) error {
	a.mu.Lock()
	same := slices.EqualFunc(keys, a.keys, bytes.Equal)
	a.mu.Unlock()
	if same || len(keys) == 0 {
		return nil
	}
	if err := saveGossipKey(a.cfg.StateDir, keys[0]); err != nil {
		return err
	}
	a.mu.Lock()
	a.keys = slices.Clone(keys)
	pool := a.pool
	a.mu.Unlock()
	a.log.Info("gossip keys changed", "keys", len(keys))
	return setKeys(pool, keys)
}

// gossipKeysChanged refetches the config when the step list says the gossip keys
// changed since the agent last learnt them: a rotation phase lasts only so long.
func (a *agent) gossipKeysChanged(ctx context.Context, version uint64) {
	a.mu.Lock()
	seen := a.keysVersion
	a.mu.Unlock()
	if version == 0 || version == seen {
		return
	}
	if err := a.refreshConfig(ctx); err != nil {
		a.log.Warn("gossip keys changed but the config was not refreshed", "err", err)
		return
	}
	a.mu.Lock()
	a.keysVersion = version
	a.mu.Unlock()
}

func setKeys(pool *membership.Pool, keys [][]byte) error {
	if pool == nil || len(keys) == 0 {
		return nil
	}
	return pool.SetKeys(keys[0], keys[1:]...)
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
	a.mu.Lock()
	a.pool = pool
	keys := a.keys // learnt while the pool started
	a.mu.Unlock()
	if err := setKeys(pool, keys); err != nil {
		a.log.Warn("gossip: keys not installed", "err", err)
	}
	defer func() {
		a.mu.Lock()
		a.pool = nil
		a.mu.Unlock()
	}()
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
				// Alone: perhaps the coordinators rotated the gossip key meanwhile.
				if err := a.refreshConfig(ctx); err != nil {
					a.log.Debug("gossip: config not refreshed", "err", err)
				}
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
