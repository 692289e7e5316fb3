// Command consensus measures Plinth's coordinator cluster against a 3-member etcd
// cluster on the same machine, in the same run: how long a kill -9 of the leader
// keeps writes from being acknowledged, and write throughput and latency with many
// concurrent writers. It prints figures and asserts nothing: the numbers depend on
// the machine, and the load generator shares its cores with the servers.
//
// Both systems run as real processes on loopback, with mutual TLS between members
// and towards clients, and with fsync on (raft-wal fsyncs every log batch, so etcd
// keeps its default WAL fsync). Usage (scripts/bench-consensus.sh does all of it):
//
//	cd bench && go run ./consensus -bin DIR_WITH_plinth-coordinator -etcd /usr/bin/etcd
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	bin      string        // directory holding plinth-coordinator
	etcd     string        // etcd server binary
	dir      string        // parent of the scratch directory
	runs     int           // failover runs per system
	writers  int           // concurrent writers
	duration time.Duration // measured write window
	warmup   time.Duration // unmeasured writes before each window
	value    int           // etcd value size, about one token record
	keep     bool          // keep the scratch directory (logs) for debugging
	profile  bool          // write the Plinth leader's CPU profile of each write window
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "directory holding the plinth-coordinator binary (required)")
	flag.StringVar(&o.etcd, "etcd", "/usr/bin/etcd", "etcd server binary")
	flag.StringVar(&o.dir, "dir", "", "parent of the scratch directory (default: system temp dir)")
	flag.IntVar(&o.runs, "runs", 10, "leader kill runs per system")
	flag.IntVar(&o.writers, "writers", 64, "concurrent writers")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured write window per workload")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured writes before each window (connections, caches)")
	flag.IntVar(&o.value, "value-size", 200, "bytes per etcd value (about a token record)")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory and its logs")
	flag.BoolVar(&o.profile, "profile", false, "write the Plinth leader's CPU profile of each write window to the scratch directory (with -keep: go tool pprof -top DIR/plinth-*-cpu.pprof)")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "consensus: -bin is required")
		os.Exit(2)
	}
	// Interrupts cancel the context; every phase returns and the deferred cleanups
	// kill what was started. Children also get SIGKILL if this process dies (Pdeathsig).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err := run(ctx, o)
	fmt.Printf("\ntotal time: %s\n", time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "consensus:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp(o.dir, "plinth-bench-consensus-")
	if err != nil {
		return err
	}
	scratchDisk = diskOf(dir)
	if o.keep {
		fmt.Println("scratch directory (kept):", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	printSetup(o)

	// One system at a time, so they never compete for the two cores.
	fmt.Println("\n== plinth")
	pr, err := benchPlinth(ctx, o, dir)
	if err != nil {
		return fmt.Errorf("plinth: %w", err)
	}
	fmt.Println("\n== etcd")
	er, err := benchEtcd(ctx, o, dir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	printTable(o, pr, er)
	return nil
}

// printSetup states the configurations being compared, so the figures can be read.
func printSetup(o options) {
	fmt.Printf(`Setup (both systems on 127.0.0.1, 3 members, one process each, same disk, fsync on):
  plinth: 2 controllers + 1 witness (all Raft voters), hashicorp/raft, profile "fast":
          HeartbeatTimeout 500ms, ElectionTimeout 500ms, LeaderLeaseTimeout 250ms,
          CommitTimeout 50ms (raft default), pre-vote on (raft 1.7 default);
          raft-wal log store (fsync per batch); mTLS (TLS 1.3, ECDSA P-256) for Raft and
          the HTTPS JSON API.
  etcd:   %s, 3 voting members, flags %s
          (heartbeat 50ms = raft's HeartbeatTimeout/10, the rate a hashicorp/raft leader
          heartbeats at; election timeout 500ms as Plinth's; pre-vote as raft 1.7),
          WAL fsync on (default); mTLS (ECDSA P-256 certs made by this program) for
          peers and clients; Go client go.etcd.io/etcd/client/v3 v3.5 (gRPC).
  writers: %d concurrent for %s after %s warm-up, each request waits for its answer;
          etcd values %d bytes. Steady-state writes go to the leader's API directly for
          both systems (no follower forwarding). Failover probes use every member.
  failover: %d runs per system: kill -9 the leader, then start a write every 50ms
          through a client that knows all members until one is acknowledged; the
          figure is kill -> first acknowledgement. The killed member is then restarted
          and the next run waits until all members agree on the leader and index.
  percentiles: nearest-rank.
`, etcdVersion(o.etcd), strings.Join(etcdTiming, " "), o.writers, o.duration, o.warmup, o.value, o.runs)
}
