package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"
)

func printTable(rs []*siteResult, ansN int, ans time.Duration) {
	if len(rs) == 0 {
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Println()
	fmt.Fprint(w, "figure\t")
	for _, r := range rs {
		fmt.Fprintf(w, "N=%d\t", r.n)
	}
	if len(rs) > 1 {
		fmt.Fprintf(w, "growth %d→%d (N ×%.1f)\t", rs[0].n, rs[len(rs)-1].n, float64(rs[len(rs)-1].n)/float64(rs[0].n))
	}
	fmt.Fprintln(w)
	row := func(name string, f func(r *siteResult) float64, format string) {
		fmt.Fprintf(w, "%s\t", name)
		for _, r := range rs {
			fmt.Fprintf(w, format+"\t", f(r))
		}
		if len(rs) > 1 && f(rs[0]) > 0 {
			fmt.Fprintf(w, "×%.1f\t", f(rs[len(rs)-1])/f(rs[0]))
		}
		fmt.Fprintln(w)
	}
	row("steps", func(r *siteResult) float64 { return float64(r.steps) }, "%.0f")
	row("enrolment (s)", func(r *siteResult) float64 { return r.enrol.Seconds() }, "%.2f")
	if rs[0].gossipJoin > 0 {
		row("every agent alive in gossip (s)", func(r *siteResult) float64 { return r.gossipJoin.Seconds() }, "%.2f")
	}
	for i, p := range rs[0].phases {
		row(p.name+" (s)", func(r *siteResult) float64 { return r.phases[i].took.Seconds() }, "%.2f")
		row("  leader CPU (s)", func(r *siteResult) float64 { return r.phases[i].leaderCPU }, "%.2f")
		row("  followers' CPU (s)", func(r *siteResult) float64 { return r.phases[i].otherCPU }, "%.2f")
		row("  agents' CPU (s)", func(r *siteResult) float64 { return r.phases[i].agentCPU }, "%.2f")
		row("  raft entries", func(r *siteResult) float64 { return r.phases[i].entries }, "%.0f")
		row("  raft log written (KiB)", func(r *siteResult) float64 { return r.phases[i].logBytes / 1024 }, "%.0f")
		row("  blocking-query wake-ups", func(r *siteResult) float64 { return r.phases[i].wakeups }, "%.0f")
		row("    of which idle", func(r *siteResult) float64 { return r.phases[i].idle }, "%.0f")
		row("  API connections accepted", func(r *siteResult) float64 { return r.phases[i].conns }, "%.0f")
		row("  worst follower lag (entries)", func(r *siteResult) float64 { return r.phases[i].lag }, "%.0f")
	}
	row("per host-step, apply (ms)", func(r *siteResult) float64 { return perStep(r) * 1000 }, "%.3f")
	row("leader peak RSS (MiB)", func(r *siteResult) float64 { return float64(r.leaderPeakKB) / 1024 }, "%.0f")
	row("leader RSS at end (MiB)", func(r *siteResult) float64 { return float64(r.leaderRSSKB) / 1024 }, "%.0f")
	row("raft dir on disk (MiB)", func(r *siteResult) float64 { return float64(r.raftDirBytes) / (1 << 20) }, "%.1f")
	row("snapshot (MiB)", func(r *siteResult) float64 { return float64(r.snapBytes) / (1 << 20) }, "%.2f")
	row("harness RSS, all agents (MiB)", func(r *siteResult) float64 { return float64(r.harnessKB) / 1024 }, "%.0f")
	w.Flush()
	if ans > 0 {
		a := ans.Seconds() / float64(ansN*ansibleTasks)
		fmt.Printf("\nAnsible, %d hosts x %d tasks: %.2f s, %.3f ms per host-step\n", ansN, ansibleTasks, ans.Seconds(), a*1000)
		for _, r := range rs {
			fmt.Printf("  Plinth N=%d: %.3f ms per host-step: %.1fx faster than Ansible\n", r.n, perStep(r)*1000, a/perStep(r))
		}
	}
}

// perStep is the first apply's time per step of the site.
func perStep(r *siteResult) float64 {
	if r.steps == 0 || len(r.phases) == 0 {
		return 0
	}
	return r.phases[0].took.Seconds() / float64(r.steps)
}
