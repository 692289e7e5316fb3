// Command lab measures a whole Plinth site on one machine, built with pkg/lab: two
// controllers and a witness running coordinators plus a compute host, each host a
// network namespace with a real agent. It measures
//
//  1. apply -> Site Ready: the first apply of the lab manifest onto enrolled, idle
//     agents, then re-applies that change one host's data address (one step re-runs);
//  2. idle cost: RSS and CPU of every agent (and, for context, the leader
//     coordinator) over a window in which nothing is applied;
//  3. dead-agent detection: kill -9 of compute-0's agent until the coordinators
//     record its Reachable condition as False.
//
// It prints figures and asserts nothing: the numbers depend on the machine, and the
// lab runs the "fast" timing profile (short gossip and raft timers), not the LAN one.
// Needs root (namespaces, veth pairs, a bridge). Usage (scripts/bench-lab.sh does all
// of it):
//
//	cd bench && go run ./lab -bin DIR_WITH_plinth-coordinator_AND_plinth-agent
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/lab"
)

type options struct {
	bin         string        // directory holding plinth-coordinator and plinth-agent
	dir         string        // parent of the scratch directory
	changeRuns  int           // re-apply (one changed address) runs
	killRuns    int           // dead-agent detection runs
	idle        time.Duration // idle measurement window
	settle      time.Duration // quiet time before the idle window
	readyWait   time.Duration // give up waiting for Site Ready after this long
	detectWait  time.Duration // give up waiting for Reachable=False after this long
	poll        time.Duration // Reachable poll interval
	verbose     bool          // print the host x step progress tables
	keep        bool          // keep the scratch directory (logs) for debugging
	cleanupOnly string        // remove a lab left behind in this directory, then exit
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "directory holding plinth-coordinator and plinth-agent (required)")
	flag.StringVar(&o.dir, "dir", "", "parent of the scratch directory (default: system temp dir)")
	flag.IntVar(&o.changeRuns, "change-runs", 5, "re-apply runs, each changing compute-0's data address")
	flag.IntVar(&o.killRuns, "kill-runs", 5, "kill -9 runs of compute-0's agent")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "idle window for agent RSS and CPU")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "quiet time after the last apply before the idle window")
	flag.DurationVar(&o.readyWait, "ready-timeout", 120*time.Second, "give up waiting for Site Ready after this long")
	flag.DurationVar(&o.detectWait, "detect-timeout", 60*time.Second, "give up waiting for Reachable=False after this long")
	flag.DurationVar(&o.poll, "poll", 100*time.Millisecond, "Reachable poll interval")
	flag.BoolVar(&o.verbose, "v", false, "print the host x step progress table while waiting for Ready")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory and its logs (the lab itself is always taken down)")
	flag.StringVar(&o.cleanupOnly, "cleanup", "", "take down a lab recorded in this directory (lab.json), remove it, and exit")
	flag.Parse()
	if o.cleanupOnly != "" {
		if err := lab.DownDir(context.Background(), o.cleanupOnly); err != nil {
			fmt.Fprintln(os.Stderr, "lab: cleanup:", err)
			os.Exit(1)
		}
		return
	}
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "lab: -bin is required")
		os.Exit(2)
	}
	if o.changeRuns < 1 || o.killRuns < 1 || o.idle <= 0 || o.poll <= 0 {
		fmt.Fprintln(os.Stderr, "lab: -change-runs and -kill-runs must be >= 1, -idle and -poll > 0")
		os.Exit(2)
	}
	if err := lab.CheckRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, b := range []string{"plinth-coordinator", "plinth-agent"} {
		if _, err := os.Stat(o.bin + "/" + b); err != nil {
			fmt.Fprintf(os.Stderr, "lab: -bin %s: %v\n", o.bin, err)
			os.Exit(2)
		}
	}
	// Interrupts cancel the context; every phase returns and the deferred cleanups take
	// the lab down. Children also get SIGKILL if this process dies (Pdeathsig), and
	// scripts/bench-lab.sh runs -cleanup for namespaces and links if it was killed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	start := time.Now()
	err := run(ctx, o)
	fmt.Printf("\ntotal time: %s\n", time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	dir, err := os.MkdirTemp(o.dir, "plinth-bench-lab-")
	if err != nil {
		return err
	}
	b, err := newBench(ctx, o, dir)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	defer func() {
		// A fresh context: ctx may be cancelled already, and Down must still run.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b.l.Down(dctx)
		if err != nil && ctx.Err() == nil {
			printLogTails(b.l.Dir)
		}
		if o.keep {
			fmt.Println("scratch directory (kept):", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	printSetup(o, b)

	fmt.Println("\n== 1. apply -> Site Ready")
	res := &results{}
	if err := b.up(ctx); err != nil {
		return err
	}
	if res.first, err = b.firstApply(ctx); err != nil {
		return err
	}
	for i := range o.changeRuns {
		r, err := b.changeApply(ctx, i)
		if err != nil {
			return err
		}
		res.changes = append(res.changes, r)
	}

	fmt.Printf("\n== 2. idle cost over %s\n", o.idle)
	if res.idle, err = b.idleUsage(ctx); err != nil {
		return err
	}

	fmt.Println("\n== 3. dead-agent detection (kill -9 compute-0's agent)")
	for i := range o.killRuns {
		r, err := b.killRun(ctx, i)
		if err != nil {
			return err
		}
		res.kills = append(res.kills, r)
	}
	printResults(o, b, res)
	return nil
}
