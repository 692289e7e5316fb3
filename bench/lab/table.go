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

	"github.com/plinth-dev/plinth/pkg/nspawn"
)

// results is everything measured.
type results struct {
	up        *upResult
	upToReady time.Duration // start of the lab up -> Site Ready after the first apply
	memReady  []hostMem     // after the first Ready
	memIdle   []hostMem     // after the idle window
	first     applyResult
	changes   []applyResult
	idle      *idleResult
	kills     []killResult
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
	cold := "not measured (-cold-rootfs builds one into an empty temporary cache first)"
	if o.coldRootfs {
		cold = "measured: BuildRootfs into an empty temporary cache (PLINTH_CACHE's role), then removed"
	}
	fmt.Printf(`Setup: one pkg/lab site on this machine (%d CPUs, %s/%s); prefix %s, management 10.%d.0.0/24
  hosts:  %s
          each a Debian %s rootfs (nspawn.BuildRootfs, cached) booted with systemd-nspawn
          (systemd as PID 1), in its own network namespace on bridge %sbr and its own
          cgroup subtree. The site bundle's install.sh installed Plinth on each from
          %s
          (the bundle's .debs): plinth-coordinator units on the 2 controllers and the
          witness (all Raft voters), plinth-agent units everywhere; controller-0 also
          runs a one-node Ceph cluster (Debian's ceph-mon@, ceph-mgr@, ceph-osd@ units).
          runc wrapper: %s
  timing: profile "fast" everywhere - this is the lab/test profile, NOT the production
          default ("lan"). Coordinators (install.sh --profile fast): raft heartbeat/
          election 500ms, leader lease 250ms; gossip (memberlist): probe interval 500ms,
          probe timeout 250ms, suspicion multiplier 2, gossip interval 100ms, push-pull
          5s. Agents (/etc/plinth/agent.yaml from the lab): gossipProfile fast,
          factsInterval 5s, logLevel debug. The leader reconciles gossip into the
          Reachable condition on a 1s tick.
  site:   e2e lab manifest: one host.network step per host (data0: address in
          10.%d.0.0/24, MTU 9000, one route); policy drift=repair every 2s.
  0. up: the clock starts at nspawn.BuildRootfs (a cache lookup when cached), then
     lab.UnpackBundle into the lab directory and lab.Up (bridge, each host booted to
     `+"`systemctl is-system-running`"+` = running, Ceph on controller-0, install.sh on
     each host in turn), and stops when /v1/hosts lists every host (enrolled), then
     when every host is Reachable. Per-host boot and install times come from lab.Up's
     progress lines (boot: namespace, links, overlay mount and boot; install: tokens,
     install.sh and, on coordinator hosts, the coordinator answering with a leader).
     This is `+"`plinth-lab up`"+` without its apply, which is part 1. Cold rootfs: %s.
  1. apply -> Site Ready: the clock starts before `+"`plinth-coordinator apply -f`"+` (its
     process start and mTLS handshake included) and stops when lab.WaitSiteReady
     returns: blocking query on /v1/steps, then consistent (?consistent) reads of hosts
     and site. "recorded" is the site's Ready lastTransitionTime minus the start (no
     polling delay). First apply: after every agent is enrolled and Reachable. Then %d
     re-applies each moving %s's data address (.31 <-> .%d): one step re-runs.
  2. idle: after %s quiet, %s window: VmRSS from /proc/PID/status at start/end and
     max of 1s samples; utime+stime from /proc/PID/stat (USER_HZ=%d) -> CPU %% of one
     core. Agents and the leader coordinator (machine PIDs of the units' MainPID,
     lab.UnitPID); each host's cpuacct.usage for all its processes. Memory per host
     after the first Ready and after the window: the host's memory cgroup
     (memory.usage_in_bytes, page cache included; memory.stat's total_rss and
     total_cache) and the sum of VmRSS over its processes (shared pages in each).
  3. dead agent: lab.KillAgent on %s (systemctl kill --signal=KILL, then stop, so
     systemd does not restart it), then GET /v1/hosts/%s?consistent every %s until
     the Reachable condition is False; %d run(s). Between runs lab.StartAgent
     (systemctl start: returns at the agent's READY=1), Reachable=True, Site Ready.
     The clock starts before KillAgent; "recorded" is the condition's lastTransitionTime.
  medians and percentiles: nearest-rank.
`, countCPUs(), runtime.GOOS, runtime.GOARCH, b.prefix, b.n, strings.Join(hosts, "\n          "), nspawn.Suite, b.prefix,
		o.bundle, orNone(o.runcWrapper), b.n+1, cold,
		o.changeRuns, target, b.octet, o.settle, o.idle, clockTicks, target, target, o.poll, o.killRuns)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
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
	if u := r.up; u != nil {
		fmt.Fprintf(tw, "rootfs %s, default cache (%s)\t%s\t\t\n", u.rootfsKey, map[bool]string{true: "cached", false: "built"}[u.rootfsCached], msf(u.rootfs))
		if u.cold > 0 {
			fmt.Fprintf(tw, "rootfs cold build (empty cache), size\t%.1f s, %s\t\t\n", u.cold.Seconds(), mibBytes(uint64(u.coldSize)))
		} else {
			fmt.Fprintf(tw, "rootfs cold build\tnot measured (-cold-rootfs)\t\t\n")
		}
		fmt.Fprintf(tw, "site bundle unpack into the lab dir\t%s\t\t\n", msf(u.unpack))
		var boots, installs []time.Duration
		for _, h := range u.hosts {
			if h.boot > 0 {
				boots = append(boots, h.boot)
			}
			if h.install > 0 {
				installs = append(installs, h.install)
			}
		}
		bs, is := slices.Sorted(slices.Values(boots)), slices.Sorted(slices.Values(installs))
		fmt.Fprintf(tw, "host boot to is-system-running, median / max\t%s / %s\t%s\t\n", msf(pct(bs, 0.5)), msf(pct(bs, 1)), list(boots))
		fmt.Fprintf(tw, "install.sh per host, median / max\t%s / %s\t%s\t\n", msf(pct(is, 0.5)), msf(pct(is, 1)), list(installs))
		fmt.Fprintf(tw, "lab.Up (bridge, boots, Ceph, installs)\t%s\t\t\n", msf(u.labUp))
		fmt.Fprintf(tw, "plinth-lab up -> every host enrolled\t%s\t\t\n", msf(u.enrolled))
		fmt.Fprintf(tw, "plinth-lab up -> every agent Reachable\t%s\t\t\n", msf(u.reachable))
		fmt.Fprintf(tw, "plinth-lab up -> Site Ready (+ first apply)\t%s\t\t\n", msf(r.upToReady))
	}

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
		var hcpu float64
		for _, h := range r.idle.hosts {
			hcpu += h.cpuPercent()
		}
		fmt.Fprintf(tw, "all processes of all hosts, CPU idle (%% of one core)\t%.2f %%\t\t\n", hcpu)
	}
	for _, m := range []struct {
		when string
		ms   []hostMem
	}{{"after Ready", r.memReady}, {"after idle", r.memIdle}} {
		if len(m.ms) == 0 {
			continue
		}
		var cg uint64
		var rss int64
		var maxCg uint64
		for _, h := range m.ms {
			cg += h.cgroup
			rss += h.rssSum
			maxCg = max(maxCg, h.cgroup)
		}
		n := uint64(len(m.ms))
		fmt.Fprintf(tw, "host memory cgroup %s: average / max / all %d\t%s / %s / %s\t\t\n", m.when, n, mibBytes(cg/n), mibBytes(maxCg), mibBytes(cg))
		fmt.Fprintf(tw, "host sum of VmRSS %s: average / all\t%s / %s\t\t\n", m.when, mib(rss/int64(n)), mib(rss))
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
	ks := sortedOf(r.kills, func(k killResult) time.Duration { return k.start })
	kre := sortedOf(r.kills, func(k killResult) time.Duration { return k.reachable })
	fmt.Fprintf(tw, "agent start (systemctl start -> READY=1), median\t%s\t\t\n", msf(pct(ks, 0.5)))
	fmt.Fprintf(tw, "agent start -> Reachable=True, median\t%s\t\t\n", msf(pct(kre, 0.5)))
	tw.Flush()

	if u := r.up; u != nil && len(u.hosts) > 0 {
		fmt.Println("\nper host, standing the lab up (from lab.Up's progress lines; at = since lab.Up started):")
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "host\tboot\tbooted at\tCeph bootstrap\tinstall.sh\tmode\tinstalled at\t")
		for _, h := range u.hosts {
			ceph := "-"
			if h.ceph > 0 {
				ceph = fmt.Sprintf("%.1f s", h.ceph.Seconds())
			}
			fmt.Fprintf(tw, "%s\t%.1f s\t+%.1f s\t%s\t%.1f s\t%s\t+%.1f s\t\n", h.name, h.boot.Seconds(), h.bootAt.Seconds(), ceph, h.install.Seconds(), h.kind, h.installAt.Seconds())
		}
		tw.Flush()
	}
	if len(r.memReady) > 0 {
		fmt.Println()
		printMemory("after the first Ready", r.memReady)
	}
	if len(r.memIdle) > 0 {
		printMemory("after the idle window", r.memIdle)
	}
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
		var hs []string
		for _, h := range r.idle.hosts {
			hs = append(hs, fmt.Sprintf("%s %.2f%%", h.host, h.cpuPercent()))
		}
		fmt.Printf("CPU of all processes per host (cpuacct, %% of one core): %s\n", strings.Join(hs, ", "))
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
		fmt.Printf("  kill %d: pid %d, KillAgent %s; Reachable=False (%s) observed %s, recorded %s; StartAgent %s, Reachable=True %s, Site Ready %s\n",
			i+1, k.pid, msf(k.killCall), k.reason, msf(k.observed), msf(k.recorded), msf(k.start), msf(k.reachable), msf(k.restart))
	}
	fmt.Printf(`
notes: "observed" is what a client polling with consistent reads sees (poll interval and
request time included); "recorded" comes from the condition's lastTransitionTime, set
by the coordinator that proposed the change (same clock as this program). Detection
uses the "fast" gossip profile; with the default "lan" profile (probe 1s, suspicion
multiplier 4) expect it to be several times longer. A failed step attempt is retried
after the manifest's retryBaseSeconds (1s), so each one adds about a second to the apply
figures; the per-run lines give the first failure message. "Site Ready" after a restart is only
the wait between runs: lab.WaitSiteReady wakes on step changes or every 5s, so it is coarse.
Host memory cgroups count page cache (files read from the overlay root, journald's and
Ceph's files): it shrinks under memory pressure. Sum of VmRSS counts shared pages (shared
libraries, mapped files) once per process, so it overstates what the processes use.
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
