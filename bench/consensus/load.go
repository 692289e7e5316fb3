package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"
)

// writeFunc performs one write by writer w (its i-th) and returns once it is
// acknowledged (nil) or refused.
type writeFunc func(ctx context.Context, w, i int) error

// writeResult is one measured write window.
type writeResult struct {
	name     string
	ops      int
	errs     int
	firstErr error
	elapsed  time.Duration
	lat      []time.Duration // of acknowledged writes, sorted
	// flush is the mean time of a disk flush during the window, over flushN flushes
	// (see flushes); 0 when the disk's counters are not known.
	flush  time.Duration
	flushN uint64
}

func (r writeResult) perSecond() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// runWriters runs n writers back to back (closed loop: each sends its next write
// when the previous one is answered) for d, after an unmeasured warm-up.
func runWriters(ctx context.Context, name string, n int, warmup, d time.Duration, write writeFunc) (writeResult, error) {
	if warmup > 0 {
		if _, err := writeWindow(ctx, name, n, warmup, write, 1<<30); err != nil {
			return writeResult{}, err
		}
	}
	return writeWindow(ctx, name, n, d, write, 0)
}

func writeWindow(ctx context.Context, name string, n int, d time.Duration, write writeFunc, seq0 int) (writeResult, error) {
	res := writeResult{name: name}
	var mu sync.Mutex
	var wg sync.WaitGroup
	f0 := readFlushes(scratchDisk)
	start := time.Now()
	end := start.Add(d)
	for w := range n {
		wg.Go(func() {
			var lat []time.Duration
			errs := 0
			var first error
			for i := seq0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				// 10s is the coordinators' own commit timeout; nothing should take that long.
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t := time.Now()
				err := write(wctx, w, i)
				took := time.Since(t)
				cancel()
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, took)
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errs += errs
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	// Writes still in flight at the deadline finish late; count the real elapsed time.
	res.elapsed = time.Since(start)
	res.flush, res.flushN = readFlushes(scratchDisk).since(f0)
	res.ops = len(res.lat)
	slices.Sort(res.lat)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if res.ops == 0 {
		return res, errors.Join(errors.New(name+": no write was acknowledged"), res.firstErr)
	}
	return res, nil
}

// probeEvery is how often a new write is started while the cluster has no leader.
const probeEvery = 50 * time.Millisecond

// firstAck measures from t0 (the kill) to the first acknowledged write. A single
// retrying writer would measure its own timeout as much as the election: a write
// sent to a member that still believes in the dead leader may hang for seconds. So
// it starts a fresh write every probeEvery, each with a generous timeout, and keeps
// the earliest acknowledgement: the resolution is probeEvery.
func firstAck(ctx context.Context, t0 time.Time, write func(ctx context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	acked := make(chan time.Duration, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel (deferred below) stopped the losing probes
	defer cancel()
	var lastMu sync.Mutex
	var last error
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		wg.Go(func() {
			wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
			defer wcancel()
			if err := write(wctx); err != nil {
				lastMu.Lock()
				last = err
				lastMu.Unlock()
				return
			}
			select {
			case acked <- time.Since(t0):
			default: // a probe already won
			}
		})
		select {
		case d := <-acked:
			return d, nil
		case <-ctx.Done():
			lastMu.Lock()
			defer lastMu.Unlock()
			return 0, errors.Join(errors.New("no write acknowledged within 60s of the kill"), ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// pct is the nearest-rank q-quantile (0 < q <= 1) of sorted durations.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// failoverResult is one system's failover runs.
type failoverResult struct {
	times  []time.Duration // in run order
	killed []string        // which member was leader and got killed, per run
}

func (f failoverResult) sorted() []time.Duration {
	s := slices.Clone(f.times)
	slices.Sort(s)
	return s
}

// poll calls f every 100ms until it returns nil, ctx ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
