package membership

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

const (
	// closeLeaveTimeout bounds the leave broadcast done by Close.
	closeLeaveTimeout = 2 * time.Second
	// Background join backoff.
	joinBackoffMin = 500 * time.Millisecond
	joinBackoffMax = 30 * time.Second
)

// Pool is the local member of the gossip pool.
type Pool struct {
	name    string
	role    Role
	log     *slog.Logger
	ml      *memberlist.Memberlist
	deadTTL time.Duration // how long memberlist keeps dead members around
	local   string        // address others reach us at
	events  *eventQueue
	keyring *memberlist.Keyring

	mu      sync.Mutex
	members map[string]entry // updated from memberlist's event delegate

	// life serialises Leave with shutdown: memberlist panics on Leave after
	// Shutdown.
	life      sync.Mutex
	left      bool        // guarded by life
	leaving   atomic.Bool // read by NodeMeta
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	rejoinEvery  time.Duration // how often lost seeds are joined again
	cancelJoin   context.CancelFunc
	wg           sync.WaitGroup // background join
	joinFailures atomic.Int64   // failed background join rounds, for tests
}

type entry struct {
	m     Member
	since time.Time
}

// nodeMeta is gossiped with every member: {"role":"agent"}, plus
// "leaving":true once Leave has started.
type nodeMeta struct {
	Role    Role `json:"role"`
	Leaving bool `json:"leaving,omitempty"`
}

// Start creates the local member and, if cfg.Seeds is not empty, joins them
// in the background, retrying with backoff until one succeeds or ctx ends.
// ctx only bounds that join; call Close to stop the pool.
func Start(ctx context.Context, cfg Config) (*Pool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("membership: start: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "membership", "member", cfg.Name)

	mc, err := memberlistConfig(cfg, logger)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		name:    cfg.Name,
		role:    cfg.Role,
		log:     logger,
		deadTTL: mc.GossipToTheDeadTime,
		events:  newEventQueue(),
		members: make(map[string]entry),
		keyring: mc.Keyring,
	}
	d := &delegate{p: p}
	mc.Delegate = d
	mc.Events = d
	mc.Conflict = d

	tr, err := newTransport(mc.BindAddr, mc.BindPort, logger)
	if err != nil {
		p.events.close()
		return nil, fmt.Errorf("membership: start %s on %s: %w", cfg.Name, cfg.BindAddr, err)
	}
	if mc.BindPort == 0 { // the port the transport was given
		mc.BindPort = tr.port()
		if mc.AdvertisePort == 0 {
			mc.AdvertisePort = mc.BindPort
		}
	}
	mc.Transport = tr
	ml, err := memberlist.Create(mc)
	if err != nil {
		tr.Shutdown()
		p.events.close()
		return nil, fmt.Errorf("membership: start %s on %s: %w", cfg.Name, cfg.BindAddr, err)
	}
	p.ml = ml

	// memberlist reported the local member through NotifyJoin during Create;
	// that copy carries the real port when BindAddr asked for port 0.
	p.mu.Lock()
	p.local = p.members[cfg.Name].m.Addr
	p.mu.Unlock()
	if p.local == "" {
		ip := mc.AdvertiseAddr
		if ip == "" {
			ip = mc.BindAddr
		}
		p.local = net.JoinHostPort(ip, strconv.Itoa(mc.BindPort))
	}
	p.log.Info("membership started", "addr", p.local, "role", cfg.Role)

	seeds := make([]string, 0, len(cfg.Seeds))
	for _, s := range cfg.Seeds {
		if s != "" && s != p.local { // joining ourselves proves nothing
			seeds = append(seeds, s)
		}
	}
	p.rejoinEvery = 15 * time.Second
	if cfg.Profile == ProfileFast {
		p.rejoinEvery = 2 * time.Second
	}
	joinCtx, cancel := context.WithCancel(ctx)
	p.cancelJoin = cancel
	if len(seeds) > 0 {
		p.wg.Add(1)
		go p.joinLoop(joinCtx, seeds)
	}
	return p, nil
}

// SetKeys makes primary the key gossip encrypts with and others the only other keys
// it accepts. A rotation calls it three times, each after every member has the
// previous step: (old, new) installs the new key, (new, old) switches to it, (new)
// drops the old one, and with it every member that knows only the old key.
func (p *Pool) SetKeys(primary []byte, others ...[]byte) error {
	want := append([][]byte{primary}, others...)
	for _, k := range want {
		if len(k) != KeySize {
			return fmt.Errorf("membership: set keys: key is %d bytes, want %d", len(k), KeySize)
		}
		if err := p.keyring.AddKey(k); err != nil {
			return fmt.Errorf("membership: set keys: %w", err)
		}
	}
	if err := p.keyring.UseKey(primary); err != nil {
		return fmt.Errorf("membership: set keys: %w", err)
	}
	for _, k := range p.keyring.GetKeys() {
		if !slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, k) }) {
			if err := p.keyring.RemoveKey(k); err != nil {
				return fmt.Errorf("membership: set keys: %w", err)
			}
		}
	}
	return nil
}

// Events returns membership changes, in the order memberlist observed them,
// starting with the local member's own join. The channel is closed by Close.
// See eventQueue for the buffering choice: nothing is dropped while open.
func (p *Pool) Events() <-chan Event { return p.events.out }

// Members returns every member memberlist knows about, sorted by name,
// including dead and left ones until memberlist forgets them.
func (p *Pool) Members() []Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]Member, 0, len(p.members))
	for name, e := range p.members {
		if e.m.State != StateAlive && e.m.State != StateSuspect && now.Sub(e.since) > p.deadTTL {
			delete(p.members, name) // memberlist has reaped it too
			continue
		}
		out = append(out, e.m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LocalAddr returns the "ip:port" other members reach this one at: the
// advertise (or bind) IP and the port actually bound, also when port 0.
func (p *Pool) LocalAddr() string { return p.local }

// Join contacts seeds now and returns how many were reached. It fails only
// if none was.
func (p *Pool) Join(seeds []string) (int, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if len(seeds) == 0 {
		return 0, errors.New("membership: join: no seeds")
	}
	n, err := p.ml.Join(seeds)
	if err != nil {
		return n, fmt.Errorf("membership: join %s: %w", strings.Join(seeds, ","), err)
	}
	return n, nil
}

// Leave announces a graceful departure and waits up to timeout (which must
// be positive) for it to be gossiped. The member keeps running until Close.
//
// memberlist does not tell delegates whether a member left or died, so Leave
// first gossips metadata marked "leaving" and then memberlist's leave; peers
// that saw the mark report Graceful. Best effort: a peer that missed it
// reports the member dead.
func (p *Pool) Leave(timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("membership: leave: timeout %v must be positive", timeout)
	}
	p.life.Lock()
	defer p.life.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	return p.leaveLocked(timeout)
}

// leaveLocked runs with p.life held and memberlist not shut down.
func (p *Pool) leaveLocked(timeout time.Duration) error {
	if p.left {
		return nil // a second UpdateNode would mark us alive again
	}
	p.left = true
	deadline := time.Now().Add(timeout)

	p.leaving.Store(true)
	if err := p.ml.UpdateNode(timeout / 2); err != nil {
		// Carry on: peers will just report a non-graceful leave.
		p.log.Warn("leaving mark not fully gossiped", "err", err)
	}
	rest := max(time.Until(deadline), time.Millisecond) // 0 would wait forever
	if err := p.ml.Leave(rest); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// Close leaves gracefully (bounded by a short timeout), shuts memberlist
// down, stops the background join and closes the Events channel.
// It is idempotent.
func (p *Pool) Close() error { return p.shutdown(true) }

// crash stops the member without announcing a leave, as a killed process
// would. Peers must detect it by probing. For tests.
func (p *Pool) crash() error { return p.shutdown(false) }

func (p *Pool) shutdown(graceful bool) error {
	p.closeOnce.Do(func() {
		p.cancelJoin()

		p.life.Lock()
		p.closed.Store(true)
		if graceful {
			if err := p.leaveLocked(closeLeaveTimeout); err != nil {
				// Peers will still find out by probing.
				p.log.Warn("leave before shutdown", "err", err)
			}
		}
		if err := p.ml.Shutdown(); err != nil {
			p.closeErr = fmt.Errorf("membership: shutdown: %w", err)
		}
		p.life.Unlock()

		p.wg.Wait()
		p.events.close()
		p.log.Info("membership stopped", "graceful", graceful)
	})
	return p.closeErr
}

// joinLoop joins seeds until one answers or ctx ends.
func (p *Pool) joinLoop(ctx context.Context, seeds []string) {
	defer p.wg.Done()
	backoff := joinBackoffMin
	for attempt := 1; ; attempt++ {
		n, err := p.joinEach(ctx, seeds)
		if n > 0 {
			p.log.Info("joined pool", "seeds_reached", n, "attempt", attempt)
			p.keepSeeds(ctx, seeds)
			return
		}
		if ctx.Err() != nil {
			p.log.Debug("join stopped", "err", ctx.Err())
			return
		}
		p.joinFailures.Add(1)
		// ±20% jitter so restarted members do not retry in lockstep.
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		p.log.Warn("join failed, retrying", "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			p.log.Debug("join stopped", "err", ctx.Err())
			return
		case <-t.C:
		}
		backoff = min(backoff*2, joinBackoffMax)
	}
}

// keepSeeds re-joins seeds that are no longer alive members, until ctx ends. After a
// partition heals, both sides have declared each other dead and memberlist stops
// probing dead members, so without this the pool would stay split.
func (p *Pool) keepSeeds(ctx context.Context, seeds []string) {
	for {
		t := time.NewTimer(p.rejoinEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		alive := map[string]bool{}
		for _, m := range p.Members() {
			if m.State == StateAlive {
				alive[m.Addr] = true
			}
		}
		var missing []string
		for _, s := range seeds {
			if !alive[s] {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if n, err := p.joinEach(ctx, missing); n > 0 {
			p.log.Info("re-joined seeds that had been lost", "seeds_reached", n)
		} else {
			p.log.Debug("seeds still unreachable", "seeds", missing, "err", err)
		}
	}
}

// joinEach joins seeds one at a time so cancellation is noticed between
// dials.
func (p *Pool) joinEach(ctx context.Context, seeds []string) (int, error) {
	var n int
	var errs []error
	for _, s := range seeds {
		if ctx.Err() != nil {
			break
		}
		k, err := p.ml.Join([]string{s})
		n += k
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("membership: join: %w", errors.Join(errs...))
}

// record updates the member table and queues the event. memberlist calls it
// under its node lock, one event at a time, so it must not block.
//
// memberlist's Node.State is not maintained for delegates (it is always
// zero), so the state comes from the callback and the "leaving" mark.
func (p *Pool) record(kind string, n *memberlist.Node) {
	meta := p.parseMeta(n.Name, n.Meta)
	m := Member{Name: n.Name, Role: meta.Role, Addr: n.Address(), State: StateAlive}
	if kind == EventLeave {
		m.State = StateDead
		if meta.Leaving {
			m.State = StateLeft
		}
	}

	p.mu.Lock()
	prev, known := p.members[m.Name]
	p.members[m.Name] = entry{m: m, since: time.Now()}
	p.mu.Unlock()

	// The leaving mark arrives as a metadata update; it is not news unless
	// the role changed too.
	if kind == EventUpdate && meta.Leaving && known && prev.m.Role == m.Role {
		return
	}

	level := slog.LevelInfo
	if m.Name == p.name {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, "member "+kind,
		"peer", m.Name, "peer_role", m.Role, "peer_addr", m.Addr, "state", m.State)
	p.events.push(Event{Member: m, Kind: kind, Graceful: m.State == StateLeft})
}

func (p *Pool) parseMeta(name string, b []byte) nodeMeta {
	var nm nodeMeta
	if err := json.Unmarshal(b, &nm); err != nil {
		p.log.Debug("unreadable member metadata", "peer", name, "err", err)
		return nodeMeta{}
	}
	return nm
}

// delegate adapts memberlist callbacks without exporting them on Pool.
type delegate struct{ p *Pool }

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.p.record(EventJoin, n) }
func (d *delegate) NotifyLeave(n *memberlist.Node)  { d.p.record(EventLeave, n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.p.record(EventUpdate, n) }

// NotifyConflict: two live members claim the same name.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.p.log.Warn("member name conflict", "peer", existing.Name,
		"known_addr", existing.Address(), "other_addr", other.Address())
}

// NodeMeta gossips our role.
func (d *delegate) NodeMeta(limit int) []byte {
	b, err := json.Marshal(nodeMeta{Role: d.p.role, Leaving: d.p.leaving.Load()})
	if err != nil || len(b) > limit {
		d.p.log.Error("node metadata not sent", "size", len(b), "limit", limit, "err", err)
		return nil
	}
	return b
}

// No user messages or state: this package only gossips liveness.
func (d *delegate) NotifyMsg([]byte)                    {}
func (d *delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d *delegate) LocalState(bool) []byte              { return nil }
func (d *delegate) MergeRemoteState(buf []byte, _ bool) {}
