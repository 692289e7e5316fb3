// Command wakefloor is the floor under an idle agent's CPU: a Go process (one CPU,
// as the agent daemon runs) that does nothing but the packet exchange an idle
// gossip member does — a probe to its peer every -probe and the peer's ack, the
// peer's probe and its own ack, and a gossip tick every -gossip that sends nothing —
// without memberlist, encryption or encoding. bench-agent runs a pair beside the
// agents and prints one's CPU next to theirs: what is left above it is the agent's
// own work, the rest is what this machine charges a Go process for each wake-up.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "UDP address to read probes and acks on")
	peer := flag.String("peer", "", "the other process's UDP address (required)")
	probe := flag.Duration("probe", time.Second, "probe interval (an agent's in the lan profile)")
	gossip := flag.Duration("gossip", time.Second, "gossip tick (an agent's in the lan profile)")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	if err := run(*listen, *peer, *probe, *gossip); err != nil {
		fmt.Fprintln(os.Stderr, "wakefloor:", err)
		os.Exit(1)
	}
}

func run(listen, peer string, probe, gossip time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	la, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", listen, err)
	}
	pa, err := net.ResolveUDPAddr("udp", peer)
	if err != nil {
		return fmt.Errorf("peer address %q: %w", peer, err)
	}
	c, err := net.ListenUDP("udp", la)
	if err != nil {
		return err
	}
	defer c.Close()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	// A probe and an ack of about a memberlist ping's size.
	ping, ack := make([]byte, 120), make([]byte, 120)
	ping[0], ack[0] = 'p', 'a'
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 1500)
		for {
			n, from, err := c.ReadFromUDP(b)
			if err != nil {
				return
			}
			if n > 0 && b[0] == 'p' {
				_, _ = c.WriteToUDP(ack, from)
			}
		}
	}()
	pt, gt := time.NewTicker(probe), time.NewTicker(gossip)
	defer pt.Stop()
	defer gt.Stop()
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case <-pt.C:
			_, _ = c.WriteToUDP(ping, pa)
		case <-gt.C:
		}
	}
}
