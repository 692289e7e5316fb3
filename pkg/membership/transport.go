package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
)

const (
	// maxPacket is the largest UDP payload; memberlist's own packets stay under
	// its UDPBufferSize (1400 bytes), but a peer may send up to this.
	maxPacket = 65536
	// udpRecvBuf is the socket receive buffer asked for (memberlist's size), halved
	// until the kernel accepts it.
	udpRecvBuf = 2 * 1024 * 1024
	// bindTries is how often a port-0 bind is tried when the TCP port the kernel
	// picked is taken for UDP.
	bindTries = 10
)

// transport is memberlist's packet and stream transport over one UDP and one TCP
// socket sharing a port, as memberlist's NetTransport, except that it reads every
// packet into one reused buffer and hands memberlist a copy of just its bytes.
// NetTransport allocates a fresh 64 KiB buffer per packet: on an idle agent, a few
// packets a second, that large allocation, its zeroing and page faults were about a
// sixth of the process's CPU.
type transport struct {
	log      *slog.Logger
	bindIP   net.IP
	tcp      *net.TCPListener
	udp      *net.UDPConn
	packets  chan *memberlist.Packet
	streams  chan net.Conn
	done     chan struct{} // closed by Shutdown: nobody may be reading the channels
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// newTransport listens on ip:port for TCP and UDP (port 0: one the kernel picks
// that is free for both) and starts reading them.
func newTransport(ip string, port int, log *slog.Logger) (*transport, error) {
	bindIP := net.ParseIP(ip)
	if bindIP == nil {
		return nil, fmt.Errorf("bind address %q is not an IP address", ip)
	}
	t := &transport{
		log:     log,
		bindIP:  bindIP,
		packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn),
		done:    make(chan struct{}),
	}
	var err error
	for range bindTries {
		if err = t.listen(port); err == nil || port != 0 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	t.wg.Add(2)
	go t.acceptStreams()
	go t.readPackets()
	return t, nil
}

func (t *transport) listen(port int) error {
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: t.bindIP, Port: port})
	if err != nil {
		return fmt.Errorf("listen on TCP %s: %w", net.JoinHostPort(t.bindIP.String(), fmt.Sprint(port)), err)
	}
	port = tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: t.bindIP, Port: port})
	if err != nil {
		tcp.Close()
		return fmt.Errorf("listen on UDP %s: %w", net.JoinHostPort(t.bindIP.String(), fmt.Sprint(port)), err)
	}
	for size := udpRecvBuf; ; size /= 2 {
		if err = udp.SetReadBuffer(size); err == nil {
			break
		}
		if size <= 1 {
			tcp.Close()
			udp.Close()
			return fmt.Errorf("UDP receive buffer: %w", err)
		}
	}
	t.tcp, t.udp = tcp, udp
	return nil
}

// port is the port both sockets are bound to.
func (t *transport) port() int { return t.tcp.Addr().(*net.TCPAddr).Port }

// FinalAdvertiseAddr is the address given, or else the bound one (a private
// address of this host when bound to every address).
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		addr := net.ParseIP(ip)
		if addr == nil {
			return nil, 0, fmt.Errorf("advertise address %q is not an IP address", ip)
		}
		if v4 := addr.To4(); v4 != nil {
			addr = v4
		}
		return addr, port, nil
	}
	addr := t.bindIP
	if addr.IsUnspecified() {
		private, err := sockaddr.GetPrivateIP()
		if err != nil {
			return nil, 0, fmt.Errorf("find a private address to advertise: %w", err)
		}
		if addr = net.ParseIP(private); addr == nil {
			return nil, 0, errors.New("no private address to advertise: give one")
		}
	}
	if v4 := addr.To4(); v4 != nil {
		addr = v4
	}
	return addr, t.port(), nil
}

func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	to, err := net.ResolveUDPAddr("udp", a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, to)
	return time.Now(), err
}

func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", a.Addr)
}

func (t *transport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown closes both sockets and waits for the readers to stop; a packet or
// connection nobody takes any more is dropped.
func (t *transport) Shutdown() error {
	t.stopOnce.Do(func() {
		close(t.done)
		t.tcp.Close()
		t.udp.Close()
	})
	t.wg.Wait()
	return nil
}

// closed reports whether Shutdown has begun.
func (t *transport) closed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// acceptStreams hands incoming TCP connections to memberlist, backing off on
// errors (e.g. out of file descriptors) until shut down.
func (t *transport) acceptStreams() {
	defer t.wg.Done()
	const minDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.closed() {
				return
			}
			delay = min(max(2*delay, minDelay), maxDelay)
			t.log.Warn("gossip: accept TCP connection", "err", err, "retryIn", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		select {
		case t.streams <- conn:
		case <-t.done:
			conn.Close()
			return
		}
	}
}

// readPackets hands each UDP packet to memberlist as a copy of its bytes: the
// read buffer is reused, and memberlist may keep a packet after the next read.
func (t *transport) readPackets() {
	defer t.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		at := time.Now()
		if err != nil {
			if t.closed() {
				return
			}
			t.log.Warn("gossip: read UDP packet", "err", err)
			continue
		}
		if n == 0 {
			continue // memberlist needs at least the message type
		}
		select {
		case t.packets <- &memberlist.Packet{Buf: append([]byte(nil), buf[:n]...), From: from, Timestamp: at}:
		case <-t.done:
			return
		}
	}
}
