package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// cpuSeconds is a process's user+system CPU time so far, from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ is 100 on Linux
}

// memKB reads one "Vm..." line of /proc/PID/status, in KiB.
func memKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// metrics scrapes a coordinator's /metrics and returns the unlabelled samples.
func metrics(ctx context.Context, cl *client.Client) (map[string]float64, error) {
	var buf bytes.Buffer
	if _, err := cl.Do(ctx, "GET", wire.PathMetrics, nil, &buf); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if i := strings.LastIndexByte(line, '}'); i > 0 {
			name, val, ok = line[:i+1], line[i+1:], true
		}
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, nil
}

// lagSampler polls every coordinator's applied index while a phase runs and keeps
// the largest gap between the leader's index and each follower's. It asks all of
// them at once, and asks /v1/status, which only reads the index: asked one after
// another, or through /metrics (which counts every host's conditions), the time
// between the leader's answer and a follower's counted as lag (at 1000 hosts,
// about 1600 entries a second).
type lagSampler struct {
	mu     sync.Mutex
	max    map[string]float64
	stop   context.CancelFunc
	done   chan struct{}
	sample int
}

func startLag(ctx context.Context, leader string, cls map[string]*client.Client) *lagSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &lagSampler{max: map[string]float64{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			idx := map[string]float64{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for name, cl := range cls {
				wg.Go(func() {
					rctx, c := context.WithTimeout(ctx, 2*time.Second)
					defer c()
					var st wire.Status
					if _, err := cl.Do(rctx, "GET", wire.PathStatus, nil, &st); err == nil {
						mu.Lock()
						idx[name] = float64(st.AppliedIndex)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if li, ok := idx[leader]; ok {
				s.mu.Lock()
				s.sample++
				for name, v := range idx {
					if name != leader && li-v > s.max[name] {
						s.max[name] = li - v
					}
				}
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the worst lag over the followers, in log entries.
func (s *lagSampler) finish() float64 {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	worst := 0.0
	for _, v := range s.max {
		worst = max(worst, v)
	}
	return worst
}

// snapshotBytes streams a snapshot of the state from the leader and counts it.
func snapshotBytes(ctx context.Context, cl *client.Client) (int64, error) {
	cw := &countWriter{}
	if _, err := cl.Do(ctx, "GET", wire.PathSnapshot, nil, io.Writer(cw)); err != nil {
		return 0, err
	}
	return cw.n, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
