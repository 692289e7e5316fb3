// Command scale measures a Plinth site of N hosts: a real 3-member coordinator
// cluster on loopback (the production "lan" profile, mutual TLS, fsync) and N real
// agents in this process — enrolment, identities, blocking queries, the step loop,
// pending results on disk, reports, drift checks — whose drivers and facts are
// SIMULATED (no host I/O: see sim.go). For each N it times apply → Site Ready for a
// Kubernetes site, then one manifest change touching every host and one touching a
// single host, with the leader's CPU and memory, followers' lag, the Raft log and
// snapshot sizes and blocking-query wake-ups, and prints how each grows with N. In
// the same run it times the same shape as an Ansible play and prints the ratio per
// host-step. Figures, not assertions (scripts/bench-scale.sh runs it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/host"
)

type options struct {
	bin     string
	dir     string
	sizes   []int
	ansible int
	keep    bool
	gossip  bool
	verbose bool
	timeout time.Duration
	profile int // seconds of the coordinators' CPU profiles during each size's first apply
	// profilePhase picks the apply profiled: 0 the first, 1 the change to every
	// host, 2 the change to one.
	profilePhase int
}

func main() {
	var o options
	var sizes string
	flag.StringVar(&o.bin, "bin", "", "directory holding the plinth-coordinator binary (required)")
	flag.StringVar(&o.dir, "dir", "", "parent of the scratch directory (default: system temp dir)")
	flag.StringVar(&sizes, "n", "100,300,1000", "site sizes (hosts), comma-separated")
	flag.IntVar(&o.ansible, "ansible", 200, "hosts in the Ansible comparison (0: skip)")
	flag.BoolVar(&o.verbose, "v", false, "print the first lines of each apply's plan")
	flag.BoolVar(&o.gossip, "gossip", true, "agents gossip (each a memberlist pool in this process); off, the site cannot become Ready (no host is Reachable) and each apply is timed until every step succeeded")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory and its logs")
	flag.IntVar(&o.profile, "profile", 0, "seconds of every coordinator's CPU profile taken from the start of each size's first apply (or the one -profile-phase picks), written to leader-cpu.pprof and <name>-cpu.pprof in its scratch directory, and this process's (the agents') to agents-cpu.pprof; the leader's heap once the phases are done to leader-heap.pprof (use with -keep)")
	flag.IntVar(&o.profilePhase, "profile-phase", 0, "which apply -profile covers: 0 the first, 1 the change to every host, 2 the change to one")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest wait for Site Ready per apply")
	printManifest := flag.Int("print-manifest", 0, "print the manifest of a site of this many hosts and exit")
	flag.Parse()
	if *printManifest > 0 {
		fmt.Print(manifest(*printManifest, change{one: -1}))
		return
	}
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "scale: -bin is required")
		os.Exit(2)
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 {
			fmt.Fprintf(os.Stderr, "scale: -n: %q is not a site size (at least 3 hosts)\n", s)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err := run(ctx, o)
	fmt.Printf("\ntotal time: %s\n", time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp(o.dir, "plinth-bench-scale-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("scratch directory (kept):", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	o.dir = dir
	base, err := host.Gather(ctx) // the shape the simulated facts copy
	if err != nil {
		return fmt.Errorf("facts of this machine: %w", err)
	}
	if o.gossip {
		fmt.Println("scale: 3 coordinators (profile lan) on loopback; N agents in this process (gossip included) with SIMULATED drivers and facts; apply timed to Site Ready")
	} else {
		fmt.Println("scale: 3 coordinators (profile lan) on loopback; N agents in this process WITHOUT gossip, SIMULATED drivers and facts; apply timed until every step succeeded (no host is Reachable, so the site is never Ready)")
	}
	var results []*siteResult
	for _, n := range o.sizes {
		fmt.Printf("\nN=%d: cluster, %d tokens and enrolments, agents started\n", n, n)
		r, err := runSite(ctx, o, n, base)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		results = append(results, r)
	}
	var ans time.Duration
	if o.ansible > 0 {
		fmt.Printf("\nAnsible: %d hosts x %d no-op tasks (ansible.builtin.ping), local connection, forks 25\n", o.ansible, ansibleTasks)
		if ans, err = runAnsible(ctx, dir, o.ansible); err != nil {
			fmt.Println("  skipped:", err)
		} else {
			fmt.Printf("  %s\n", ans.Round(10*time.Millisecond))
		}
	}
	printTable(results, o.ansible, ans)
	return nil
}
