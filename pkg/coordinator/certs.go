package coordinator

import (
	"context"
	"crypto/x509"
	"maps"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// peerCerts remembers the coordinator certificate each Raft peer last presented
// (seen once per connection, in the TLS handshake), so the leader can record every
// coordinator's expiry, including the first one's, which no identity record holds.
type peerCerts struct {
	mu sync.Mutex
	m  map[string]api.CertValidity
}

func (p *peerCerts) see(name string, c *x509.Certificate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]api.CertValidity{}
	}
	p.m[name] = validity(plan.CertCoordinator, c)
}

func (p *peerCerts) snapshot() map[string]api.CertValidity {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.m)
}

// validity is c's validity window; NotBefore is c's, which pki backdates by a minute
// for clock skew (nothing next to a year).
func validity(name string, c *x509.Certificate) api.CertValidity {
	return api.CertValidity{Name: name, NotBefore: c.NotBefore, NotAfter: c.NotAfter}
}

// recordCertificates is the leader's duty for certificate expiry: it records the
// site CA's and the coordinators' certificate validity when they differ from the
// state, or when time alone has moved an expiry condition (state.CertificatesDue),
// so conditions and events follow. It reads the state and proposes nothing on a
// normal tick.
func (d *daemon) recordCertificates(ctx context.Context) error {
	want := plan.SiteCerts{CA: validity(plan.CertSiteCA, d.caCert), Coordinators: map[string]api.CertValidity{}}
	var have plan.SiteCerts
	var due bool
	d.store.Read(func(v state.View) {
		have = v.SiteCerts()
		due = v.CertificatesDue(time.Now())
		seen := d.peers.snapshot()
		for _, c := range v.Coordinators() {
			switch {
			case c.Name == d.cfg.Name:
				want.Coordinators[c.Name] = validity(plan.CertCoordinator, d.ownCert)
			case seen[c.Name] != api.CertValidity{}:
				want.Coordinators[c.Name] = seen[c.Name]
			case have.Coordinators[c.Name] != api.CertValidity{}:
				want.Coordinators[c.Name] = have.Coordinators[c.Name]
			}
		}
	})
	if !due && sameCerts(have, want) {
		return nil
	}
	return d.propose(ctx, state.CmdRecordCertificates, state.RecordCertificates{Certs: want})
}

func sameCerts(a, b plan.SiteCerts) bool {
	return sameValidity(a.CA, b.CA) && maps.EqualFunc(a.Coordinators, b.Coordinators, sameValidity)
}

// sameValidity compares instants (a value read back from JSON has another location).
func sameValidity(a, b api.CertValidity) bool {
	return a.Name == b.Name && a.NotBefore.Equal(b.NotBefore) && a.NotAfter.Equal(b.NotAfter)
}
