package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// printTable prints the comparison. Each row pairs a Plinth workload with the
// etcd workload closest to it; the ratio is always plinth/etcd, so for writes/s
// above 1 means Plinth is faster and for times above 1 means Plinth is slower.
func printTable(o options, p *plinthResults, e *etcdResults) {
	fmt.Printf("\n== results (3 members each; %d writers x %s; %d failover runs)\n", o.writers, o.duration, o.runs)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "metric\tplinth\tetcd\tratio (plinth/etcd)\t")
	row := func(name string, pv, ev float64, unit string) {
		ratio := "n/a"
		if ev > 0 {
			ratio = fmt.Sprintf("%.2f", pv/ev)
		}
		fmt.Fprintf(tw, "%s\t%.1f %s\t%.1f %s\t%s\t\n", name, pv, unit, ev, unit, ratio)
	}
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

	pf, ef := p.failover.sorted(), e.failover.sorted()
	row("failover: kill -9 leader -> next acked write, median", msf(pct(pf, 0.5)), msf(pct(ef, 0.5)), "ms")
	row("failover: kill -9 leader -> next acked write, p90", msf(pct(pf, 0.9)), msf(pct(ef, 0.9)), "ms")
	writes := func(label string, pw, ew writeResult) {
		row(label+": throughput", pw.perSecond(), ew.perSecond(), "writes/s")
		row(label+": latency p50", msf(pct(pw.lat, 0.5)), msf(pct(ew.lat, 0.5)), "ms")
		row(label+": latency p99", msf(pct(pw.lat, 0.99)), msf(pct(ew.lat, 0.99)), "ms")
		if pw.flushN > 0 && ew.flushN > 0 {
			fmt.Fprintf(tw, "%s\t%.2f ms\t%.2f ms\t%.2f\t\n", label+": the disk's mean flush in the window", msf(pw.flush), msf(ew.flush), msf(pw.flush)/msf(ew.flush))
		}
	}
	writes("new record (plinth POST /v1/tokens | etcd Put new key)", p.tokens, e.put)
	writes("overwrite (plinth POST /v1/agent/facts | etcd Put own key)", p.facts, e.overwrite)
	tw.Flush()

	fmt.Printf("\nerrors during write windows: plinth tokens %d, facts %d; etcd put %d, overwrite %d\n",
		p.tokens.errs, p.facts.errs, e.put.errs, e.overwrite.errs)
	fmt.Printf("failover runs (ms, killed member): plinth %s\n", runs(p.failover))
	fmt.Printf("                                   etcd   %s\n", runs(e.failover))
	fmt.Println("ratio: for writes/s above 1 means plinth is faster; for ms above 1 means plinth is slower.")
	fmt.Println("Both systems fsync every commit: where the disk's mean flush differs between a pair of windows,")
	fmt.Println("their write ratio measures the disk as much as the systems.")
}

func runs(f failoverResult) string {
	var parts []string
	for i, d := range f.times {
		parts = append(parts, fmt.Sprintf("%.0f(%s)", float64(d)/float64(time.Millisecond), f.killed[i]))
	}
	return strings.Join(parts, " ")
}
