package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"time"
)

// Identity is who a verified certificate speaks for.
type Identity struct {
	Name     string    // CN; the host name for agents
	Role     string    // one of the Role constants
	Serial   string    // certificate serial, lowercase hex
	NotAfter time.Time // certificate expiry
}

// IdentityOf maps a certificate to its Identity. It does not verify the chain: call
// it on certificates TLS (or the caller) has already verified against the site CA.
// The certificate must carry a valid CN and exactly one OU naming a known role.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	id, err := identityOf(cert)
	if err != nil {
		return Identity{}, fmt.Errorf("pki: identity: %w", err)
	}
	return id, nil
}

func identityOf(cert *x509.Certificate) (Identity, error) {
	if cert == nil {
		return Identity{}, fmt.Errorf("no certificate")
	}
	cn := cert.Subject.CommonName
	if cert.IsCA {
		return Identity{}, fmt.Errorf("%q is a CA certificate", cn)
	}
	if err := checkName(cn); err != nil {
		return Identity{}, fmt.Errorf("common %w", err)
	}
	ou := cert.Subject.OrganizationalUnit
	if len(ou) != 1 {
		return Identity{}, fmt.Errorf("%q: want exactly one role (OU), have %d", cn, len(ou))
	}
	if err := checkRole(ou[0]); err != nil {
		return Identity{}, fmt.Errorf("%q: %w", cn, err)
	}
	return Identity{Name: cn, Role: ou[0], Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter}, nil
}

// PeerIdentity is the Identity of the verified peer of a TLS connection, e.g. from
// http.Request.TLS. It fails when the peer presented no verified certificate.
func PeerIdentity(cs *tls.ConnectionState) (Identity, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return Identity{}, fmt.Errorf("pki: peer presented no certificate")
	}
	if len(cs.VerifiedChains) == 0 {
		return Identity{}, fmt.Errorf("pki: peer certificate %q is not verified", cs.PeerCertificates[0].Subject.CommonName)
	}
	id, err := identityOf(cs.PeerCertificates[0])
	if err != nil {
		return Identity{}, fmt.Errorf("pki: peer: %w", err)
	}
	return id, nil
}

// RequireRole returns a verify callback for ServerTLS and ClientTLSVerify that
// accepts only the given roles.
func RequireRole(roles ...string) func(Identity) error {
	return func(id Identity) error {
		if !slices.Contains(roles, id.Role) {
			return fmt.Errorf("pki: %s %q is not allowed here (want role %v)", id.Role, id.Name, roles)
		}
		return nil
	}
}
