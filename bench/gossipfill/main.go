// Command gossipfill fills a gossip pool up to a site's size for bench-agent: -n
// members (agent role, the given profile) in this one process, joined through
// -seed with the pool's key. Probes are spread over the members of a pool, so an
// agent measured among three members (a coordinator and two agents) is pinged far
// more often than one among fifty; with the filler it is pinged as on a site of
// that size. The pool's key is the one an enrolled agent holds (-state-dir). Their
// names start with "fill:", which the coordinators ignore (they read only
// "agent:<host>"). It runs until SIGTERM or interrupt.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/membership"
)

func main() {
	n := flag.Int("n", 47, "members to start")
	stateDir := flag.String("state-dir", "", "an enrolled agent's state directory, for the pool's gossip key (required)")
	seed := flag.String("seed", "", "a member's gossip address to join through (required)")
	bind := flag.String("bind", "127.0.0.1", "IP the members bind to (each on its own port)")
	profile := flag.String("profile", membership.ProfileLAN, "timing profile")
	flag.Parse()
	if err := run(*n, *stateDir, *seed, *bind, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "gossipfill:", err)
		os.Exit(1)
	}
}

func run(n int, stateDir, seed, bind, profile string) error {
	if stateDir == "" || seed == "" {
		return fmt.Errorf("-state-dir and -seed are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The agent saves the key once it has joined; wait for it a while.
	deadline := time.Now().Add(30 * time.Second)
	key, err := agent.LoadGossipKey(stateDir)
	for ; err == nil && key == nil; key, err = agent.LoadGossipKey(stateDir) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no gossip key in %s after 30 s: has the agent joined?", stateDir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pools := make([]*membership.Pool, 0, n)
	defer func() {
		for _, p := range pools {
			_ = p.Close()
		}
	}()
	for i := range n {
		p, err := membership.Start(ctx, membership.Config{
			Name: fmt.Sprintf("fill:%02d", i), Role: membership.RoleAgent, BindAddr: bind + ":0",
			Key: key, Seeds: []string{seed}, Logger: log, Profile: profile,
		})
		if err != nil {
			return fmt.Errorf("member %d: %w", i, err)
		}
		pools = append(pools, p)
		go func() { // nobody reads the events; Close ends the channel
			for range p.Events() {
			}
		}()
	}
	// Ready once the last member sees the others and the seed.
	for ctx.Err() == nil && len(pools[len(pools)-1].Members()) < n+1 {
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("gossipfill: %d members joined\n", n)
	<-ctx.Done()
	return nil
}
