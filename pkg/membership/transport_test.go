package membership

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/plinth-dev/plinth/internal/poll"
)

// Port 0 binds TCP and UDP to one port the kernel picked, and that port is what
// the transport advertises.
func TestTransportSharesOnePort(t *testing.T) {
	tr, err := newTransport("127.0.0.1", 0, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	port := tr.port()
	if got := tr.udp.LocalAddr().(*net.UDPAddr).Port; port == 0 || got != port {
		t.Fatalf("TCP port %d, UDP port %d: want one non-zero port", port, got)
	}
	ip, adv, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) || adv != port {
		t.Fatalf("advertise %v:%d, %v; want 127.0.0.1:%d", ip, adv, err, port)
	}
	if _, _, err := tr.FinalAdvertiseAddr("not-an-ip", 1); err == nil {
		t.Fatal("advertise address not-an-ip accepted")
	}
	if _, err := newTransport("127.0.0.1", port, testLogger()); err == nil {
		t.Fatalf("a second transport bound port %d too", port)
	}
}

// Each packet handed to memberlist is its own copy: reading the next one into the
// reused buffer must not change a packet memberlist still holds.
func TestTransportPacketsAreCopies(t *testing.T) {
	tr, err := newTransport("127.0.0.1", 0, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	conn, err := net.Dial("udp", tr.udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := [][]byte{[]byte("first packet"), []byte("2nd")}
	var got []*memberlist.Packet
	for _, b := range want {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-tr.PacketCh():
			got = append(got, p)
		case <-time.After(5 * time.Second):
			t.Fatalf("packet %q not received", b)
		}
	}
	for i, p := range got {
		if !bytes.Equal(p.Buf, want[i]) || cap(p.Buf) > len(want[i])+8 {
			t.Errorf("packet %d: %q (cap %d), want %q in a buffer of its size", i, p.Buf, cap(p.Buf), want[i])
		}
		if p.From.String() != conn.LocalAddr().String() || p.Timestamp.IsZero() {
			t.Errorf("packet %d from %v at %v", i, p.From, p.Timestamp)
		}
	}

	// Streams: a dialled connection arrives on StreamCh.
	c, err := tr.DialTimeout(tr.tcp.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case s := <-tr.StreamCh():
		go c.Write([]byte("x"))
		b := make([]byte, 1)
		if _, err := io.ReadFull(s, b); err != nil || b[0] != 'x' {
			t.Errorf("stream read %q, %v", b, err)
		}
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("stream not accepted")
	}
}

// A member of an older Plinth, whose memberlist compresses what it sends and uses
// memberlist's own transport, still joins and stays alive in a pool of members that
// send uncompressed.
func TestCompressingPeerInteroperates(t *testing.T) {
	key := newKey(t)
	a := start(t, "a", RoleCoordinator, key)
	mc, err := memberlistConfig(Config{Name: "old", Role: RoleAgent, BindAddr: "127.0.0.1:0", Key: key, Logger: testLogger(), Profile: ProfileFast}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	mc.EnableCompression = true
	mc.Delegate = &delegate{p: &Pool{name: "old", role: RoleAgent}}
	old, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Shutdown()
	if _, err := old.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "a and the old member see each other", func() bool {
		return allAlive(a.Pool, "old") && old.NumMembers() == 2
	})
	// A few probe rounds each way, then both are still alive to each other.
	time.Sleep(2 * time.Second)
	if !allAlive(a.Pool, "old") || old.NumMembers() != 2 {
		t.Fatalf("after probes: a sees %v; old sees %d members", a.Members(), old.NumMembers())
	}
	for _, n := range old.Members() {
		if n.State != memberlist.StateAlive {
			t.Fatalf("old sees %s as %v", n.Name, n.State)
		}
	}
}

// Shutdown returns while a packet and a connection wait for a reader that is gone
// (memberlist failed to start after the transport did), and may be called again.
func TestTransportShutdownWithNobodyReading(t *testing.T) {
	tr, err := newTransport("127.0.0.1", 0, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", tr.udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", tr.tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // both readers now wait to hand them over
	done := make(chan struct{})
	go func() {
		tr.Shutdown()
		tr.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown hangs while nobody reads the packet and stream channels")
	}
}
