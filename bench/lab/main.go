// Command lab measures a whole Plinth site on one machine, built with pkg/lab: two
// controllers and a witness running coordinators plus compute hosts, each host a
// Debian rootfs booted with systemd-nspawn on which the site bundle's install script
// installed Plinth (coordinators and agents as systemd units). It measures
//
//  0. standing the lab up: the rootfs build (cached; cold with -cold-rootfs), each
//     host's boot to `systemctl is-system-running` and its install script, and
//     `plinth-lab up`'s work until every host is enrolled and Reachable;
//  1. apply -> Site Ready: the first apply of the lab manifest onto enrolled, idle
//     agents, then re-applies that change one host's data address (one step re-runs);
//  2. idle cost: RSS and CPU of every agent (and, for context, the leader
//     coordinator) over a window in which nothing is applied, and each host's memory
//     (its memory cgroup, page cache included, and the RSS of its processes) after
//     Ready and after the window;
//  3. dead-agent detection: compute-0's agent killed with SIGKILL (and kept stopped)
//     until the coordinators record its Reachable condition as False.
//
// It prints figures and asserts nothing: the numbers depend on the machine, and the
// lab runs the "fast" timing profile (short gossip and raft timers), not the LAN one.
// Needs root (systemd-nspawn, namespaces, veth pairs, a bridge) and a site bundle.
// Usage (scripts/bench-lab.sh does all of it):
//
//	cd bench && go run ./lab -bin DIR_WITH_plinth-coordinator -bundle ../dist/plinth-bundle-V.tar
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
	bin         string        // directory holding plinth-coordinator (the CLI)
	bundle      string        // site bundle archive (or unpacked directory)
	runcWrapper string        // the lab profile's runc wrapper, or empty
	coldRootfs  bool          // also time a rootfs build into an empty cache
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
	kube        bool          // the Kubernetes run (make bench-kube) instead of the site run
	manifest    string        // the -kube run's site manifest
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "directory holding plinth-coordinator, the CLI the lab drives the site with (required)")
	flag.StringVar(&o.bundle, "bundle", "", "site bundle the hosts install from (default: the newest "+defaultBundleGlob+")")
	flag.StringVar(&o.runcWrapper, "runc-wrapper", "", "the lab profile's runc wrapper (default: BIN/runc-lab when present), as plinth-lab up")
	flag.BoolVar(&o.coldRootfs, "cold-rootfs", false, "also time a cold rootfs build (debootstrap and apt-get into an empty temporary cache: minutes, needs the Debian mirror)")
	flag.StringVar(&o.dir, "dir", "", "parent of the scratch directory (default: system temp dir)")
	flag.IntVar(&o.changeRuns, "change-runs", 5, "re-apply runs, each changing compute-0's data address")
	flag.IntVar(&o.killRuns, "kill-runs", 5, "SIGKILL runs of compute-0's agent")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "idle window for agent RSS and CPU")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "quiet time after the last apply before the idle window")
	flag.DurationVar(&o.readyWait, "ready-timeout", 180*time.Second, "give up waiting for Site Ready after this long")
	flag.DurationVar(&o.detectWait, "detect-timeout", 60*time.Second, "give up waiting for Reachable=False after this long")
	flag.DurationVar(&o.poll, "poll", 100*time.Millisecond, "Reachable poll interval")
	flag.BoolVar(&o.verbose, "v", false, "print the host x step progress table while waiting for Ready")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory and its logs (the lab itself is always taken down)")
	flag.StringVar(&o.cleanupOnly, "cleanup", "", "take down a lab recorded in this directory (lab.json), remove it, and exit")
	flag.BoolVar(&o.kube, "kube", false, "the Kubernetes run (make bench-kube): apply MANIFEST -> every node Ready per phase, memory per host, and the kubeadm floor on the same hosts; uses the demo's addresses")
	flag.StringVar(&o.manifest, "manifest", "../examples/lab/site.yaml", "the -kube run's site manifest (it declares Kubernetes)")
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
	if err := resolvePaths(&o); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(2)
	}
	// Interrupts cancel the context; every phase returns and the deferred cleanups take
	// the lab down. The booted hosts outlive this process if it is killed:
	// scripts/bench-lab.sh then runs -cleanup on the lab's record (lab.json).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	start := time.Now()
	var err error
	if o.kube {
		err = runKube(ctx, o)
	} else {
		err = run(ctx, o)
	}
	fmt.Printf("\ntotal time: %s\n", time.Since(start).Round(time.Second))
	if err != nil {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "lab: interrupted; the lab was taken down:", err)
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

// withLab makes the scratch directory and the lab, runs body, and always takes the
// lab down (printing diagnostics first when body failed).
func withLab(ctx context.Context, o options, body func(*bench) error) (err error) {
	dir, err := os.MkdirTemp(o.dir, "plinth-bench-lab-")
	if err != nil {
		return err
	}
	var b *bench
	if o.kube {
		b, err = kubeLab(ctx, o, dir)
	} else {
		b, err = newBench(ctx, o, dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	defer func() {
		// A fresh context: ctx may be cancelled already, and Down must still run.
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err != nil && ctx.Err() == nil {
			b.printDiagnostics(dctx) // before Down: it deletes the hosts and their journals
		}
		t := time.Now()
		b.l.Down(dctx)
		fmt.Printf("lab down in %s\n", time.Since(t).Round(100*time.Millisecond))
		if o.keep {
			fmt.Println("scratch directory (kept):", dir)
			return
		}
		if rerr := removeScratch(dir); rerr != nil {
			fmt.Fprintln(os.Stderr, "lab:", rerr)
		}
	}()
	if !o.kube {
		printSetup(o, b)
	}
	return body(b)
}

func run(ctx context.Context, o options) error {
	return withLab(ctx, o, func(b *bench) error { return runSite(ctx, o, b) })
}

func runSite(ctx context.Context, o options, b *bench) (err error) {
	res := &results{}

	fmt.Println("\n== 0. rootfs, boot, install: the lab up to every host enrolled")
	if res.up, err = b.up(ctx); err != nil {
		return err
	}

	fmt.Println("\n== 1. apply -> Site Ready")
	if res.first, err = b.firstApply(ctx); err != nil {
		return err
	}
	res.upToReady = res.up.reachable + res.first.observed
	if res.memReady, err = b.memory(); err != nil {
		return err
	}
	printMemory("after the first Ready", res.memReady)
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
	if res.memIdle, err = b.memory(); err != nil {
		return err
	}
	printMemory("after the idle window", res.memIdle)

	fmt.Println("\n== 3. dead-agent detection (SIGKILL compute-0's agent, unit kept stopped)")
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
