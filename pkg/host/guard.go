package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// undoable is one planned change to the host with the action that undoes it (not a
// plan step: one step's Diff plans many). Undo restores what the snapshot showed; nil
// means there is nothing to undo (state-only changes).
type undoable struct {
	summary string
	apply   func(ctx context.Context) error
	undo    func(ctx context.Context) error
}

// changes turns steps into driver changes; with a probe they run as one guarded
// transaction (see WithReachability). again, if set, plans what is left once they
// are applied: the kernel may undo some of them (removing a link's last address
// flushes its routes), and the transaction only commits once nothing is left.
func changes(o *options, steps []undoable, again func(context.Context) ([]undoable, error)) []driver.Change {
	out := make([]driver.Change, len(steps))
	if o.probe == nil {
		for i, s := range steps {
			out[i] = driver.Change{Summary: s.summary, Apply: s.apply}
		}
		return out
	}
	g := &guard{o: o, again: again}
	for i, s := range steps {
		last := i == len(steps)-1
		out[i] = driver.Change{Summary: s.summary, Apply: func(ctx context.Context) error { return g.apply(ctx, s, last) }}
	}
	return out
}

// guard is the state of one guarded Diff: each pass of driver.Run applies one Diff's
// changes in order and stops at the first error, so the last change's Apply is where
// the pass commits. A later pass (changes the kernel made undone) is its own guard.
type guard struct {
	o       *options
	again   func(context.Context) ([]undoable, error)
	mu      sync.Mutex
	started bool
	armed   bool
	done    []undoable
}

// probeTimeout bounds one probe; the agent's probe dials each coordinator in turn.
const probeTimeout = 10 * time.Second

func (g *guard) apply(ctx context.Context, s undoable, last bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		g.started = true
		if err := g.probe(ctx); err != nil {
			g.o.log.Warn("host: no coordinator reachable before changing the network; applying without a rollback guard", "err", err)
		} else {
			g.armed = true
		}
	}
	if err := g.applyOne(ctx, s); err != nil || !last || !g.armed {
		return err
	}
	if err := g.settle(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(g.o.rollbackTimeout)
	var err error
	for {
		if err = g.probe(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return g.rollback(ctx, fmt.Errorf("no coordinator reachable within %s after %s: %w", g.o.rollbackTimeout, changesN(len(g.done)), err))
}

// applyOne applies s; when it fails and no coordinator answers, everything is undone.
func (g *guard) applyOne(ctx context.Context, s undoable) error {
	if err := s.apply(ctx); err != nil {
		if g.armed && g.probe(ctx) != nil {
			return g.rollback(ctx, fmt.Errorf("%w, and no coordinator is reachable", err))
		}
		return err
	}
	g.done = append(g.done, s)
	return nil
}

// maxSettle bounds the extra passes settle makes, as driver.Run bounds its own.
const maxSettle = 3

// settle applies, inside the transaction, what the kernel undid of it.
func (g *guard) settle(ctx context.Context) error {
	if g.again == nil {
		return nil
	}
	for range maxSettle {
		more, err := g.again(ctx)
		if err != nil && g.probe(ctx) != nil {
			return g.rollback(ctx, fmt.Errorf("%w, and no coordinator is reachable", err))
		}
		if err != nil || len(more) == 0 {
			return err
		}
		for _, s := range more {
			g.o.log.Info("host: applying again what the kernel undid", "change", s.summary)
			if err := g.applyOne(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *guard) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return g.o.probe(ctx)
}

// rollback undoes every applied change, newest first, and returns a Permanent error:
// running the same changes again would cut the host off again.
func (g *guard) rollback(ctx context.Context, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var errs []error
	for i := len(g.done) - 1; i >= 0; i-- {
		if u := g.done[i].undo; u != nil {
			if err := u(ctx); err != nil {
				errs = append(errs, fmt.Errorf("undo %q: %w", g.done[i].summary, err))
			}
		}
	}
	n := len(g.done)
	g.done = nil
	if len(errs) > 0 {
		return driver.Permanent(fmt.Errorf("host: %w; rolling back %s failed: %w", cause, changesN(n), errors.Join(errs...)))
	}
	after := "a coordinator is reachable again"
	if err := g.probe(ctx); err != nil {
		after = "still no coordinator reachable: " + err.Error()
	}
	g.o.log.Error("host: rolled back network changes", "changes", n, "cause", cause, "after", after)
	return driver.Permanent(fmt.Errorf("host: %w; rolled back %s (%s)", cause, changesN(n), after))
}

func changesN(n int) string {
	if n == 1 {
		return "1 change"
	}
	return fmt.Sprintf("%d changes", n)
}

// TCPProbe returns a reachability probe that succeeds once a TCP connection to any of
// the addresses (host:port) that addrs returns opens. It dials on the calling
// goroutine, one address after the other, so it runs in the caller's network
// namespace.
func TCPProbe(addrs func() ([]string, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		list, err := addrs()
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return errors.New("no coordinator addresses")
		}
		var errs []string
		for _, a := range list {
			d := net.Dialer{Timeout: 2 * time.Second}
			c, err := d.DialContext(ctx, "tcp", a)
			if err == nil {
				c.Close()
				return nil
			}
			errs = append(errs, err.Error())
			if ctx.Err() != nil {
				break
			}
		}
		return errors.New(strings.Join(errs, "; "))
	}
}
