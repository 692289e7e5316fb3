package membership

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/freeport"
	"github.com/plinth-dev/plinth/internal/poll"
)

// testMember is a Pool plus a recorder that drains its Events channel.
type testMember struct {
	*Pool
	mu   sync.Mutex
	evs  []Event
	done chan struct{}
}

func (m *testMember) events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.evs)
}

// hasEvent reports whether an event after index from matches f.
func (m *testMember) hasEvent(from int, f func(Event) bool) bool {
	evs := m.events()
	for i := from; i < len(evs); i++ {
		if f(evs[i]) {
			return true
		}
	}
	return false
}

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func testLogger() *slog.Logger {
	level := slog.LevelError
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	if os.Getenv("MEMBERSHIP_DEBUG") != "" {
		level = slog.LevelDebug
	}
	// Not t.Log: memberlist goroutines may log just after a test ends.
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func startCfg(t testing.TB, cfg Config) *testMember {
	t.Helper()
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Name, err)
	}
	m := &testMember{Pool: p, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ev := range p.Events() {
			m.mu.Lock()
			m.evs = append(m.evs, ev)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close %s: %v", cfg.Name, err)
		}
		<-m.done // Events must be closed by Close
	})
	return m
}

func start(t *testing.T, name string, role Role, key []byte, seeds ...string) *testMember {
	t.Helper()
	return startCfg(t, Config{
		Name:     name,
		Role:     role,
		BindAddr: "127.0.0.1:0",
		Key:      key,
		Seeds:    seeds,
		Logger:   testLogger(),
		Profile:  ProfileFast,
	})
}

func memberState(p *Pool, name string) (Member, bool) {
	for _, m := range p.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func allAlive(p *Pool, names ...string) bool {
	for _, n := range names {
		m, ok := memberState(p, n)
		if !ok || m.State != StateAlive {
			return false
		}
	}
	return true
}

func TestThreeMembersSeeEachOther(t *testing.T) {
	key := newKey(t)
	a := start(t, "a", RoleCoordinator, key)
	b := start(t, "b", RoleAgent, key, a.LocalAddr())
	c := start(t, "c", RoleAgent, key, a.LocalAddr())

	for _, m := range []*testMember{a, b, c} {
		host, port, err := net.SplitHostPort(m.LocalAddr())
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Fatalf("LocalAddr %q: want 127.0.0.1:<bound port>", m.LocalAddr())
		}
	}

	pools := map[string]*testMember{"a": a, "b": b, "c": c}
	poll.True(t, 10*time.Second, "3 alive members everywhere", func() bool {
		for _, m := range pools {
			if got := m.Members(); len(got) != 3 || !allAlive(m.Pool, "a", "b", "c") {
				return false
			}
		}
		return true
	})

	wantRole := map[string]Role{"a": RoleCoordinator, "b": RoleAgent, "c": RoleAgent}
	for self, m := range pools {
		got := m.Members()
		if !slices.IsSortedFunc(got, func(x, y Member) int { return strings.Compare(x.Name, y.Name) }) {
			t.Errorf("%s: members not sorted: %v", self, got)
		}
		for _, mem := range got {
			if mem.Role != wantRole[mem.Name] {
				t.Errorf("%s sees %s with role %q, want %q", self, mem.Name, mem.Role, wantRole[mem.Name])
			}
			if mem.Addr != pools[mem.Name].LocalAddr() {
				t.Errorf("%s sees %s at %s, want %s", self, mem.Name, mem.Addr, pools[mem.Name].LocalAddr())
			}
		}
	}
	// Join events for every member, including itself. They reach the test's reader
	// goroutine after the pool's member list shows the member, so they are waited for.
	for self, m := range pools {
		for name := range pools {
			poll.True(t, 5*time.Second, self+": a join event for "+name, func() bool {
				return m.hasEvent(0, func(ev Event) bool { return ev.Kind == EventJoin && ev.Member.Name == name })
			})
		}
	}
}

func TestWrongKeyCannotJoin(t *testing.T) {
	key := newKey(t)
	a := start(t, "a", RoleCoordinator, key)
	b := start(t, "b", RoleAgent, key, a.LocalAddr())
	poll.True(t, 10*time.Second, "a and b see each other", func() bool {
		return allAlive(a.Pool, "a", "b") && allAlive(b.Pool, "a", "b")
	})

	x := start(t, "x", RoleAgent, newKey(t))
	if n, err := x.Join([]string{a.LocalAddr()}); err == nil {
		t.Errorf("join with a different key: reached %d, want an error", n)
	}

	// Negative check: give gossip a few seconds to (wrongly) spread x.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range []*testMember{a, b} {
			if _, ok := memberState(m.Pool, "x"); ok {
				t.Fatalf("%s sees x, which uses another key", m.Name())
			}
		}
		if _, ok := memberState(x.Pool, "a"); ok {
			t.Fatal("x sees a despite using another key")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *testMember) Name() string { return m.name }

func TestCrashDetectedAndRestart(t *testing.T) {
	key := newKey(t)
	a := start(t, "a", RoleCoordinator, key)
	b := start(t, "b", RoleCoordinator, key, a.LocalAddr())
	c := start(t, "c", RoleAgent, key, a.LocalAddr())
	poll.True(t, 10*time.Second, "3 alive members everywhere", func() bool {
		return allAlive(a.Pool, "a", "b", "c") && allAlive(b.Pool, "a", "b", "c") && allAlive(c.Pool, "a", "b", "c")
	})

	oldAddr := c.LocalAddr()
	fromA, fromB := len(a.events()), len(b.events())
	if err := c.crash(); err != nil {
		t.Fatalf("crash: %v", err)
	}
	crashedLeave := func(ev Event) bool {
		return ev.Kind == EventLeave && ev.Member.Name == "c" && !ev.Graceful && ev.Member.State == StateDead
	}
	took := poll.True(t, 10*time.Second, "dead event for c on a and b", func() bool {
		return a.hasEvent(fromA, crashedLeave) && b.hasEvent(fromB, crashedLeave)
	})
	t.Logf("crash detected by both peers in %v", took)
	for _, m := range []*testMember{a, b} {
		got, ok := memberState(m.Pool, "c")
		if !ok || got.State != StateDead {
			t.Errorf("%s: Members has c as %+v (found %v), want dead", m.Name(), got, ok)
		}
	}

	// Restart with the same name on a new port.
	fromA, fromB = len(a.events()), len(b.events())
	c2 := start(t, "c", RoleAgent, key, a.LocalAddr())
	if c2.LocalAddr() == oldAddr {
		t.Fatalf("restarted c reuses %s; want a new port", oldAddr)
	}
	rejoined := func(ev Event) bool {
		return ev.Kind == EventJoin && ev.Member.Name == "c" && ev.Member.Addr == c2.LocalAddr()
	}
	took = poll.True(t, 20*time.Second, "join event for restarted c on a and b", func() bool {
		return a.hasEvent(fromA, rejoined) && b.hasEvent(fromB, rejoined)
	})
	t.Logf("restart seen by both peers in %v", took)
	poll.True(t, 5*time.Second, "restarted c alive in Members", func() bool {
		return allAlive(a.Pool, "c") && allAlive(b.Pool, "c")
	})
}

func TestGracefulLeave(t *testing.T) {
	key := newKey(t)
	a := start(t, "a", RoleCoordinator, key)
	b := start(t, "b", RoleAgent, key, a.LocalAddr())
	poll.True(t, 10*time.Second, "a sees b", func() bool { return allAlive(a.Pool, "b") })

	from := len(a.events())
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatalf("leave: %v", err)
	}
	left := func(ev Event) bool {
		return ev.Kind == EventLeave && ev.Member.Name == "b" && ev.Graceful && ev.Member.State == StateLeft
	}
	poll.True(t, 5*time.Second, "graceful leave event for b", func() bool { return a.hasEvent(from, left) })
	if got, _ := memberState(a.Pool, "b"); got.State != StateLeft {
		t.Errorf("Members has b as %+v, want left", got)
	}

	// Close after Leave must not bring b back, nor report it twice.
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := b.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close: %v, want ErrClosed", err)
	}
	for _, ev := range a.events()[from:] {
		if ev.Member.Name == "b" && !left(ev) {
			t.Errorf("unexpected event for b after its leave: %+v", ev)
		}
	}
}

func TestCloseIsIdempotentAndFinal(t *testing.T) {
	m := start(t, "solo", RoleAgent, newKey(t))
	for i := range 2 {
		if err := m.Close(); err != nil {
			t.Fatalf("close #%d: %v", i+1, err)
		}
	}
	select {
	case <-m.done: // Events channel was closed
	case <-time.After(5 * time.Second):
		t.Fatal("Events channel not closed after Close")
	}
	if err := m.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close: %v, want ErrClosed", err)
	}
	if _, err := m.Join([]string{"127.0.0.1:1"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Join after Close: %v, want ErrClosed", err)
	}
	if err := m.crash(); err != nil {
		t.Errorf("crash after Close: %v", err)
	}
}

func TestBackgroundJoinRetriesUntilSeedIsUp(t *testing.T) {
	key := newKey(t)
	seedAddr := freeport.Addr(t)
	b := start(t, "b", RoleAgent, key, seedAddr) // seed not up yet

	poll.True(t, 5*time.Second, "a failed join attempt", func() bool { return b.joinFailures.Load() > 0 })
	a := startCfg(t, Config{
		Name: "a", Role: RoleCoordinator, BindAddr: seedAddr, Key: key,
		Logger: testLogger(), Profile: ProfileFast,
	})
	if a.LocalAddr() != seedAddr {
		t.Fatalf("LocalAddr %s, want %s", a.LocalAddr(), seedAddr)
	}
	poll.True(t, 15*time.Second, "b joined a via background retry", func() bool {
		return allAlive(a.Pool, "a", "b") && allAlive(b.Pool, "a", "b")
	})
}

func TestStartValidatesConfig(t *testing.T) {
	good := Config{Name: "n", Role: RoleAgent, BindAddr: "127.0.0.1:0", Key: make([]byte, KeySize), Profile: ProfileFast}
	cases := map[string]func(*Config){
		"no name":        func(c *Config) { c.Name = "" },
		"bad role":       func(c *Config) { c.Role = "router" },
		"no key":         func(c *Config) { c.Key = nil },
		"short key":      func(c *Config) { c.Key = make([]byte, 16) },
		"bad profile":    func(c *Config) { c.Profile = "wan" },
		"no port":        func(c *Config) { c.BindAddr = "127.0.0.1" },
		"hostname bind":  func(c *Config) { c.BindAddr = "localhost:0" },
		"bad port":       func(c *Config) { c.BindAddr = "127.0.0.1:99999" },
		"bad advertise":  func(c *Config) { c.AdvertiseAddr = "not-an-ip:1" },
		"advertise port": func(c *Config) { c.AdvertiseAddr = ":7946" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			if p, err := Start(context.Background(), cfg); err == nil {
				p.Close()
				t.Fatalf("Start(%+v) succeeded, want error", cfg)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, good); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with cancelled ctx: %v, want context.Canceled", err)
	}
}

func TestAdvertiseAddr(t *testing.T) {
	m := startCfg(t, Config{
		Name: "adv", Role: RoleAgent, BindAddr: "127.0.0.1:0", AdvertiseAddr: "127.0.0.1",
		Key: newKey(t), Logger: testLogger(), Profile: ProfileFast,
	})
	if _, port, _ := net.SplitHostPort(m.LocalAddr()); port == "0" || port == "" {
		t.Fatalf("LocalAddr %q lacks the bound port", m.LocalAddr())
	}
}

// A rotation in three steps keeps the members that follow it together and ends the
// membership of one that knows only the old key (a deleted host).
func TestKeyRotationDropsTheMemberLeftBehind(t *testing.T) {
	oldKey, newKeyB := newKey(t), newKey(t)
	a := start(t, "a", RoleCoordinator, oldKey)
	b := start(t, "b", RoleAgent, oldKey, a.LocalAddr())
	_ = start(t, "x", RoleAgent, oldKey, a.LocalAddr()) // never told of the new key
	poll.True(t, 10*time.Second, "3 alive members everywhere", func() bool {
		return allAlive(a.Pool, "a", "b", "x") && allAlive(b.Pool, "a", "b", "x")
	})
	for _, phase := range [][][]byte{{oldKey, newKeyB}, {newKeyB, oldKey}, {newKeyB}} {
		for _, m := range []*testMember{a, b} {
			if err := m.SetKeys(phase[0], phase[1:]...); err != nil {
				t.Fatal(err)
			}
		}
		if !allAlive(a.Pool, "a", "b") || !allAlive(b.Pool, "a", "b") {
			t.Fatalf("a and b lost each other during the rotation")
		}
	}
	if got := a.keyring.GetKeys(); len(got) != 1 || !bytes.Equal(got[0], newKeyB) {
		t.Fatalf("a's keyring holds %d keys after the rotation, want only the new one", len(got))
	}
	poll.True(t, 20*time.Second, "x, left with the old key, is no longer alive for a and b", func() bool {
		ma, _ := memberState(a.Pool, "x")
		mb, _ := memberState(b.Pool, "x")
		return ma.State != StateAlive && mb.State != StateAlive
	})
	poll.True(t, 10*time.Second, "a and b still see each other", func() bool {
		return allAlive(a.Pool, "a", "b") && allAlive(b.Pool, "a", "b")
	})
	if err := a.SetKeys([]byte("short")); err == nil {
		t.Fatal("SetKeys took a 5-byte key")
	}
}
