package server

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// enrolLimiter bounds enrolment attempts per remote address and in all. The join
// port accepts clients without certificates, and every attempt may be a write through
// Raft (an enrolment or a refusal event), so without a bound one client could fill the
// log and the event ring, and many addresses together could still flood it.
type enrolLimiter struct {
	mu     sync.Mutex
	every  time.Duration
	burst  int
	peers  map[string]*peerLimit
	global *rate.Limiter // nil: no global bound
}

type peerLimit struct {
	lim  *rate.Limiter
	seen time.Time
}

// newEnrolLimiter allows burst attempts at once per address, then one every every.
func newEnrolLimiter(every time.Duration, burst int) *enrolLimiter {
	return &enrolLimiter{every: every, burst: burst, peers: map[string]*peerLimit{}}
}

// withGlobal adds a bound on all addresses together: burst at once, then one every every.
func (l *enrolLimiter) withGlobal(every time.Duration, burst int) *enrolLimiter {
	l.global = rate.NewLimiter(rate.Every(every), burst)
	return l
}

// allow reports whether remote ("ip:port" or "ip") may attempt an enrolment now.
func (l *enrolLimiter) allow(remote string, now time.Time) bool {
	ok, _ := l.admit(remote, now)
	return ok
}

// admit is allow that also says which bound refused: the address's or the global one.
// An attempt the address's bound refuses does not count against the global one.
func (l *enrolLimiter) admit(remote string, now time.Time) (ok, global bool) {
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
	if !p.lim.AllowN(now, 1) {
		return false, false
	}
	if l.global != nil && !l.global.AllowN(now, 1) {
		return false, true
	}
	return true, false
}
