package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// killResult is one dead-agent detection run.
type killResult struct {
	observed time.Duration // SIGKILL -> first poll answering Reachable=False
	recorded time.Duration // SIGKILL -> the condition's lastTransitionTime
	reason   string
	polls    int
	restart  time.Duration // agent restart -> Site Ready again
}

// hostReachable reads one host with a consistent read and returns its Reachable
// condition (the same figure `plinth-coordinator get hosts` shows).
func (b *bench) hostReachable(ctx context.Context, name string) (api.Condition, error) {
	var d struct {
		Host state.HostRecord `json:"host"`
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := b.cl.Do(rctx, "GET", "/v1/hosts/"+name+"?consistent", nil, &d); err != nil {
		return api.Condition{}, err
	}
	if c := plan.Find(d.Host.Host.Status.Conditions, api.ConditionReachable); c != nil {
		return *c, nil
	}
	return api.Condition{}, nil
}

// killRun kill -9s compute-0's agent, polls until its Reachable condition is False,
// then restarts the agent and waits for Site Ready again.
func (b *bench) killRun(ctx context.Context, i int) (killResult, error) {
	var r killResult
	h := b.l.Host(target)
	if c, err := b.hostReachable(ctx, target); err != nil || c.Status != api.ConditionTrue {
		return r, fmt.Errorf("run %d: %s not Reachable before the kill: %+v %v", i+1, target, c, err)
	}
	pid, _, err := resolvePid(h.Agent.Pid(), "plinth-agent")
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	// Signal the agent itself first so t0 is the kill, then let the lab reap it
	// (Kill signals the process group and waits for the exit).
	_ = syscall.Kill(pid, syscall.SIGKILL)
	h.Agent.Kill()
	deadline := t0.Add(b.o.detectWait)
	for {
		if err := sleep(ctx, b.o.poll); err != nil {
			return r, err
		}
		c, err := b.hostReachable(ctx, target)
		r.polls++
		if err == nil && c.Status == api.ConditionFalse {
			r.observed = time.Since(t0)
			r.recorded = c.LastTransitionTime.Sub(t0)
			r.reason = c.Reason
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("run %d: %s still Reachable=%q %s after %s (last error %v)", i+1, target, c.Status, b.o.detectWait, time.Since(t0).Round(time.Second), err)
		}
	}
	say("run %d: agent pid %d killed; Reachable=False (%s) observed after %s, recorded at +%s, %d polls",
		i+1, pid, r.reason, ms(r.observed), ms(r.recorded), r.polls)

	t1 := time.Now()
	if err := b.l.StartAgent(h); err != nil {
		return r, err
	}
	if _, err := b.l.WaitSiteReady(ctx, b.progress(), b.o.readyWait); err != nil {
		return r, fmt.Errorf("run %d: after restarting the agent: %w", i+1, err)
	}
	r.restart = time.Since(t1)
	say("run %d: agent restarted; Site Ready again after %s", i+1, ms(r.restart))
	// Let gossip settle (the restarted member refutes its death everywhere) before the
	// next kill, so runs do not overlap.
	return r, sleep(ctx, 2*time.Second)
}
