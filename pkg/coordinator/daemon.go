package coordinator

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/consensus"
	"github.com/plinth-dev/plinth/pkg/membership"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/server"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// RunOptions are process-level hooks for Run.
type RunOptions struct {
	Logger *slog.Logger
	// Notify is told "READY=1" once Raft has a leader and the API listens, and
	// "WATCHDOG=1" periodically while healthy (systemd sd_notify).
	Notify func(state string)
	// WatchdogInterval is how often to send WATCHDOG=1 (0 = never).
	WatchdogInterval time.Duration
}

// Run is the coordinator daemon: it returns when ctx ends or a component fails.
func Run(ctx context.Context, dataDir string, o RunOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	notify := o.Notify
	if notify == nil {
		notify = func(string) {}
	}
	cfg, err := LoadConfig(dataDir)
	if err != nil {
		return err
	}
	log = log.With("coordinator", cfg.Name)
	p := Paths(dataDir)
	ca, err := pki.LoadCA(p.PKI())
	if err != nil {
		return err
	}
	bundle, err := pki.LoadBundle(p.PKI(), bundleName)
	if err != nil {
		return err
	}
	dataKey, err := pki.LoadDataKey(p.DataKey())
	if err != nil {
		return err
	}
	fences, err := loadFences(dataDir)
	if err != nil {
		return err
	}
	own, err := pki.ParseCert(bundle.CertPEM)
	if err != nil {
		return fmt.Errorf("coordinator: own certificate: %w", err)
	}
	peers := &peerCerts{}
	store := state.New(log)
	raftTLS, err := bundle.ServerTLS(pki.RequireRole(pki.RoleCoordinator))
	if err != nil {
		return err
	}
	raftTLS.RootCAs = raftTLS.ClientCAs
	ccfg := consensus.Config{
		NodeID: cfg.Name, BindAddr: cfg.RaftAddr, DataDir: p.Raft(), TLS: raftTLS, FSM: store, Logger: log,
		VerifyPeer: func(c *x509.Certificate) error {
			id, err := pki.IdentityOf(c)
			if err != nil {
				return err
			}
			if id.Role != pki.RoleCoordinator {
				return fmt.Errorf("raft peer %q has role %s, not coordinator", id.Name, id.Role)
			}
			peers.see(id.Name, c)
			if at, ok := fences[id.Name]; ok && c.NotBefore.Before(at) {
				return fmt.Errorf("raft peer %q was fenced by `recover --force-single` at %s; wipe it and join it again", id.Name, at.Format(time.RFC3339))
			}
			return nil
		},
		Witness:           cfg.Witness,
		SnapshotThreshold: cfg.RaftSnapshotThreshold,
		SnapshotInterval:  time.Duration(cfg.RaftSnapshotInterval),
		IsWitness: func(id raft.ServerID) bool {
			w := false
			store.Read(func(v state.View) {
				for _, c := range v.Coordinators() {
					if c.Name == string(id) {
						w = c.Witness
					}
				}
			})
			return w
		},
	}
	if cfg.Profile == "fast" {
		ccfg.HeartbeatTimeout, ccfg.ElectionTimeout, ccfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	}
	node, err := consensus.Open(ctx, ccfg)
	if err != nil {
		return err
	}
	defer node.Close()
	if cfg.Bootstrap {
		if err := node.Bootstrap(); err != nil {
			return err
		}
	}
	metrics := server.NewMetrics(store, node)
	ttl := time.Duration(cfg.AgentCertTTL)
	srv, err := server.New(server.Config{Name: cfg.Name, Store: store, Raft: node, CA: ca, Bundle: bundle, DataKey: dataKey, Logger: log, AgentCertTTL: ttl, Metrics: metrics})
	if err != nil {
		return err
	}
	apiLn, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("coordinator: api listen: %w", err)
	}
	joinLn, err := net.Listen("tcp", cfg.JoinAddr)
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("coordinator: join listen: %w", err)
	}
	d := &daemon{cfg: cfg, log: log, store: store, node: node, srv: srv, metrics: metrics, bundle: bundle, dataKey: dataKey, caCert: ca.Cert, ownCert: own, peers: peers, gossipWake: make(chan struct{}, 1)}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	run("api", func(ctx context.Context) error { return srv.ServeAPI(ctx, apiLn) })
	run("join", func(ctx context.Context) error { return srv.ServeJoin(ctx, joinLn) })
	run("admission", d.admission)
	run("leader", d.leaderLoop)
	run("gossip", d.gossipLoop)
	run("notify", func(ctx context.Context) error { return d.notifyLoop(ctx, notify, o.WatchdogInterval) })
	log.Info("coordinator started", "api", cfg.APIAddr, "join", cfg.JoinAddr, "raft", cfg.RaftAddr, "gossip", cfg.GossipAddr, "witness", cfg.Witness)
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("coordinator stopped on an error", "err", err)
		return err
	}
	log.Info("coordinator stopped")
	return nil
}

type daemon struct {
	cfg     Config
	log     *slog.Logger
	store   *state.Store
	node    *consensus.Node
	srv     *server.Server
	metrics *server.Metrics
	bundle  pki.Bundle
	dataKey []byte
	// caCert and ownCert are the site CA's and this coordinator's certificates,
	// peers the other coordinators' as Raft saw them (recordCertificates).
	caCert  *x509.Certificate
	ownCert *x509.Certificate
	peers   *peerCerts

	mu   sync.Mutex
	pool *membership.Pool
	// gossipWake says a member joined, died or left, so the leader updates the
	// hosts' Reachable at once instead of at its next tick.
	gossipWake chan struct{}
}

// admission asks existing coordinators to add this one as a voter, until it is a member.
func (d *daemon) admission(ctx context.Context) error {
	if d.cfg.Bootstrap {
		return nil
	}
	tc, err := d.bundle.ClientTLSVerify("", pki.RequireRole(pki.RoleCoordinator))
	if err != nil {
		return err
	}
	req := wire.RaftJoinRequest{Name: d.cfg.Name, RaftAddr: d.cfg.RaftAddr, APIAddr: d.cfg.APIAddr, GossipAddr: d.cfg.GossipAddr, Witness: d.cfg.Witness}
	delay := 200 * time.Millisecond
	for {
		if d.isMember() {
			return nil
		}
		for _, peer := range d.cfg.Peers {
			_, err := client.New([]string{peer}, tc).Do(ctx, "POST", wire.PathRaftJoin, req, nil)
			if err == nil {
				d.log.Info("admitted to the cluster", "via", peer)
				return nil
			}
			d.log.Debug("admission not yet granted", "peer", peer, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

func (d *daemon) isMember() bool {
	ms, err := d.node.Members()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.ID == d.cfg.Name {
			return true
		}
	}
	return false
}

// notifyLoop tells systemd when the coordinator is ready and keeps the watchdog fed.
func (d *daemon) notifyLoop(ctx context.Context, notify func(string), watchdog time.Duration) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ready := false
	var lastDog time.Time
	for {
		select {
		case <-ctx.Done():
			notify("STOPPING=1")
			return nil
		case <-tick.C:
		}
		if id, _ := d.node.Leader(); id != "" && !ready {
			ready = true
			notify("READY=1")
			d.log.Info("ready", "leader", id)
		}
		if watchdog > 0 && time.Since(lastDog) >= watchdog && d.node.State() != "Shutdown" {
			notify("WATCHDOG=1")
			lastDog = time.Now()
		}
	}
}

// leaderLoop runs the leader's duties while this coordinator leads.
func (d *daemon) leaderLoop(ctx context.Context) error {
	ch := d.node.WatchLeadership(ctx)
	stop := func() {}
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case leader, ok := <-ch:
			if !ok {
				return nil
			}
			stop()
			stop = func() {}
			if leader {
				stop = d.startLead(ctx)
			}
		}
	}
}

// startLead runs lead in a goroutine and returns a function that stops and waits for it.
func (d *daemon) startLead(ctx context.Context) func() {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.lead(lctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// lead records this coordinator, makes sure the gossip key exists, and turns
// membership into Reachable conditions, until ctx ends.
func (d *daemon) lead(ctx context.Context) {
	d.log.Info("became leader: taking on leader duties")
	apps := make(chan struct{})
	go func() {
		defer close(apps)
		d.runApps(ctx)
	}()
	defer func() { <-apps }()
	grace := time.Now().Add(15 * time.Second)
	rot := &rotation{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if err := d.ensureSelf(ctx); err != nil {
			d.log.Warn("leader: record self", "err", err)
		}
		if err := d.ensureGossipKey(ctx); err != nil {
			d.log.Warn("leader: gossip key", "err", err)
		}
		if err := d.ensureGeneratedSecrets(ctx); err != nil {
			d.log.Warn("leader: generated secrets", "err", err)
		}
		if err := d.rotateGossipKey(ctx, rot); err != nil {
			d.log.Warn("leader: gossip key rotation", "err", err)
		}
		if err := d.recordCertificates(ctx); err != nil {
			d.log.Warn("leader: record certificates", "err", err)
		}
		d.reconcileReachability(ctx, time.Now().After(grace))
		// Between ticks, a gossip change is acted on at once.
		for ticked := false; !ticked; {
			select {
			case <-ctx.Done():
				return
			case <-d.gossipWake:
				d.reconcileReachability(ctx, time.Now().After(grace))
			case <-tick.C:
				ticked = true
			}
		}
	}
}

func (d *daemon) ensureSelf(ctx context.Context) error {
	want := state.Coordinator{Name: d.cfg.Name, RaftAddr: d.cfg.RaftAddr, APIAddr: d.cfg.APIAddr, GossipAddr: d.cfg.GossipAddr, Witness: d.cfg.Witness}
	var have state.Coordinator
	d.store.Read(func(v state.View) {
		for _, c := range v.Coordinators() {
			if c.Name == want.Name {
				have = c
			}
		}
	})
	if have == want {
		return nil
	}
	return d.propose(ctx, state.CmdAddCoordinator, state.AddCoordinator{Coordinator: want})
}

func (d *daemon) ensureGossipKey(ctx context.Context) error {
	var ok bool
	d.store.Read(func(v state.View) { _, ok = v.Secret(state.GossipKeySecret) })
	if ok {
		return nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	sealed, err := pki.Seal(d.dataKey, key, []byte(state.GossipKeySecret))
	if err != nil {
		return err
	}
	return d.propose(ctx, state.CmdPutSecret, state.PutSecret{Secret: state.SecretRecord{Name: state.GossipKeySecret, Ciphertext: sealed}})
}

func (d *daemon) propose(ctx context.Context, typ string, body any) error {
	data, err := state.Encode(typ, time.Now(), body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _, err = d.node.Apply(ctx, data)
	return err
}

// AgentMemberName is the gossip name of a host's agent.
func AgentMemberName(host string) string { return "agent:" + host }

// reconcileReachability compares gossip with the recorded Reachable status of every
// enrolled host. Hosts gossip has never seen are marked unreachable only after a
// grace period, so a fresh leader does not flap them.
func (d *daemon) reconcileReachability(ctx context.Context, graceOver bool) {
	d.mu.Lock()
	pool := d.pool
	d.mu.Unlock()
	if pool == nil {
		return
	}
	seen := map[string]membership.Member{}
	for _, m := range pool.Members() {
		if host, ok := strings.CutPrefix(m.Name, "agent:"); ok {
			seen[host] = m
		}
	}
	var hosts []state.HostReach
	d.store.Read(func(v state.View) { hosts = v.Reachability() })
	slices.SortFunc(hosts, func(a, b state.HostReach) int { return strings.Compare(a.Name, b.Name) })
	for _, h := range hosts {
		if !h.Enrolled {
			continue
		}
		m, ok := seen[h.Name]
		var want state.SetReachable
		switch {
		case ok && m.State == "alive":
			want = state.SetReachable{Host: h.Name, Status: api.ConditionTrue, Reason: "GossipAlive", Message: "agent gossips from " + m.Addr}
		case ok && m.State == "suspect":
			continue
		case ok:
			want = state.SetReachable{Host: h.Name, Status: api.ConditionFalse, Reason: "Gossip" + strings.ToUpper(m.State[:1]) + m.State[1:], Message: fmt.Sprintf("membership declared the agent %s (last address %s)", m.State, m.Addr)}
		case graceOver:
			want = state.SetReachable{Host: h.Name, Status: api.ConditionFalse, Reason: "NeverSeen", Message: "the agent has not joined gossip"}
		default:
			continue
		}
		if h.Reachable == want.Status && h.ReachableMsg == want.Message {
			continue
		}
		if err := d.propose(ctx, state.CmdSetReachable, want); err != nil {
			d.log.Warn("leader: record reachability", "host", h.Name, "err", err)
		}
	}
}

// gossipLoop starts membership once the gossip key exists and keeps seeds fresh.
func (d *daemon) gossipLoop(ctx context.Context) error {
	var key []byte
	for key == nil {
		d.store.Read(func(v state.View) {
			if s, ok := v.Secret(state.GossipKeySecret); ok {
				if k, err := pki.Open(d.dataKey, s.Ciphertext, []byte(state.GossipKeySecret)); err == nil {
					key = k
				}
			}
		})
		if key != nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	profile := "lan"
	if d.cfg.Profile == "fast" {
		profile = "fast"
	}
	pool, err := membership.Start(ctx, membership.Config{
		Name: "coordinator:" + d.cfg.Name, Role: membership.RoleCoordinator, BindAddr: d.cfg.GossipAddr,
		Key: key, Seeds: d.gossipSeeds(), Logger: d.log, Profile: profile,
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.pool = pool
	d.mu.Unlock()
	defer pool.Close()
	d.metrics.SetGossip(func() map[[2]string]int {
		n := map[[2]string]int{}
		for _, m := range pool.Members() {
			n[[2]string{string(m.Role), m.State}]++
		}
		return n
	})
	defer d.metrics.SetGossip(nil)
	every := 10 * time.Second
	if profile == "fast" {
		every = 2 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Keys follow the state within a second: the leader's rotation waits longer
	// than that between its phases (gossipKeyDwell).
	keyTick := time.NewTicker(time.Second)
	defer keyTick.Stop()
	var keys [][]byte
	events := pool.Events()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok { // closed only with the pool; never spin on it
				events = nil
				continue
			}
			// Read every event (the pool queues what nobody reads) and wake the leader.
			select {
			case d.gossipWake <- struct{}{}:
			default:
			}
		case <-keyTick.C:
			want, err := d.gossipKeys()
			if err != nil {
				d.log.Warn("gossip keys", "err", err)
				continue
			}
			if len(want) == 0 || slices.EqualFunc(want, keys, bytes.Equal) {
				continue
			}
			if err := pool.SetKeys(want[0], want[1:]...); err != nil {
				d.log.Warn("gossip keys not installed", "err", err)
				continue
			}
			keys = want
			d.log.Info("gossip keys set", "keys", len(keys))
		case <-tick.C:
			// Coordinators that joined after this one started are not among the
			// pool's seeds: join any that gossip does not show alive.
			alive := map[string]bool{}
			for _, m := range pool.Members() {
				if m.State == membership.StateAlive {
					alive[m.Addr] = true
				}
			}
			var lost []string
			for _, s := range d.gossipSeeds() {
				if !alive[s] {
					lost = append(lost, s)
				}
			}
			if len(lost) > 0 {
				_, _ = pool.Join(lost)
			}
		}
	}
}

// gossipKeys are the keys gossip accepts now, the primary first.
func (d *daemon) gossipKeys() ([][]byte, error) {
	var recs []state.SecretRecord
	d.store.Read(func(v state.View) {
		for _, name := range []string{state.GossipKeySecret, state.GossipNextKeySecret, state.GossipPrevKeySecret} {
			if r, ok := v.Secret(name); ok {
				recs = append(recs, r)
			}
		}
	})
	if len(recs) == 0 || recs[0].Name != state.GossipKeySecret {
		return nil, nil
	}
	var out [][]byte
	for _, r := range recs {
		k, err := pki.Open(d.dataKey, r.Ciphertext, []byte(r.Name))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", r.Name, err)
		}
		out = append(out, k)
	}
	return out, nil
}

func (d *daemon) gossipSeeds() []string {
	var seeds []string
	d.store.Read(func(v state.View) {
		for _, c := range v.Coordinators() {
			if c.Name != d.cfg.Name && c.GossipAddr != "" {
				seeds = append(seeds, c.GossipAddr)
			}
		}
	})
	return seeds
}

// RecoverFenced rewrites this stopped coordinator's Raft configuration to itself
// alone and fences every other coordinator: certificates they hold now are refused on
// the Raft port from then on. Only for a two-controller site without witness whose
// peer is gone for good and fenced (powered off or wiped): otherwise both could
// accept writes. It returns the names fenced.
func RecoverFenced(dataDir string, log *slog.Logger) ([]string, error) {
	cfg, err := LoadConfig(dataDir)
	if err != nil {
		return nil, err
	}
	store := state.New(log)
	bundle, err := pki.LoadBundle(Paths(dataDir).PKI(), bundleName)
	if err != nil {
		return nil, err
	}
	tc, err := bundle.ServerTLS(nil)
	if err != nil {
		return nil, err
	}
	tc.RootCAs = tc.ClientCAs
	err = consensus.RecoverSingle(consensus.Config{NodeID: cfg.Name, BindAddr: cfg.RaftAddr, AdvertiseAddr: cfg.RaftAddr, DataDir: Paths(dataDir).Raft(), TLS: tc, FSM: store, Logger: log})
	if err != nil {
		return nil, err
	}
	fences, err := loadFences(dataDir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var names []string
	store.Read(func(v state.View) {
		for _, c := range v.Coordinators() {
			if c.Name != cfg.Name {
				fences[c.Name] = now
				names = append(names, c.Name)
			}
		}
	})
	return names, saveFences(dataDir, fences)
}
