package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// phase is what one apply cost, from the request until the site was Ready again.
type phase struct {
	name      string
	took      time.Duration
	leaderCPU float64 // seconds
	otherCPU  float64 // the other coordinators' CPU seconds, together
	agentCPU  float64 // this process's CPU seconds: every agent and the harness
	wakeups   float64 // blocking-query runs after a change, all coordinators
	idle      float64 // of those, runs that found nothing new
	lag       float64 // worst follower lag, log entries
	entries   float64 // raft entries applied in the phase
	logBytes  float64 // bytes of entries appended to the leader's raft log
	conns     float64 // API connections accepted (TLS handshakes), all coordinators
}

// siteResult is one site size's figures.
type siteResult struct {
	n, steps     int
	enrol        time.Duration
	gossipJoin   time.Duration // agents started -> the leader sees all alive (gossip on)
	phases       []phase
	leaderPeakKB int64 // VmHWM
	leaderRSSKB  int64 // VmRSS at the end
	raftDirBytes int64 // the leader's raft directory: log segments (preallocated), snapshots
	snapBytes    int64
	harnessKB    int64 // this process (every agent) VmRSS at the end
}

// runSite builds a 3-member coordinator cluster, enrols n agents, starts them with
// simulated drivers, applies the site, and measures three applies: the whole site,
// a change to every host, a change to one.
func runSite(ctx context.Context, o options, n int, base host.Facts) (*siteResult, error) {
	dir, err := os.MkdirTemp(o.dir, fmt.Sprintf("n%d-", n))
	if err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	port, err := freeBase(12)
	if err != nil {
		return nil, err
	}
	l := lab.New(filepath.Join(dir, "plinth"), o.bin, "ps")
	l.Profile = "lan" // what a real site runs
	defer l.Down(context.Background())
	c0, err := l.InitCoordinator(ctx, "c0", "", "127.0.0.1", port, "scale")
	if err != nil {
		return nil, err
	}
	c1, err := l.JoinCoordinator(ctx, "c1", "", "127.0.0.1", port+4, false)
	if err != nil {
		return nil, err
	}
	if _, err := l.JoinCoordinator(ctx, "w", "", "127.0.0.1", port+8, true); err != nil {
		return nil, err
	}
	leaderName, err := l.Leader(ctx)
	if err != nil {
		return nil, err
	}
	leader := l.Coordinator(leaderName)
	admin, err := l.NodeClient(leader)
	if err != nil {
		return nil, err
	}
	cls := map[string]*client.Client{}
	for _, c := range l.Coordinators() {
		if cls[c.Name], err = l.NodeClient(c); err != nil {
			return nil, err
		}
	}
	res := &siteResult{n: n}

	// Enrolment, as an operator does it before writing the manifest: a token per
	// host, then every agent joins (16 at a time).
	logf, err := os.Create(filepath.Join(dir, "agents.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	lvl := slog.LevelWarn
	if o.verbose {
		lvl = slog.LevelDebug
	}
	alog := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: lvl}))
	began := time.Now()
	joins := []string{c0.JoinAddr(), c1.JoinAddr()}
	if err := parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		var tok wire.TokenResponse
		if _, err := admin.Do(ctx, "POST", wire.PathTokens, wire.TokenRequest{Name: hostName(i), Role: pki.RoleAgent, TTL: time.Hour}, &tok); err != nil {
			return fmt.Errorf("token for %s: %w", hostName(i), err)
		}
		// From the host's own loopback address: the join port bounds attempts per
		// address, and all of them together (a rack enrolling at once is paced),
		// so a refused attempt is tried again, as an install script would.
		jo := agent.JoinOptions{StateDir: filepath.Join(dir, "agents", hostName(i)), Name: hostName(i), Token: tok.Token, JoinAddrs: joins, SourceIP: loopbackIP(i)}
		for try := 0; ; try++ {
			err := agent.Join(ctx, jo)
			if err == nil || try == 20 || ctx.Err() != nil {
				return err
			}
			time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		}
	}); err != nil {
		return nil, fmt.Errorf("enrol: %w", err)
	}
	res.enrol = time.Since(began)

	// The agents: real agent code, simulated drivers and facts, all in this process.
	actx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	agentErr := make(chan error, n)
	defer func() {
		stopAgents()
		wg.Wait()
	}()
	for i := range n {
		reg, err := simRegistry()
		if err != nil {
			return nil, err
		}
		facts := simFacts(base, hostName(i), mgmtAddr(i))
		cfg := agent.Config{
			Name: hostName(i), StateDir: filepath.Join(dir, "agents", hostName(i)),
			Drivers: reg, Logger: alog.With("agent", hostName(i)),
			Gather:   func(context.Context) (host.Facts, error) { return facts, nil },
			NoGossip: !o.gossip,
		}
		if o.gossip {
			// Each agent gossips from its own loopback address, as hosts would.
			cfg.GossipAddr = net.JoinHostPort(loopbackIP(i).String(), "7444")
		}
		wg.Go(func() {
			if err := agent.Run(actx, cfg); err != nil && actx.Err() == nil {
				agentErr <- fmt.Errorf("agent %s: %w", cfg.Name, err)
			}
		})
	}

	pid := leader.Proc.Pid()
	measure := func(name string, doc string) error {
		lag := startLag(ctx, leader.Name, cls)
		m0 := sumMetrics(ctx, cls)
		m0cmd, _ := metrics(ctx, cls[leader.Name])
		cpu0, _ := cpuSeconds(pid)
		other0, self0 := othersCPU(l, pid), selfCPU()
		var profiled chan struct{}
		if o.profile > 0 && len(res.phases) == o.profilePhase {
			profiled = make(chan struct{})
			go func() {
				defer close(profiled)
				var pwg sync.WaitGroup
				for name, cl := range cls {
					file := name + "-cpu.pprof"
					if name == leader.Name {
						file = "leader-cpu.pprof"
					}
					pwg.Go(func() {
						if err := coordinatorProfile(ctx, cl, "cpu", filepath.Join(dir, file), o.profile); err != nil {
							fmt.Printf("    %s profile: %v\n", name, err)
						}
					})
				}
				pwg.Go(func() {
					path := filepath.Join(dir, "agents-cpu.pprof")
					if err := selfProfile(ctx, path, o.profile); err != nil {
						fmt.Printf("    agents' profile: %v\n", err)
					}
				})
				pwg.Wait()
			}()
		}
		start := time.Now()
		var resp wire.ApplyResponse
		if _, err := admin.Do(ctx, "POST", wire.PathApply, wire.ApplyRequest{File: "scale.yaml", YAML: doc}, &resp); err != nil {
			lag.finish()
			return fmt.Errorf("%s: apply: %w", name, err)
		}
		answered := time.Since(start)
		if o.verbose {
			var steps []plan.Record
			var site *state.SiteRecord
			_, _ = admin.Do(ctx, "GET", wire.PathSteps+"?consistent", nil, &steps)
			_, _ = admin.Do(ctx, "GET", wire.PathSite+"?consistent", nil, &site)
			by := map[plan.State]int{}
			for _, st := range steps {
				by[st.State]++
			}
			fmt.Printf("    right after the apply: steps %v; site %+v\n", by, plan.Find(site.Site.Status.Conditions, api.ConditionReady))
		}
		var err error
		if o.gossip {
			err = waitReady(ctx, admin, agentErr, o.timeout)
		} else {
			err = waitSteps(ctx, admin, agentErr, o.timeout)
		}
		took := time.Since(start)
		cpu1, _ := cpuSeconds(pid)
		other1, self1 := othersCPU(l, pid), selfCPU()
		worst := lag.finish()
		m1 := sumMetrics(ctx, cls)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if o.verbose {
			printCommands(ctx, cls[leader.Name], m0cmd)
			for name, cl := range cls {
				m, _ := metrics(ctx, cl)
				fmt.Printf("      %s: queries %.0f wake-ups %.0f idle %.0f API connections %.0f\n", name, m["plinth_blocking_queries_total"], m["plinth_blocking_query_wakeups_total"], m["plinth_blocking_query_idle_wakeups_total"], m[apiConns])
			}
		}
		res.phases = append(res.phases, phase{
			name: name, took: took, leaderCPU: cpu1 - cpu0, lag: worst,
			otherCPU: other1 - other0, agentCPU: self1 - self0,
			wakeups:  m1["plinth_blocking_query_wakeups_total"] - m0["plinth_blocking_query_wakeups_total"],
			idle:     m1["plinth_blocking_query_idle_wakeups_total"] - m0["plinth_blocking_query_idle_wakeups_total"],
			entries:  m1["leader_index"] - m0["leader_index"],
			logBytes: m1[logBytes] - m0[logBytes],
			conns:    m1[apiConns] - m0[apiConns],
		})
		if profiled != nil {
			<-profiled
		}
		fmt.Printf("  N=%d %-22s %8s  leader CPU %.1f s  (apply answered in %s, %d plan lines)\n", n, name, took.Round(10*time.Millisecond), cpu1-cpu0, answered.Round(10*time.Millisecond), len(resp.Plan))
		if o.verbose {
			for _, l := range resp.Plan[:min(len(resp.Plan), 12)] {
				fmt.Println("     ", l)
			}
		}
		return nil
	}
	// Let every agent fetch its (empty) steps, report facts and join gossip first,
	// as they would have long before an operator writes the manifest.
	if o.gossip {
		t0 := time.Now()
		if err := waitGossip(ctx, cls[leader.Name], agentErr, n, o.timeout); err != nil {
			return nil, err
		}
		res.gossipJoin = time.Since(t0)
		fmt.Printf("  N=%d every agent alive in the leader's gossip %s after they started\n", n, res.gossipJoin.Round(10*time.Millisecond))
	} else if err := waitNeverSeen(ctx, cls[leader.Name], agentErr, n, o.timeout); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second)
	first := "apply -> Site Ready"
	if !o.gossip {
		first = "apply -> steps done"
	}
	if err := measure(first, manifest(n, change{one: -1})); err != nil {
		return nil, err
	}
	if err := measure("change every host", manifest(n, change{all: true, one: -1})); err != nil {
		return nil, err
	}
	if err := measure("change one host", manifest(n, change{all: true, one: n - 1})); err != nil {
		return nil, err
	}

	var steps []plan.Record
	if _, err := admin.Do(ctx, "GET", wire.PathSteps, nil, &steps); err != nil {
		return nil, err
	}
	res.steps = len(steps)
	if o.profile > 0 {
		// What the leader holds once every phase is done: its RSS below.
		if err := coordinatorProfile(ctx, cls[leader.Name], "heap", filepath.Join(dir, "leader-heap.pprof"), 0); err != nil {
			fmt.Printf("    leader heap profile: %v\n", err)
		}
	}
	res.leaderPeakKB, _ = memKB(pid, "VmHWM")
	res.leaderRSSKB, _ = memKB(pid, "VmRSS")
	res.harnessKB, _ = memKB(os.Getpid(), "VmRSS")
	res.raftDirBytes = dirBytes(filepath.Join(leader.DataDir, "raft"))
	if res.snapBytes, err = snapshotBytes(ctx, admin); err != nil {
		return nil, err
	}
	return res, nil
}

// selfProfile writes this process's CPU profile (the agents') of the next secs
// seconds to path.
func selfProfile(ctx context.Context, path string, secs int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	select {
	case <-time.After(time.Duration(secs) * time.Second):
	case <-ctx.Done():
	}
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("    CPU profile (%ds): %s\n", secs, path)
	return nil
}

// coordinatorProfile writes a coordinator's runtime profile name (cpu for secs
// seconds; heap and the others as they stand) to path.
func coordinatorProfile(ctx context.Context, cl *client.Client, name, path string, secs int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = cl.Do(ctx, "GET", wire.ProfilePath(name, secs), nil, io.Writer(f))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil && name == "cpu":
		fmt.Printf("    CPU profile (%ds): %s\n", secs, path)
	case err == nil:
		fmt.Printf("    %s profile: %s\n", name, path)
	}
	return err
}

// othersCPU is the CPU seconds of every coordinator but the leader (pid).
func othersCPU(l *lab.Lab, pid int) float64 {
	var sum float64
	for _, c := range l.Coordinators() {
		if c.Proc != nil && c.Proc.Pid() != pid {
			s, _ := cpuSeconds(c.Proc.Pid())
			sum += s
		}
	}
	return sum
}

func selfCPU() float64 {
	s, _ := cpuSeconds(os.Getpid())
	return s
}

const (
	apiConns = `plinth_connections_accepted_total{listener="api"}`
	logBytes = "plinth_raft_log_bytes_written_total"
)

// sumMetrics adds the blocking-query counters of every coordinator and keeps the
// highest applied index (the leader's) as leader_index, and the most bytes any
// raft log took (the leader's: every member appends the same entries).
func sumMetrics(ctx context.Context, cls map[string]*client.Client) map[string]float64 {
	out := map[string]float64{}
	for _, cl := range cls {
		m, err := metrics(ctx, cl)
		if err != nil {
			continue
		}
		out["plinth_blocking_query_wakeups_total"] += m["plinth_blocking_query_wakeups_total"]
		out["plinth_blocking_query_idle_wakeups_total"] += m["plinth_blocking_query_idle_wakeups_total"]
		out[apiConns] += m[apiConns]
		out["leader_index"] = max(out["leader_index"], m["plinth_raft_applied_index"])
		out[logBytes] = max(out[logBytes], m[logBytes])
	}
	return out
}

// pollAgents asks check every interval until it is done, an agent fails or timeout
// passes; what check last said (progress) ends the timeout's error, after what.
func pollAgents(ctx context.Context, agentErr <-chan error, timeout, every time.Duration, what string, check func(ctx context.Context) (done bool, progress string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		select {
		case err := <-agentErr:
			return err
		default:
		}
		done, progress := check(ctx)
		if done {
			return nil
		}
		if progress != "" {
			last = progress
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s within %s; last: %s", what, timeout, last)
		case <-time.After(every):
		}
	}
}

// waitReady polls the site's Ready condition until it is True.
func waitReady(ctx context.Context, admin *client.Client, agentErr <-chan error, timeout time.Duration) error {
	return pollAgents(ctx, agentErr, timeout, 100*time.Millisecond, "site not Ready", func(ctx context.Context) (bool, string) {
		var site *state.SiteRecord
		if _, err := admin.Do(ctx, "GET", wire.PathSite+"?consistent", nil, &site); err != nil || site == nil {
			return false, ""
		}
		r := plan.Find(site.Site.Status.Conditions, api.ConditionReady)
		if r == nil {
			return false, ""
		}
		return r.Status == api.ConditionTrue, r.Reason + ": " + clip(r.Message, 300)
	})
}

// waitGossip polls the leader's plinth_gossip_members until it sees n agents alive.
func waitGossip(ctx context.Context, leader *client.Client, agentErr <-chan error, n int, timeout time.Duration) error {
	return pollAgents(ctx, agentErr, timeout, 250*time.Millisecond, "the leader's gossip did not see every agent alive", func(ctx context.Context) (bool, string) {
		m, err := metrics(ctx, leader)
		if err != nil {
			return false, ""
		}
		seen := m[`plinth_gossip_members{role="agent",state="alive"}`]
		return int(seen) >= n, fmt.Sprintf("%.0f of %d agents alive", seen, n)
	})
}

// waitNeverSeen waits, without gossip, until the leader has recorded every host as
// never seen (its grace period after taking the lead is 15 s): otherwise those
// n commands land inside a timed phase at the sizes whose enrolment takes longer
// than the grace, and the figures grow faster than the site.
func waitNeverSeen(ctx context.Context, leader *client.Client, agentErr <-chan error, n int, timeout time.Duration) error {
	const key = `plinth_fsm_apply_seconds_count{command="SetReachable",result="ok"}`
	return pollAgents(ctx, agentErr, timeout, 250*time.Millisecond, "the leader did not record every host as never seen", func(ctx context.Context) (bool, string) {
		m, err := metrics(ctx, leader)
		if err != nil {
			return false, ""
		}
		return int(m[key]) >= n, fmt.Sprintf("%.0f of %d hosts recorded unreachable", m[key], n)
	})
}

// waitSteps polls the leader's step counts (its metrics, 10 per second) until
// every step has succeeded.
func waitSteps(ctx context.Context, admin *client.Client, agentErr <-chan error, timeout time.Duration) error {
	states := []string{"Pending", "Ready", "Running", "Succeeded", "Failed", "Blocked"}
	return pollAgents(ctx, agentErr, timeout, 100*time.Millisecond, "steps not all done", func(ctx context.Context) (bool, string) {
		m, err := metrics(ctx, admin)
		if err != nil {
			return false, ""
		}
		total := 0.0
		for _, st := range states {
			total += m[`plinth_steps{state="`+st+`"}`]
		}
		ok := m[`plinth_steps{state="Succeeded"}`]
		return total > 0 && ok == total, fmt.Sprintf("%.0f of %.0f steps succeeded", ok, total)
	})
}

// parallel runs f for 0..n-1, at most width at once, and returns the first error.
func parallel(ctx context.Context, n, width int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// freeBase finds n consecutive free loopback ports (TCP and UDP) below the
// ephemeral range, for a coordinator cluster's listeners.
func freeBase(n int) (int, error) {
	for range 500 {
		base := 20000 + rand.IntN(12000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			addr := fmt.Sprintf("127.0.0.1:%d", p)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				ok = false
				break
			}
			l.Close()
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no free port range")
}

// printCommands prints how many commands of each type the leader applied, and how
// many API requests of each route it answered, since before.
func printCommands(ctx context.Context, cl *client.Client, before map[string]float64) {
	now, err := metrics(ctx, cl)
	if err != nil {
		return
	}
	for _, prefix := range []string{"plinth_fsm_apply_seconds_count", "plinth_api_request_seconds_count"} {
		for k, v := range now {
			if strings.HasPrefix(k, prefix+"{") && v-before[k] > 0 {
				fmt.Printf("      %6.0f %s %s\n", v-before[k], strings.TrimPrefix(prefix, "plinth_")[:3], strings.TrimPrefix(k, prefix))
			}
		}
	}
}

// loopbackIP is host i's own address on this machine (127/8 is all local): it
// gossips and enrols from it.
func loopbackIP(i int) net.IP { return net.IPv4(127, 77, byte(i/250), byte(1+i%250)) }
