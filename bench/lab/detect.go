package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// killResult is one dead-agent detection run.
type killResult struct {
	pid       int           // the agent's pid on the machine
	killCall  time.Duration // lab.KillAgent: systemctl kill --signal=KILL, then stop
	observed  time.Duration // kill -> first poll answering Reachable=False
	recorded  time.Duration // kill -> the condition's lastTransitionTime
	reason    string
	polls     int
	start     time.Duration // lab.StartAgent: systemctl start, which waits for READY=1
	reachable time.Duration // agent start -> Reachable=True again
	restart   time.Duration // agent start -> Site Ready again
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

// waitReachable polls name until its Reachable condition has status want.
func (b *bench) waitReachable(ctx context.Context, name, want string, t0 time.Time) (api.Condition, int, error) {
	deadline := t0.Add(b.o.detectWait)
	polls := 0
	for {
		if err := sleep(ctx, b.o.poll); err != nil {
			return api.Condition{}, polls, err
		}
		c, err := b.hostReachable(ctx, name)
		polls++
		if err == nil && c.Status == want {
			return c, polls, nil
		}
		if time.Now().After(deadline) {
			return c, polls, fmt.Errorf("%s still Reachable=%q, want %s, %s after the start (last error %v)", name, c.Status, want, time.Since(t0).Round(time.Second), err)
		}
	}
}

// killRun kills compute-0's agent with SIGKILL through systemd (lab.KillAgent: the
// unit is then kept stopped, as an agent that crashed for good), polls until its
// Reachable condition is False, then starts the agent again and waits for Reachable
// and Site Ready.
func (b *bench) killRun(ctx context.Context, i int) (killResult, error) {
	var r killResult
	h := b.l.Host(target)
	if c, err := b.hostReachable(ctx, target); err != nil || c.Status != api.ConditionTrue {
		return r, fmt.Errorf("run %d: %s not Reachable before the kill: %+v %v", i+1, target, c, err)
	}
	pid, err := b.l.UnitPID(ctx, h, "plinth-agent")
	if err != nil {
		return r, err
	}
	r.pid = pid
	t0 := time.Now()
	if err := b.l.KillAgent(ctx, h); err != nil {
		return r, fmt.Errorf("run %d: %w", i+1, err)
	}
	r.killCall = time.Since(t0)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		if c, _ := readComm(pid); c == "plinth-agent" {
			return r, fmt.Errorf("run %d: agent pid %d still running after lab.KillAgent", i+1, pid)
		}
	}
	c, polls, err := b.waitReachable(ctx, target, api.ConditionFalse, t0)
	r.polls = polls
	if err != nil {
		return r, fmt.Errorf("run %d: %w", i+1, err)
	}
	r.observed = time.Since(t0)
	r.recorded = c.LastTransitionTime.Sub(t0)
	r.reason = c.Reason
	say("run %d: agent pid %d killed (KillAgent %s); Reachable=False (%s) observed after %s, recorded at +%s, %d polls",
		i+1, pid, ms(r.killCall), r.reason, ms(r.observed), ms(r.recorded), r.polls)

	t1 := time.Now()
	if err := b.l.StartAgent(ctx, h); err != nil {
		return r, fmt.Errorf("run %d: %w", i+1, err)
	}
	r.start = time.Since(t1)
	if _, _, err := b.waitReachable(ctx, target, api.ConditionTrue, t1); err != nil {
		return r, fmt.Errorf("run %d: after restarting the agent: %w", i+1, err)
	}
	r.reachable = time.Since(t1)
	if err := b.l.WaitSiteReady(ctx, b.progress(), b.o.readyWait); err != nil {
		return r, fmt.Errorf("run %d: after restarting the agent: %w", i+1, err)
	}
	r.restart = time.Since(t1)
	say("run %d: agent started (systemctl start %s); Reachable=True after %s; Site Ready again after %s", i+1, ms(r.start), ms(r.reachable), ms(r.restart))
	// Let gossip settle (the restarted member refutes its death everywhere) before the
	// next kill, so runs do not overlap.
	return r, sleep(ctx, 2*time.Second)
}
