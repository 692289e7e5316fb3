// Package apprunner is the leader coordinator's side of Applications: it turns the
// operator's requests recorded in the replicated state (apply, update, abort,
// remove) into Helm releases on the site's cluster, through pkg/helmrelease, and
// records its progress back in the state.
//
// Every step it takes is idempotent (a release with the same chart and values
// makes no new revision; generated objects are applied, not created), so the
// runner keeps no memory of its own: a new leader that finds an application
// "applying" simply runs the request again from the top and ends where the old
// leader would have. A release the old leader's death left pending is unlocked and
// remediated by helmrelease. Progress is tagged with the request (AppRecord.Op),
// so a deposed leader's or an aborted run's late reports are refused by the FSM.
package apprunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
	"github.com/plinth-dev/plinth/pkg/state"
)

// Config is what the runner needs from the coordinator that runs it.
type Config struct {
	Store *state.Store
	// Propose commits a command through Raft (the leader's own proposer).
	Propose func(ctx context.Context, typ string, body any) error
	// Kubeconfig returns the site's admin kubeconfig, or an error saying why there
	// is none yet (kube.init has not succeeded).
	Kubeconfig func() ([]byte, error)
	// Unseal opens a sealed secret of the replicated state (the coordinators'
	// data key; name is the seal's associated data).
	Unseal func(name string, ciphertext []byte) ([]byte, error)
	Log    *slog.Logger
	// Poll is how often a waiting application re-checks its gates and the cluster.
	// Default 2s.
	Poll time.Duration
	// Fetch says how charts from OCI registries and chart repositories are
	// reached (the zero value: HTTPS with the host's trust).
	Fetch helmrelease.FetchOptions
	// Parallel bounds the charts of one parallel group installed at once. Default 8.
	Parallel int
}

// Runner drives applications while its coordinator leads.
type Runner struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	workers map[string]*worker // by application name

	clusterMu sync.Mutex
	cluster   *cluster // built from the kubeconfig, rebuilt when it changes
}

// worker is one run of one request (an application and its Op).
type worker struct {
	op     uint64
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a runner; Run starts it.
func New(cfg Config) *Runner {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	return &Runner{cfg: cfg, log: cfg.Log.With("component", "apprunner"), workers: map[string]*worker{}}
}

// Run starts a worker for every application request in progress and stops the
// ones the state no longer asks for, until ctx ends; then it stops every worker
// and waits for them.
func (r *Runner) Run(ctx context.Context) error {
	defer r.stopAll()
	var index uint64
	for ctx.Err() == nil {
		var apps []state.AppRecord
		bctx, cancel := context.WithTimeout(ctx, r.cfg.Poll*5)
		r.cfg.Store.Block(bctx, index, func(v state.View) uint64 {
			apps = v.Apps()
			idx := uint64(0)
			for _, a := range apps {
				idx = max(idx, a.ModifyIndex)
			}
			return max(idx, 1)
		})
		cancel()
		// At least 1, the query's floor: with no application, 0 would make the
		// next Block return at once and this loop spin a core.
		index = 1
		for _, a := range apps {
			index = max(index, a.ModifyIndex)
		}
		r.reconcile(ctx, apps)
	}
	return nil
}

// reconcile makes the set of workers match the requests in progress: one worker
// per application and request. A worker that ended keeps its place until the
// request changes, so a finished run is not started again.
func (r *Runner) reconcile(ctx context.Context, apps []state.AppRecord) {
	want := map[string]state.AppRecord{}
	for _, a := range apps {
		switch a.Status.State {
		case api.AppApplying, api.AppRemoving:
			want[a.Name()] = a
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, w := range r.workers {
		if a, ok := want[name]; ok && a.Op == w.op {
			continue
		}
		w.cancel()
		<-w.done
		delete(r.workers, name)
	}
	for name, a := range want {
		if _, ok := r.workers[name]; ok {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		w := &worker{op: a.Op, cancel: cancel, done: make(chan struct{})}
		r.workers[name] = w
		go func(a state.AppRecord) {
			defer close(w.done)
			r.work(wctx, a)
		}(a)
	}
}

func (r *Runner) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, w := range r.workers {
		w.cancel()
		<-w.done
		delete(r.workers, name)
	}
}

// work runs one request until it is done, it fails, or ctx ends (abort, a newer
// request, lost leadership). Errors that say nothing about the application (no
// cluster yet, a proposal that did not commit) are retried after Poll.
func (r *Runner) work(ctx context.Context, a state.AppRecord) {
	run := &run{r: r, name: a.Name(), op: a.Op, rec: a, status: a.Status}
	for ctx.Err() == nil {
		var err error
		if a.Status.State == api.AppRemoving {
			err = run.remove(ctx)
		} else {
			err = run.apply(ctx)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		var stale *state.AppRequestError
		if errors.As(err, &stale) {
			r.log.Info("application request superseded", "app", a.Name(), "op", a.Op, "err", err)
			return
		}
		r.log.Warn("application run will be retried", "app", a.Name(), "op", a.Op, "err", err)
		_ = run.progress(ctx, fmt.Sprintf("retrying in %s: %v", r.cfg.Poll, err))
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Poll):
		}
	}
}

// openSecret returns a secret of the state in plain text; ok=false when it does
// not exist (yet).
func (r *Runner) openSecret(name string) ([]byte, bool, error) {
	var sec state.SecretRecord
	var ok bool
	r.cfg.Store.Read(func(v state.View) { sec, ok = v.Secret(name) })
	if !ok {
		return nil, false, nil
	}
	plain, err := r.cfg.Unseal(name, sec.Ciphertext)
	if err != nil {
		return nil, false, fmt.Errorf("secret %s: %w", name, err)
	}
	return plain, true, nil
}
