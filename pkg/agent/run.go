package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/membership"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// MemberName is the gossip name of a host's agent; the coordinator leader maps it
// to the host's Reachable condition.
func MemberName(host string) string { return "agent:" + host }

// Timings that are not worth a flag.
const (
	stepsWait      = 30 * time.Second // blocking query wait
	requestTimeout = 30 * time.Second // any other request
	configRefresh  = 5 * time.Minute  // GET /v1/agent/config
)

// agent is one running daemon. Every goroutine it starts is owned by Run.
type agent struct {
	cfg     Config
	log     *slog.Logger
	name    string
	pending *pendingStore
	gather  func(context.Context) (host.Facts, error)
	drift   *driftMemo

	// execMu keeps drift checks apart from step runs: runs share it (RLock), a drift
	// check holds it alone, so it never observes a host half way through a step.
	execMu sync.RWMutex
	// stopCheck cancels the drift check in progress (nil when none): a step that
	// wants to run cuts it short instead of waiting behind it.
	checkMu   sync.Mutex
	stopCheck context.CancelFunc

	mu    sync.Mutex
	cl    *client.Client
	addrs []string
	cert  *x509.Certificate
	seeds []string
	key   []byte           // gossip key; nil until known
	keys  [][]byte         // every key gossip accepts (key first), as last set
	pool  *membership.Pool // the running gossip pool, nil before it starts
	// keysVersion is the GossipKeysVersion of the last config fetched for it.
	keysVersion uint64
	snap        *wire.AgentSteps
	keyReady    chan struct{} // closed once key is known

	ready     chan struct{} // closed after the first successful steps fetch
	readyOnce sync.Once
	// intervalChanged wakes driftLoop when the coordinators ask for another drift
	// interval (buffered, one pending wake-up).
	intervalChanged chan struct{}
}

// Run is the agent daemon. It returns nil when ctx ends, or an error if the host's
// identity cannot be loaded or a component fails for good.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if cfg.Drivers == nil {
		return errors.New("agent: run: no drivers")
	}
	id, err := agentid.Load(cfg.StateDir)
	if err != nil {
		return err
	}
	if cfg.Name != "" && cfg.Name != id.Name {
		return fmt.Errorf("agent: run: configured name %q, but %s is enrolled as %q", cfg.Name, cfg.StateDir, id.Name)
	}
	bundle, err := LoadBundle(cfg.StateDir)
	if err != nil {
		return err
	}
	cert, err := pki.ParseCert(bundle.CertPEM)
	if err != nil {
		return err
	}
	if cert.Subject.CommonName != id.Name {
		return fmt.Errorf("agent: run: certificate is for %q, identity file for %q; re-enrol with `plinth-agent join --force`", cert.Subject.CommonName, id.Name)
	}
	addrs := cfg.Coordinators
	if len(addrs) == 0 {
		addrs = id.Coordinators
	}
	if len(addrs) == 0 {
		return errors.New("agent: run: no coordinator addresses: set coordinators in the config file or join again")
	}
	if cfg.GossipAddr == "" && !cfg.NoGossip {
		if cfg.GossipAddr, err = DefaultGossipAddr(addrs); err != nil {
			return err
		}
	}
	tc, err := bundle.ClientTLS("")
	if err != nil {
		return err
	}
	key, err := LoadGossipKey(cfg.StateDir)
	if err != nil {
		return err
	}
	a := &agent{
		cfg:      cfg,
		log:      cfg.Logger.With("host", id.Name),
		name:     id.Name,
		pending:  newPendingStore(filepath.Join(cfg.StateDir, pendingDir)),
		gather:   gatherWith(cfg.Gather, cfg.KubeCertificates),
		drift:    newDriftMemo(),
		cl:       client.New(addrs, tc),
		addrs:    slices.Clone(addrs),
		cert:     cert,
		seeds:    id.GossipSeeds,
		keyReady: make(chan struct{}),
		ready:    make(chan struct{}),

		intervalChanged: make(chan struct{}, 1),
	}
	if len(key) > 0 {
		a.setGossipKey(key)
	}
	return a.run(ctx)
}

func (a *agent) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	start := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("agent: %s: %w", name, err))
			}
		}()
	}
	start("notify", a.notifyLoop)
	start("steps", a.stepLoop)
	start("facts", a.factsLoop)
	start("drift", a.driftLoop)
	if !a.cfg.NoGossip {
		start("gossip", a.gossipLoop)
	}
	start("renew", a.renewLoop)
	start("config", a.configLoop)
	a.log.Info("agent started", "coordinators", a.addrs, "gossip", a.cfg.GossipAddr, "drivers", a.cfg.Drivers.Kinds())
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	a.log.Info("agent stopped")
	return nil
}

// client returns the current API client; renewal swaps it.
func (a *agent) client() *client.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cl
}

// do sends one request with a bounded time.
func (a *agent) do(ctx context.Context, method, path string, in, out any) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return a.client().Do(ctx, method, path, in, out)
}

func (a *agent) markReady() {
	a.readyOnce.Do(func() { close(a.ready) })
}

// notifyLoop tells systemd READY=1 after the first steps fetch, feeds the watchdog
// while the agent runs and says STOPPING=1 when it ends.
func (a *agent) notifyLoop(ctx context.Context) error {
	var tick <-chan time.Time
	if a.cfg.WatchdogInterval > 0 {
		t := time.NewTicker(a.cfg.WatchdogInterval)
		defer t.Stop()
		tick = t.C
		a.cfg.Notify("WATCHDOG=1")
	}
	ready := a.ready
	for {
		select {
		case <-ctx.Done():
			a.cfg.Notify("STOPPING=1")
			return nil
		case <-ready:
			ready = nil
			a.cfg.Notify("READY=1")
			a.log.Info("ready: fetched steps from the coordinators")
		case <-tick:
			a.cfg.Notify("WATCHDOG=1")
		}
	}
}
