package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// results is everything measured.
type results struct {
	first   applyResult
	changes []applyResult
	idle    *idleResult
	kills   []killResult
}

// printSetup states what is being measured and how, so the figures can be read.
func printSetup(o options, b *bench) {
	var hosts []string
	for _, h := range b.spec.Hosts {
		s := fmt.Sprintf("%s (%s, .%d", h.Name, h.Role, h.Octet)
		if h.Coordinator != "" {
			s += ", coordinator " + h.Coordinator
		}
		hosts = append(hosts, s+")")
	}
	fmt.Printf(`Setup: one pkg/lab site on this machine (%d CPUs, %s/%s); prefix %s, management 10.%d.0.0/24
  hosts:  %s
          each a network namespace on bridge %sbr with a real plinth-agent; coordinators
          (2 controllers + 1 witness, all Raft voters) run in the first three namespaces.
  timing: profile "fast" everywhere - this is the lab/test profile, NOT the production
          default ("lan"). Coordinators: raft heartbeat/election 500ms, leader lease
          250ms; gossip (memberlist): probe interval 500ms, probe timeout 250ms,
          suspicion multiplier 2, gossip interval 100ms, push-pull 5s. Agents also run
          --gossip-profile fast, --facts-interval 5s, --log-level debug (as pkg/lab
          starts them); coordinators --log-level debug. The leader reconciles gossip
          into the Reachable condition on a 1s tick.
  site:   e2e lab manifest: one host.network step per host (data0: address in
          10.%d.0.0/24, MTU 9000, one route); policy drift=repair every 2s.
  1. apply -> Site Ready: the clock starts before `+"`plinth-coordinator apply -f`"+` (its
     process start and mTLS handshake included) and stops when lab.WaitSiteReady
     returns: blocking query on /v1/steps, then consistent (?consistent) reads of hosts
     and site. "recorded" is the site's Ready lastTransitionTime minus the start (no
     polling delay). First apply: after every agent is enrolled and Reachable. Then %d
     re-applies each moving %s's data address (.31 <-> .%d): one step re-runs.
  2. idle: after %s quiet, %s window: VmRSS from /proc/PID/status at start/end and
     max of 1s samples; utime+stime from /proc/PID/stat (USER_HZ=%d) -> CPU %% of one
     core. Agents and the leader coordinator (for context).
  3. dead agent: SIGKILL to %s's agent, then GET /v1/hosts/%s?consistent
     every %s until the Reachable condition is False; %d run(s), the agent restarted and the site
     Ready again between runs. "recorded" is the condition's lastTransitionTime.
  medians and percentiles: nearest-rank.
`, countCPUs(), runtime.GOOS, runtime.GOARCH, b.prefix, b.n, strings.Join(hosts, "\n          "), b.prefix, b.n+1,
		o.changeRuns, target, b.octet, o.settle, o.idle, clockTicks, target, target, o.poll, o.killRuns)
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func sortedOf[T any](xs []T, f func(T) time.Duration) []time.Duration {
	var s []time.Duration
	for _, x := range xs {
		s = append(s, f(x))
	}
	slices.Sort(s)
	return s
}

func msf(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func list(xs []time.Duration) string {
	var p []string
	for _, d := range xs {
		p = append(p, fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)))
	}
	return strings.Join(p, " ")
}

func printResults(o options, b *bench, r *results) {
	fmt.Printf("\n== results (profile \"fast\"; hosts %s; %d CPUs shared by everything)\n", hostNames(b), countCPUs())
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "metric\tvalue\truns (ms, in order)\t")

	obs := func(a applyResult) time.Duration { return a.observed }
	rec := func(a applyResult) time.Duration { return a.recorded }
	cli := func(a applyResult) time.Duration { return a.cli }
	fmt.Fprintf(tw, "first apply -> Site Ready (observed)\t%s\t\t\n", msf(r.first.observed))
	fmt.Fprintf(tw, "first apply -> Site Ready (recorded)\t%s\t\t\n", msf(r.first.recorded))
	fmt.Fprintf(tw, "first apply: CLI apply (commit)\t%s\t\t\n", msf(r.first.cli))
	co, cr, cc := sortedOf(r.changes, obs), sortedOf(r.changes, rec), sortedOf(r.changes, cli)
	var inOrder []time.Duration
	for _, c := range r.changes {
		inOrder = append(inOrder, c.observed)
	}
	fmt.Fprintf(tw, "1-address change -> Site Ready, median (observed)\t%s\t%s\t\n", msf(pct(co, 0.5)), list(inOrder))
	fmt.Fprintf(tw, "1-address change -> Site Ready, max (observed)\t%s\t\t\n", msf(pct(co, 1)))
	fmt.Fprintf(tw, "1-address change -> Site Ready, median (recorded)\t%s\t\t\n", msf(pct(cr, 0.5)))
	fmt.Fprintf(tw, "1-address change: CLI apply (commit), median\t%s\t\t\n", msf(pct(cc, 0.5)))
	failed := 0
	for _, c := range append([]applyResult{r.first}, r.changes...) {
		failed += c.failures
	}
	fmt.Fprintf(tw, "failed step attempts during applies (first + changes)\t%d\t%s\t\n", failed, attemptsInOrder(r))

	if r.idle != nil {
		var rssEnd, rssMax int64
		var cpu float64
		for _, a := range r.idle.agents {
			rssEnd += a.rssEnd
			rssMax = max(rssMax, a.rssMax)
			cpu += a.cpuPercent()
		}
		n := int64(max(len(r.idle.agents), 1))
		fmt.Fprintf(tw, "agent RSS at end of idle window, average of %d\t%s\t\t\n", n, mib(rssEnd/n))
		fmt.Fprintf(tw, "agent RSS, max of any agent in window\t%s\t\t\n", mib(rssMax))
		fmt.Fprintf(tw, "agent CPU idle, average of %d (%% of one core)\t%.2f %%\t\t\n", n, cpu/float64(n))
		fmt.Fprintf(tw, "leader coordinator RSS at end / CPU idle\t%s / %.2f %%\t\t\n", mib(r.idle.leader.rssEnd), r.idle.leader.cpuPercent())
	}

	ko := sortedOf(r.kills, func(k killResult) time.Duration { return k.observed })
	kr := sortedOf(r.kills, func(k killResult) time.Duration { return k.recorded })
	var kin []time.Duration
	for _, k := range r.kills {
		kin = append(kin, k.observed)
	}
	fmt.Fprintf(tw, "kill -9 agent -> Reachable=False, median (observed)\t%s\t%s\t\n", msf(pct(ko, 0.5)), list(kin))
	fmt.Fprintf(tw, "kill -9 agent -> Reachable=False, max (observed)\t%s\t\t\n", msf(pct(ko, 1)))
	kin = kin[:0]
	for _, k := range r.kills {
		kin = append(kin, k.recorded)
	}
	fmt.Fprintf(tw, "kill -9 agent -> Reachable=False, median (recorded)\t%s\t%s\t\n", msf(pct(kr, 0.5)), list(kin))
	fmt.Fprintf(tw, "kill -9 agent -> Reachable=False, max (recorded)\t%s\t\t\n", msf(pct(kr, 1)))
	tw.Flush()

	if r.idle != nil {
		fmt.Printf("\nidle window per process (%s, after %s quiet):\n", r.idle.agents[0].wall.Round(100*time.Millisecond), o.settle)
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "process\tpid\tcomm\tthreads\tRSS start\tRSS end\tRSS max\tVmHWM\tCPU time\tCPU %\t")
		row := func(u procUsage) {
			pid := "-"
			if u.pid > 0 {
				pid = fmt.Sprint(u.pid)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t\n", u.label, pid, u.comm, u.threads,
				mib(u.rssStart), mib(u.rssEnd), mib(u.rssMax), mib(u.hwm), msf(u.cpu), u.cpuPercent())
		}
		for _, a := range r.idle.agents {
			row(a)
		}
		var avg procUsage
		avg.label = "agents: average"
		for _, a := range r.idle.agents {
			avg.rssStart += a.rssStart
			avg.rssEnd += a.rssEnd
			avg.rssMax += a.rssMax
			avg.hwm += a.hwm
			avg.cpu += a.cpu
			avg.wall += a.wall
			avg.threads += a.threads
		}
		n := len(r.idle.agents)
		avg.rssStart /= int64(n)
		avg.rssEnd /= int64(n)
		avg.rssMax /= int64(n)
		avg.hwm /= int64(n)
		avg.cpu /= time.Duration(n)
		avg.wall /= time.Duration(n)
		avg.threads /= n
		avg.comm = "-"
		row(avg)
		row(r.idle.leader)
		tw.Flush()
		fmt.Printf("machine during the idle window: %.1f%% of %d CPUs busy (all processes, /proc/stat); loadavg %s -> %s\n",
			r.idle.machineBusy, r.idle.cpus, r.idle.loadStart, r.idle.loadEnd)
	}

	fmt.Println("\nper run:")
	for _, c := range append([]applyResult{r.first}, r.changes...) {
		fmt.Printf("  %s: observed %s, recorded %s, CLI %s; re-ran %d step(s) on [%s]; failed attempts %d\n", c.label, msf(c.observed), msf(c.recorded), msf(c.cli), c.steps, strings.Join(c.reran, ","), c.failures)
		if c.failures > 0 {
			fmt.Printf("      first failure: %s\n", c.firstErr)
		}
	}
	for i, k := range r.kills {
		fmt.Printf("  kill %d: Reachable=False (%s) observed %s, recorded %s; restart -> Site Ready %s\n", i+1, k.reason, msf(k.observed), msf(k.recorded), msf(k.restart))
	}
	fmt.Printf(`
notes: "observed" is what a client polling with consistent reads sees (poll interval and
request time included); "recorded" comes from the condition's lastTransitionTime, set
by the coordinator that proposed the change (same clock as this program). Detection
uses the "fast" gossip profile; with the default "lan" profile (probe 1s, suspicion
multiplier 4) expect it to be several times longer. A failed step attempt is retried
after the manifest's retryBaseSeconds (1s), so each one adds about a second to the apply
figures; the per-run lines give the first failure message. "restart -> Site Ready" is only the
wait between runs: lab.WaitSiteReady wakes on step changes or every 5s, so it is coarse.
`)
}

func attemptsInOrder(r *results) string {
	p := []string{fmt.Sprintf("first:%d", r.first.failures)}
	for _, c := range r.changes {
		p = append(p, fmt.Sprint(c.failures))
	}
	return strings.Join(p, " ")
}

func hostNames(b *bench) string {
	var n []string
	for _, h := range b.spec.Hosts {
		n = append(n, h.Name)
	}
	return strings.Join(n, ", ")
}
