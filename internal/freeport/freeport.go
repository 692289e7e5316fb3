// Package freeport hands tests loopback addresses nobody listens on. The kernel
// may give a port it just handed out (and whose listener was closed) to the next
// caller again, so two addresses asked for in one test could collide: a port is
// never handed out twice in one process, and it is free for TCP and UDP both
// (memberlist binds one port for each).
package freeport

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

var (
	mu   sync.Mutex
	used = map[int]bool{}
)

// Addr returns "127.0.0.1:port" for a port free for TCP and UDP that no earlier
// call in this process returned.
func Addr(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("freeport: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, uerr := net.ListenPacket("udp", ln.Addr().String())
		ln.Close()
		if uerr != nil {
			continue
		}
		pc.Close()
		if used[port] {
			continue
		}
		used[port] = true
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	t.Fatal("freeport: no free loopback port in 100 tries")
	return ""
}
