package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// JoinLimits bound what a client without a certificate can hold on the join port.
// An enrolment is one small request, so every phase of a connection gets a short
// deadline, and connections beyond MaxConns are closed as soon as they are accepted.
type JoinLimits struct {
	// HeaderTimeout bounds the TLS handshake and the request headers.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading the whole request, headers and body, from accept.
	BodyTimeout time.Duration
	// WriteTimeout bounds handling and writing the answer, from the end of the headers.
	WriteTimeout time.Duration
	// IdleTimeout bounds a kept-alive connection waiting for its next request.
	IdleTimeout time.Duration
	// MaxConns caps the open connections.
	MaxConns int
	// GlobalEvery and GlobalBurst bound enrolment attempts from all addresses
	// together (on top of the per-address bound): GlobalBurst at once, then one
	// every GlobalEvery.
	GlobalEvery time.Duration
	GlobalBurst int
}

// DefaultJoinLimits leave room for a rack enrolling at once (a few hundred
// enrolments, each one small request) and none for a client that holds connections.
var DefaultJoinLimits = JoinLimits{
	HeaderTimeout: 5 * time.Second,
	BodyTimeout:   10 * time.Second,
	WriteTimeout:  20 * time.Second,
	IdleTimeout:   15 * time.Second,
	MaxConns:      256,
	GlobalEvery:   20 * time.Millisecond,
	GlobalBurst:   200,
}

func (l JoinLimits) withDefaults() JoinLimits {
	d := DefaultJoinLimits
	if l.HeaderTimeout > 0 {
		d.HeaderTimeout = l.HeaderTimeout
	}
	if l.BodyTimeout > 0 {
		d.BodyTimeout = l.BodyTimeout
	}
	if l.WriteTimeout > 0 {
		d.WriteTimeout = l.WriteTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.MaxConns > 0 {
		d.MaxConns = l.MaxConns
	}
	if l.GlobalEvery > 0 {
		d.GlobalEvery = l.GlobalEvery
	}
	if l.GlobalBurst > 0 {
		d.GlobalBurst = l.GlobalBurst
	}
	return d
}

func (l JoinLimits) apply(srv *http.Server) {
	srv.ReadHeaderTimeout = l.HeaderTimeout
	srv.ReadTimeout = l.BodyTimeout
	srv.WriteTimeout = l.WriteTimeout
	srv.IdleTimeout = l.IdleTimeout
}

// capListener closes accepted connections beyond max at once, rather than leaving
// them queued: a client holding many cannot make enrolments wait behind it.
type capListener struct {
	net.Listener
	mu   sync.Mutex
	open int
	max  int
	// refused counts connections closed over the cap (for tests and logs).
	refused int
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open >= l.max {
			l.refused++
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open++
		l.mu.Unlock()
		return &capConn{Conn: c, l: l}, nil
	}
}

type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
