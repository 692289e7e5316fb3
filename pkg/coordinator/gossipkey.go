package coordinator

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/plinth-dev/plinth/pkg/membership"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/state"
)

// Gossip key rotation. Deleting an enrolled host makes one due (state.GossipRekey):
// the host knows the primary key, so the leader replaces it in three phases, each
// written at once (state.SetGossipKeys) and held for gossipKeyDwell so every member
// follows before the next:
//
//	install:  primary old, next new      (everyone accepts new)
//	promote:  primary new, previous old  (everyone sends with new)
//	finish:   primary new                (old refused: the deleted host is cut off)
//
// Coordinators follow the state within a second; agents when they refresh their
// config (every five minutes, or at once when gossip leaves them alone). A deletion
// during a rotation starts it over with a fresh key.

// gossipKeyDwell is how long each phase stays before the next.
func (d *daemon) gossipKeyDwell() time.Duration {
	if d.cfg.Profile == "fast" {
		return 5 * time.Second
	}
	return 6 * time.Minute
}

// rotation is the leader's memory of when it first saw the current phase; a new
// leader waits a full dwell again, which is always safe.
type rotation struct {
	phase string
	since time.Time
}

func (d *daemon) rotateGossipKey(ctx context.Context, rot *rotation) error {
	var primary, next, prev state.SecretRecord
	var hasPrimary, hasNext, hasPrev bool
	var due uint64
	d.store.Read(func(v state.View) {
		primary, hasPrimary = v.Secret(state.GossipKeySecret)
		next, hasNext = v.Secret(state.GossipNextKeySecret)
		prev, hasPrev = v.Secret(state.GossipPrevKeySecret)
		due = v.GossipRekey()
	})
	if !hasPrimary {
		return nil // ensureGossipKey makes the first one
	}
	if due > primary.Index && !(hasNext && next.Index > due) {
		key := make([]byte, membership.KeySize)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		sealed, err := pki.Seal(d.dataKey, key, []byte(state.GossipNextKeySecret))
		if err != nil {
			return err
		}
		d.log.Info("gossip key rotation: installing a new key", "dueAt", due)
		return d.propose(ctx, state.CmdSetGossipKeys, state.SetGossipKeys{Primary: &primary,
			Next: &state.SecretRecord{Name: state.GossipNextKeySecret, Ciphertext: sealed}})
	}
	var phase string
	switch {
	case hasNext:
		phase = fmt.Sprintf("promote@%d", next.Index)
	case hasPrev:
		phase = fmt.Sprintf("finish@%d", prev.Index)
	default:
		return nil
	}
	if rot.phase != phase {
		rot.phase, rot.since = phase, time.Now()
	}
	if time.Since(rot.since) < d.gossipKeyDwell() {
		return nil
	}
	if hasPrev && !hasNext {
		d.log.Info("gossip key rotation: dropping the old key")
		return d.propose(ctx, state.CmdSetGossipKeys, state.SetGossipKeys{Primary: &primary})
	}
	newPrimary, err := d.reseal(next, state.GossipKeySecret)
	if err != nil {
		return err
	}
	oldPrimary, err := d.reseal(primary, state.GossipPrevKeySecret)
	if err != nil {
		return err
	}
	d.log.Info("gossip key rotation: the new key becomes primary")
	return d.propose(ctx, state.CmdSetGossipKeys, state.SetGossipKeys{Primary: &newPrimary, Previous: &oldPrimary})
}

// reseal moves a sealed secret's value to another name (the name is bound into the
// ciphertext as associated data).
func (d *daemon) reseal(rec state.SecretRecord, name string) (state.SecretRecord, error) {
	plain, err := pki.Open(d.dataKey, rec.Ciphertext, []byte(rec.Name))
	if err != nil {
		return state.SecretRecord{}, fmt.Errorf("open %s: %w", rec.Name, err)
	}
	sealed, err := pki.Seal(d.dataKey, plain, []byte(name))
	if err != nil {
		return state.SecretRecord{}, err
	}
	return state.SecretRecord{Name: name, Ciphertext: sealed}, nil
}
