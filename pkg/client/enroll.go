package client

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"net"

	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Enroll presents a token at the first reachable join address, pinning the CA
// fingerprint the token carries. It is shared by coordinators and agents.
func Enroll(ctx context.Context, joinAddrs []string, tok pki.Token, key crypto.Signer, name string, ips []net.IP) (*wire.EnrollResponse, error) {
	return EnrollFrom(ctx, nil, joinAddrs, tok, key, name, ips)
}

// EnrollFrom is Enroll from the local address src (nil: the kernel's choice). The
// join port bounds attempts per address, so hosts enrol from their own.
func EnrollFrom(ctx context.Context, src net.IP, joinAddrs []string, tok pki.Token, key crypto.Signer, name string, ips []net.IP) (*wire.EnrollResponse, error) {
	csr, err := pki.NewCSR(key, name, ips, nil)
	if err != nil {
		return nil, err
	}
	req := wire.EnrollRequest{Token: tok.String(), Name: name, CSR: string(csr)}
	var lastErr error
	for _, addr := range joinAddrs {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("coordinator address %q: want ip:port", addr)
		}
		tc, err := pki.JoinClientTLS(host, tok.CAFingerprint)
		if err != nil {
			return nil, err
		}
		var resp wire.EnrollResponse
		cl := NewFrom([]string{addr}, tc, src)
		_, err = cl.Do(ctx, "POST", wire.PathEnroll, req, &resp)
		// One request: its connection would otherwise stay open, holding one of the
		// join port's few connection slots until its idle timeout.
		cl.CloseIdle()
		if err == nil {
			if _, err := checkIssued(resp, name); err != nil {
				return nil, err
			}
			return &resp, nil
		}
		lastErr = err
		if StatusOf(err) == 403 || StatusOf(err) == 400 {
			return nil, fmt.Errorf("enrolment refused by %s: %w", addr, err)
		}
	}
	return nil, fmt.Errorf("enrolment failed: no coordinator accepted the token: %w", lastErr)
}

func checkIssued(resp wire.EnrollResponse, name string) (*x509.Certificate, error) {
	cert, err := pki.ParseCert([]byte(resp.Cert))
	if err != nil {
		return nil, err
	}
	if cert.Subject.CommonName != name {
		return nil, fmt.Errorf("enrolment: coordinator issued a certificate for %q, not %q", cert.Subject.CommonName, name)
	}
	return cert, nil
}
