package server

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// enrolLimiter bounds enrolment attempts per remote address. The join port accepts
// clients without certificates, and every refusal is an event written through Raft, so
// without a bound one client could fill the log and the event ring.
type enrolLimiter struct {
	mu    sync.Mutex
	every time.Duration
	burst int
	peers map[string]*peerLimit
}

type peerLimit struct {
	lim  *rate.Limiter
	seen time.Time
}

// newEnrolLimiter allows burst attempts at once per address, then one every every.
func newEnrolLimiter(every time.Duration, burst int) *enrolLimiter {
	return &enrolLimiter{every: every, burst: burst, peers: map[string]*peerLimit{}}
}

// allow reports whether remote ("ip:port" or "ip") may attempt an enrolment now.
func (l *enrolLimiter) allow(remote string, now time.Time) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.peers) > 10000 { // forget idle peers rather than grow without bound
		for k, p := range l.peers {
			if now.Sub(p.seen) > 10*time.Minute {
				delete(l.peers, k)
			}
		}
	}
	p, ok := l.peers[host]
	if !ok {
		p = &peerLimit{lim: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.peers[host] = p
	}
	p.seen = now
	return p.lim.AllowN(now, 1)
}
