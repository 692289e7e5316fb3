package agent

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// renewAt is half-way through the certificate's lifetime, counted from since when
// that is later than NotBefore: NotBefore is backdated for clock skew, and a short
// lifetime would otherwise be renewed again at once.
func renewAt(c *x509.Certificate, since time.Time) time.Time {
	start := c.NotBefore
	if since.After(start) {
		start = since
	}
	return start.Add(c.NotAfter.Sub(start) / 2)
}

// renewLoop renews the certificate at half its lifetime, retrying with backoff.
func (a *agent) renewLoop(ctx context.Context) error {
	bo := newBackoff(5*time.Second, 5*time.Minute)
	var since time.Time // when the current certificate was received, if by this process
	for {
		a.mu.Lock()
		cert := a.cert
		a.mu.Unlock()
		// Sleep in slices of at most an hour, so a clock step is noticed.
		if d := time.Until(renewAt(cert, since)); d > 0 {
			if !sleep(ctx, min(d, time.Hour)) {
				return nil
			}
			continue
		}
		if err := a.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if time.Now().After(cert.NotAfter) {
				a.log.Error("certificate expired and cannot be renewed: re-enrol with `plinth-agent join --force` and a new token", "notAfter", cert.NotAfter, "err", err)
			} else {
				a.log.Warn("certificate renewal failed; retrying", "notAfter", cert.NotAfter, "err", err)
			}
			if !bo.wait(ctx) {
				return nil
			}
			continue
		}
		since = time.Now()
		bo.reset()
	}
}

// renew gets a certificate for a fresh key, saves the bundle crash-safely and
// switches the API client to it.
func (a *agent) renew(ctx context.Context) error {
	a.mu.Lock()
	old := a.cert
	a.mu.Unlock()
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.NewCSR(key, a.name, old.IPAddresses, nil)
	if err != nil {
		return err
	}
	var resp wire.CertResponse
	if _, err := a.do(ctx, "POST", wire.PathAgentRenew, wire.RenewRequest{CSR: string(csr)}, &resp); err != nil {
		return fmt.Errorf("agent: renew: %w", err)
	}
	cert, err := pki.ParseCert([]byte(resp.Cert))
	if err != nil {
		return fmt.Errorf("agent: renew: %w", err)
	}
	if cert.Subject.CommonName != a.name {
		return fmt.Errorf("agent: renew: coordinator issued a certificate for %q, not %q", cert.Subject.CommonName, a.name)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	b := pki.Bundle{CAPEM: []byte(resp.CA), CertPEM: []byte(resp.Cert), KeyPEM: keyPEM}
	tc, err := b.ClientTLS("")
	if err != nil {
		return fmt.Errorf("agent: renew: %w", err)
	}
	if err := saveBundle(a.cfg.StateDir, b); err != nil {
		return fmt.Errorf("agent: renew: %w", err)
	}
	a.mu.Lock()
	a.cl = client.New(a.addrs, tc)
	a.cert = cert
	a.mu.Unlock()
	a.log.Info("certificate renewed", "serial", cert.SerialNumber.Text(16), "notAfter", cert.NotAfter, "renewAt", renewAt(cert, time.Now()))
	return nil
}
