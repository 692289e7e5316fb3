package consensus

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// RecoverSingle is operator-fenced recovery, like Consul's peers.json: with
// raft NOT running on cfg.DataDir, it rewrites the stored configuration so
// that cfg.NodeID at cfg.AdvertiseAddr (or BindAddr) is the only voter. On
// the next Open the node elects itself and accepts writes alone.
//
// Only run it when every other voter (the other controller, and the witness
// if any) is known dead or fenced: if one is still running, the cluster
// splits and committed data can diverge. It is meant for the case where the
// survivor has lost quorum (e.g. two voters, one gone for good).
//
// It replays the whole local log into cfg.FSM (raft.RecoverCluster), so
// entries this node had received but not seen committed become committed;
// discard that FSM and pass a fresh one (or one whose Restore replaces all
// state) to Open. Other servers rejoin afterwards via AddVoter from a clean
// DataDir.
func RecoverSingle(cfg Config) error {
	if cfg.NodeID == "" || cfg.DataDir == "" || cfg.FSM == nil {
		return errors.New("consensus: recover: NodeID, DataDir and FSM are required")
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = cfg.BindAddr
	}
	if err := checkAdvertisable(addr); err != nil {
		return fmt.Errorf("consensus: recover: %w", err)
	}
	rc, err := cfg.raftConfig()
	if err != nil {
		return err
	}
	log := cfg.logger().With("component", "consensus", "node", cfg.NodeID)
	store, snaps, err := openStores(cfg.DataDir, log)
	if err != nil {
		return fmt.Errorf("consensus: recover: %w", err)
	}
	storeOpen := true
	defer func() {
		if storeOpen {
			_ = store.Close()
		}
	}()
	// The transport is only used to encode the peer address in the snapshot.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(addr))
	defer trans.Close()

	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter,
		ID:       raft.ServerID(cfg.NodeID),
		Address:  raft.ServerAddress(addr),
	}}}
	log.Warn("consensus: recovering as the only voter", "addr", addr)
	if err := raft.RecoverCluster(rc, cfg.FSM, store, store, snaps, trans, conf); err != nil {
		return fmt.Errorf("consensus: recover: %w", err)
	}
	storeOpen = false
	if err := store.Close(); err != nil {
		return fmt.Errorf("consensus: recover: close store: %w", err)
	}
	log.Warn("consensus: recovered; this node is now the only voter")
	return nil
}
