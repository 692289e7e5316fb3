package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Node is one Raft voter: stores, TLS transport and the raft instance.
type Node struct {
	cfg   Config
	log   *slog.Logger
	rcfg  *raft.Config
	raft  *raft.Raft
	trans *raft.NetworkTransport
	layer *streamLayer
	store *logStore
	snaps *raft.FileSnapshotStore

	obsCh    chan raft.Observation
	observer *raft.Observer
	goneCh   chan raft.ServerID // peers whose connection closed (leaderloss.go)

	ctx       context.Context // canceled by Close; stops the Node's goroutines
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	closed bool
	subs   map[chan bool]struct{}
	health leaderHealth
}

// Member is one server of the current configuration.
type Member struct {
	ID       string
	Addr     string
	Suffrage string // "voter" or "nonvoter"
	Leader   bool
}

// Open opens the stores and the TLS transport and starts raft. It does not
// bootstrap: call Bootstrap on the first server of a new cluster, or AddVoter
// on the leader to join others. ctx bounds the opening only.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rc, err := cfg.raftConfig()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("consensus: open: %w", err)
	}
	log := cfg.logger().With("component", "consensus", "node", cfg.NodeID)

	store, snaps, err := openStores(cfg.DataDir, log)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: log, rcfg: rc, goneCh: make(chan raft.ServerID, 1)}
	layer, err := newStreamLayer(cfg.BindAddr, cfg.AdvertiseAddr, cfg.TLS, cfg.VerifyPeer, n.peerGone, log)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  newHCLog(log, "raft-net"),
	})
	cleanup := func() {
		_ = trans.Close()
		_ = layer.Close()
		_ = store.Close()
	}
	if err := ctx.Err(); err != nil {
		cleanup()
		return nil, fmt.Errorf("consensus: open: %w", err)
	}
	// The cache serves the entries being replicated from memory: without it every
	// AppendEntries read them back from disk and decoded them again.
	logs, err := raft.NewLogCache(logCacheEntries, store)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("consensus: log cache: %w", err)
	}
	r, err := raft.NewRaft(rc, cfg.FSM, logs, store, snaps, trans)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("consensus: start raft: %w", err)
	}

	n.raft, n.trans, n.layer, n.store, n.snaps = r, trans, layer, store, snaps
	n.obsCh = make(chan raft.Observation, 64)
	n.subs = make(map[chan bool]struct{})
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.health.reset()
	n.observer = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.FailedHeartbeatObservation,
			raft.ResumedHeartbeatObservation, raft.PeerObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(n.observer)

	n.wg.Add(3)
	go n.eventLoop()
	go n.witnessLoop()
	go n.leaderLossLoop()
	log.Info("consensus: raft started", "addr", string(trans.LocalAddr()), "data_dir", cfg.DataDir, "witness", cfg.Witness)
	return n, nil
}

// openStores opens the raft log and stable store (logstore.go), which locks
// DataDir, and the snapshot store. Once DataDir is ours, snapshots a killed
// process left unfinished are removed (see removeUnfinishedSnapshots).
func openStores(dir string, log *slog.Logger) (*logStore, *raft.FileSnapshotStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("consensus: create data dir: %w", err)
	}
	store, err := openLogStore(dir, log)
	if err != nil {
		return nil, nil, err
	}
	if err := removeUnfinishedSnapshots(filepath.Join(dir, snapshotsDir), log); err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, newHCLog(log, "raft-snapshot"))
	if err != nil {
		_ = store.Close()
		return nil, nil, fmt.Errorf("consensus: open snapshot store: %w", err)
	}
	return store, snaps, nil
}

// removeUnfinishedSnapshots deletes the temporary directories of snapshots whose
// save never finished (the process died before the rename that completes one). Raft
// never loads them, but never removes them either: each kill during a save would
// otherwise leave a whole state's copy on disk for good. Only call it while holding
// the data directory's lock, so no live save is removed.
func removeUnfinishedSnapshots(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consensus: read %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), snapshotTmpSuffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("consensus: remove unfinished snapshot %s: %w", p, err)
		}
		log.Warn("consensus: removed a snapshot whose save never finished", "path", p)
	}
	return nil
}

// ID returns this node's raft server ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// Addr returns the address peers use to reach this node.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// Bootstrap makes this node the single voter of a new cluster. It is a no-op
// when the node already has state.
func (n *Node) Bootstrap() error {
	if n.isClosed() {
		return ErrClosed
	}
	f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter,
		ID:       raft.ServerID(n.cfg.NodeID),
		Address:  n.trans.LocalAddr(),
	}}})
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return n.wrapErr("bootstrap", err)
	}
	return nil
}

// HasState reports whether the stores hold any raft state.
func (n *Node) HasState() (bool, error) {
	if n.isClosed() {
		return false, ErrClosed
	}
	ok, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return false, fmt.Errorf("consensus: check state: %w", err)
	}
	return ok, nil
}

// Apply replicates cmd and applies it to the FSM. Leader only: elsewhere it
// returns a *NotLeaderError. ctx's deadline is raft's enqueue timeout and ctx
// bounds the wait; when ctx ends first the outcome is unknown. If the FSM
// returns an error it is returned as err, unwrapped, with the entry's index
// (the entry is committed).
func (n *Node) Apply(ctx context.Context, cmd []byte) (any, uint64, error) {
	timeout, err := timeoutOf(ctx, "apply")
	if err != nil {
		return nil, 0, err
	}
	if n.isClosed() {
		return nil, 0, ErrClosed
	}
	f := n.raft.Apply(cmd, timeout)
	if err := n.await(ctx, "apply", f); err != nil {
		return nil, 0, err
	}
	resp := f.Response()
	if ferr, ok := resp.(error); ok {
		return nil, f.Index(), ferr
	}
	return resp, f.Index(), nil
}

// Barrier waits until all preceding entries are applied to the FSM on the
// leader, for reads that must be current.
func (n *Node) Barrier(ctx context.Context) error {
	timeout, err := timeoutOf(ctx, "barrier")
	if err != nil {
		return err
	}
	if n.isClosed() {
		return ErrClosed
	}
	return n.await(ctx, "barrier", n.raft.Barrier(timeout))
}

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the known leader's ID and address (empty if unknown).
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// State returns the raft state: "Follower", "Candidate", "Leader" or "Shutdown".
func (n *Node) State() string { return n.raft.State().String() }

// Stats returns raft's diagnostic stats.
func (n *Node) Stats() map[string]string {
	if n.isClosed() {
		return map[string]string{"state": raft.Shutdown.String()}
	}
	return n.raft.Stats()
}

// AppliedIndex returns the last index handed to the FSM.
func (n *Node) AppliedIndex() uint64 { return n.raft.AppliedIndex() }

// LastIndex returns the last index in the log or snapshot.
func (n *Node) LastIndex() uint64 { return n.raft.LastIndex() }

// CommitIndex returns the last committed index known to this node.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// configuration returns the latest configuration.
func (n *Node) configuration() (raft.Configuration, error) {
	if n.isClosed() {
		return raft.Configuration{}, ErrClosed
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, n.wrapErr("get configuration", err)
	}
	return f.Configuration(), nil
}

// Members returns the servers of the latest configuration, sorted by ID.
func (n *Node) Members() ([]Member, error) {
	c, err := n.configuration()
	if err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	out := make([]Member, 0, len(c.Servers))
	for _, s := range c.Servers {
		m := Member{ID: string(s.ID), Addr: string(s.Address), Suffrage: "nonvoter", Leader: s.ID == leaderID}
		if s.Suffrage == raft.Voter {
			m.Suffrage = "voter"
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// AddVoter adds (or promotes, or re-addresses) a voter. Leader only. It is a
// no-op if id is already a voter at addr.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" || addr == "" {
		return errors.New("consensus: add voter: id and addr are required")
	}
	if err := checkAdvertisable(addr); err != nil {
		return err
	}
	c, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range c.Servers {
		if string(s.ID) == id && string(s.Address) == addr && s.Suffrage == raft.Voter {
			return nil
		}
	}
	timeout, err := timeoutOf(ctx, "add voter")
	if err != nil {
		return err
	}
	n.log.Info("consensus: adding voter", "id", id, "addr", addr)
	return n.await(ctx, "add voter "+id, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout))
}

// RemoveServer removes a server from the configuration. Leader only. It is a
// no-op if id is not a member. A removed node shuts its raft down.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	c, err := n.configuration()
	if err != nil {
		return err
	}
	found := false
	for _, s := range c.Servers {
		if string(s.ID) == id {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	timeout, err := timeoutOf(ctx, "remove server")
	if err != nil {
		return err
	}
	n.log.Info("consensus: removing server", "id", id)
	return n.await(ctx, "remove server "+id, n.raft.RemoveServer(raft.ServerID(id), 0, timeout))
}

// TransferLeadership hands leadership to voter id (any voter if id is
// empty). Leader only. Raft first brings the target up to date and gives up
// after ElectionTimeout; writes are refused while a transfer is in progress.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if id == "" {
		if n.isClosed() {
			return ErrClosed
		}
		return n.await(ctx, "transfer leadership", n.raft.LeadershipTransfer())
	}
	c, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range c.Servers {
		if string(s.ID) != id {
			continue
		}
		if s.Suffrage != raft.Voter {
			return fmt.Errorf("consensus: transfer leadership: %s is not a voter", id)
		}
		if id == n.cfg.NodeID && n.IsLeader() {
			return nil
		}
		n.log.Info("consensus: transferring leadership", "to", id)
		return n.await(ctx, "transfer leadership to "+id, n.raft.LeadershipTransferToServer(s.ID, s.Address))
	}
	return fmt.Errorf("consensus: transfer leadership: %s is not a member", id)
}

// Snapshot takes a snapshot now. Having nothing new to snapshot is not an
// error.
func (n *Node) Snapshot(ctx context.Context) error {
	if n.isClosed() {
		return ErrClosed
	}
	err := n.await(ctx, "snapshot", n.raft.Snapshot())
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// Close shuts down raft, the transport and the stores. Idempotent. It does
// not leave the cluster: use RemoveServer for that.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		n.cancel()

		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("consensus: shutdown raft: %w", err))
		}
		n.raft.DeregisterObserver(n.observer)
		// Raft has answered every future, so waiters and loops can finish.
		n.wg.Wait()
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("consensus: close transport: %w", err))
		}
		if err := n.layer.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("consensus: close store: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.log.Info("consensus: closed")
	})
	return n.closeErr
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// goOwned starts f as a goroutine owned by n, unless n is closed.
func (n *Node) goOwned(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// await waits for f or ctx. Raft answers every future by shutdown at the
// latest, so the waiting goroutine always ends; Close waits for it.
func (n *Node) await(ctx context.Context, op string, f raft.Future) error {
	if ctx.Done() == nil {
		return n.wrapErr(op, f.Error())
	}
	done := make(chan error, 1)
	if !n.goOwned(func() { done <- f.Error() }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return n.wrapErr(op, err)
	case <-ctx.Done():
		return fmt.Errorf("consensus: %s: outcome unknown: %w", op, ctx.Err())
	}
}

// timeoutOf turns ctx's deadline into a raft timeout (0 = none).
func timeoutOf(ctx context.Context, op string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("consensus: %s: %w", op, err)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, fmt.Errorf("consensus: %s: %w", op, context.DeadlineExceeded)
	}
	return d, nil
}
