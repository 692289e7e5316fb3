package consensus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

const (
	handshakeTimeout  = 10 * time.Second
	maxPendingAccepts = 64
)

// advertiseAddr is a net.Addr that keeps the advertised host as given.
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// streamLayer is a raft.StreamLayer over mutually authenticated TLS. It
// handshakes accepted connections off raft's accept loop, so a slow or hostile
// peer cannot stall it, and it closes every connection it handed out on Close.
type streamLayer struct {
	ln     net.Listener
	addr   net.Addr
	tls    *tls.Config
	verify func(*x509.Certificate) error
	gone   func(peer string) // an accepted connection ended without our Close
	log    *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	connCh chan net.Conn
	sem    chan struct{} // bounds concurrent inbound handshakes
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
	once   sync.Once
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// newStreamLayer listens on bind and starts the accept loop. advertise may be
// empty (use the listener's address). gone (may be nil) learns of every accepted
// connection that ended without this side closing it, by the peer's raft ID (its
// certificate's common name); it must not block.
func newStreamLayer(bind, advertise string, cfg *tls.Config, verify func(*x509.Certificate) error, gone func(peer string), log *slog.Logger) (*streamLayer, error) {
	ln, err := tls.Listen("tcp", bind, cfg)
	if err != nil {
		return nil, fmt.Errorf("consensus: listen on %s: %w", bind, err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
		if err := checkAdvertisable(advertise); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("%w (set AdvertiseAddr)", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &streamLayer{
		ln:     ln,
		addr:   advertiseAddr(advertise),
		tls:    cfg,
		verify: verify,
		gone:   gone,
		log:    log,
		ctx:    ctx,
		cancel: cancel,
		connCh: make(chan net.Conn),
		sem:    make(chan struct{}, maxPendingAccepts),
		conns:  make(map[*trackedConn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// acceptLoop accepts raw connections and hands each to a handshake goroutine.
func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("consensus: accept failed", "error", err, "retry_in", delay)
			select {
			case <-time.After(delay):
				continue
			case <-s.ctx.Done():
				return
			}
		}
		delay = 0
		select {
		case s.sem <- struct{}{}:
		default:
			s.log.Warn("consensus: too many pending TLS handshakes, dropping connection", "remote", c.RemoteAddr().String())
			_ = c.Close()
			continue
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// handshake completes TLS on an accepted connection, verifies the peer and
// queues it for Accept.
func (s *streamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.sem }()
	tc, ok := c.(*tls.Conn)
	if !ok {
		_ = c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.log.Warn("consensus: refused peer: TLS handshake failed", "remote", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	}
	if err := s.checkPeer(tc); err != nil {
		s.log.Warn("consensus: refused peer", "remote", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	}
	tracked := s.track(tc)
	if tracked == nil {
		return
	}
	if s.gone != nil {
		tracked.peer = tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		tracked.gone = s.gone
	}
	select {
	case s.connCh <- tracked:
	case <-s.ctx.Done():
		_ = tracked.Close()
	}
}

// checkPeer requires a verified chain and applies VerifyPeer to the leaf.
func (s *streamLayer) checkPeer(tc *tls.Conn) error {
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return errors.New("consensus: peer presented no verified certificate")
	}
	if s.verify != nil {
		if err := s.verify(st.PeerCertificates[0]); err != nil {
			return fmt.Errorf("consensus: peer certificate %q rejected: %w", st.PeerCertificates[0].Subject.CommonName, err)
		}
	}
	return nil
}

// Accept returns the next authenticated inbound connection.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.connCh:
		return c, nil
	case <-s.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Dial opens an authenticated connection to a peer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		timeout = transportTimeout
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.tls}
	c, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("consensus: dial %s: %w", address, err)
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("consensus: dial %s: not a TLS connection", address)
	}
	if err := s.checkPeer(tc); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("consensus: dial %s: %w", address, err)
	}
	tracked := s.track(tc)
	if tracked == nil {
		return nil, fmt.Errorf("consensus: dial %s: %w", address, net.ErrClosed)
	}
	return tracked, nil
}

// Addr returns the advertised address.
func (s *streamLayer) Addr() net.Addr { return s.addr }

// Close stops accepting, waits for the accept and handshake goroutines and
// closes every connection handed out. Idempotent.
func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		err = s.ln.Close()
		s.wg.Wait()
		s.mu.Lock()
		s.closed = true
		conns := make([]*trackedConn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
		if err != nil && errors.Is(err, net.ErrClosed) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("consensus: close listener: %w", err)
		}
	})
	return err
}

// track registers c so Close can close it; nil (and c closed) once closed.
func (s *streamLayer) track(c net.Conn) *trackedConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil
	}
	t := &trackedConn{Conn: c, s: s}
	s.conns[t] = struct{}{}
	return t
}

func (s *streamLayer) untrack(c *trackedConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// trackedConn removes itself from its stream layer when closed. An accepted one
// also reports its peer as gone when a read fails for another reason than our
// own Close (the peer closed it, or its kernel did when the process died).
type trackedConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once

	peer     string
	gone     func(peer string)
	closing  atomic.Bool
	goneOnce sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.gone != nil && !c.closing.Load() && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			c.goneOnce.Do(func() { c.gone(c.peer) })
		}
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.closing.Store(true)
	err := c.Conn.Close()
	c.once.Do(func() { c.s.untrack(c) })
	return err
}
