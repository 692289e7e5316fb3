package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
)

// Bundle is what a process needs for mTLS: the CA certificate, its own certificate
// and its private key, all PEM. KeyPEM is secret; Bundle's String never shows it.
type Bundle struct {
	CAPEM, CertPEM, KeyPEM []byte
}

// String describes the bundle without its key.
func (b Bundle) String() string {
	if c, err := parseCert(b.CertPEM); err == nil {
		return fmt.Sprintf("pki.Bundle(%s/%v)", c.Subject.CommonName, c.Subject.OrganizationalUnit)
	}
	return "pki.Bundle(invalid)"
}

// GoString keeps %#v from printing the key.
func (b Bundle) GoString() string { return b.String() }

// parsed is a validated Bundle.
type parsed struct {
	ca   *x509.Certificate
	pool *x509.CertPool
	pair tls.Certificate // leaf, then the CA so peers can pin it
	id   Identity
}

// parse checks that the key matches the certificate, the certificate was signed by
// the CA and names a valid identity.
func (b Bundle) parse() (*parsed, error) {
	ca, err := parseCert(b.CAPEM)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	if !ca.IsCA {
		return nil, fmt.Errorf("ca %q is not a CA certificate", ca.Subject.CommonName)
	}
	pair, err := tls.X509KeyPair(b.CertPEM, b.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate and key: %w", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate: %w", err)
		}
		pair.Leaf = leaf
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return nil, fmt.Errorf("certificate %q was not issued by CA %s: %w", leaf.Subject.CommonName, Fingerprint(ca), err)
	}
	id, err := identityOf(leaf)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	pair.Certificate = [][]byte{pair.Certificate[0], ca.Raw}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &parsed{ca: ca, pool: pool, pair: pair, id: id}, nil
}

// Identity is the identity the bundle's certificate speaks for.
func (b Bundle) Identity() (Identity, error) {
	p, err := b.parse()
	if err != nil {
		return Identity{}, fmt.Errorf("pki: bundle: %w", err)
	}
	return p.id, nil
}

// ServerTLS is a TLS 1.3 server config that requires a client certificate issued by
// the site CA and naming a valid Identity. verify, when not nil, may reject it
// further (see RequireRole); handlers read it back with PeerIdentity.
func (b Bundle) ServerTLS(verify func(Identity) error) (*tls.Config, error) {
	p, err := b.parse()
	if err != nil {
		return nil, fmt.Errorf("pki: server tls: %w", err)
	}
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{p.pair},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        p.pool,
		VerifyConnection: verifyPeer(verify),
	}, nil
}

// ClientTLS is a TLS 1.3 client config presenting the bundle's certificate and
// accepting only a coordinator certificate from the site CA valid for serverName
// (a host name or IP; empty means the dialled host).
func (b Bundle) ClientTLS(serverName string) (*tls.Config, error) {
	return b.ClientTLSVerify(serverName, RequireRole(RoleCoordinator))
}

// ClientTLSVerify is ClientTLS with a caller-chosen check of the server's Identity;
// nil accepts any role.
func (b Bundle) ClientTLSVerify(serverName string, verify func(Identity) error) (*tls.Config, error) {
	p, err := b.parse()
	if err != nil {
		return nil, fmt.Errorf("pki: client tls: %w", err)
	}
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		ServerName:       serverName,
		RootCAs:          p.pool,
		Certificates:     []tls.Certificate{p.pair},
		VerifyConnection: verifyPeer(verify),
		// A new connection resumes a session of this config (this certificate)
		// instead of signing and verifying certificates again: an agent opens a few
		// connections, a thousand agents a few thousand. The server still checks the
		// resumed certificate's chain and expiry, VerifyConnection still runs, and
		// a renewed certificate is a new config with an empty cache.
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize),
	}, nil
}

// sessionCacheSize bounds the sessions a client config keeps: one per coordinator
// address is enough.
const sessionCacheSize = 16

func verifyPeer(verify func(Identity) error) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		id, err := PeerIdentity(&cs)
		if err != nil {
			return err
		}
		if verify != nil {
			return verify(id)
		}
		return nil
	}
}

// JoinServerTLS is the server config for the join endpoint only: hosts joining with
// a token have no certificate yet, so none is requested. Serve everything else
// with ServerTLS, on a separate listener.
func (b Bundle) JoinServerTLS() (*tls.Config, error) {
	p, err := b.parse()
	if err != nil {
		return nil, fmt.Errorf("pki: join server tls: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{p.pair},
		ClientAuth:   tls.NoClientCert,
	}, nil
}

// JoinClientTLS is the client config a joining host uses before it has the CA: it
// accepts the server only if it presents a CA whose fingerprint is caFingerprint (from
// the join token) and a coordinator certificate from that CA valid for serverName.
func JoinClientTLS(serverName, caFingerprint string) (*tls.Config, error) {
	if serverName == "" {
		return nil, fmt.Errorf("pki: join tls: server name is empty")
	}
	if err := checkFingerprintSyntax(caFingerprint); err != nil {
		return nil, fmt.Errorf("pki: join tls: %w", err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: serverName,
		// The chain is verified below against the pinned CA instead of system roots.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, serverName, caFingerprint)
		},
	}, nil
}

func verifyPinned(certs []*x509.Certificate, serverName, caFingerprint string) error {
	if len(certs) == 0 {
		return fmt.Errorf("pki: join: server presented no certificate")
	}
	var ca *x509.Certificate
	for _, c := range certs[1:] {
		if c.IsCA && CheckFingerprint(c, caFingerprint) == nil {
			ca = c
			break
		}
	}
	if ca == nil {
		return fmt.Errorf("pki: join: server did not present the pinned CA %s", caFingerprint)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := certs[0]
	if _, err := leaf.Verify(x509.VerifyOptions{
		DNSName:   serverName,
		Roots:     pool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("pki: join: server certificate: %w", err)
	}
	id, err := identityOf(leaf)
	if err != nil {
		return fmt.Errorf("pki: join: server %w", err)
	}
	return RequireRole(RoleCoordinator)(id)
}

// Bundle file names: name.crt, name.key and the shared ca.crt.
func bundlePaths(dir, name string) (ca, cert, key string, err error) {
	if err := checkName(name); err != nil {
		return "", "", "", err
	}
	if name == "ca" {
		return "", "", "", fmt.Errorf("name %q would clash with the CA files", name)
	}
	return filepath.Join(dir, CACertFile), filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), nil
}

// Save validates b and writes dir/ca.crt (0644), dir/name.crt (0644) and dir/name.key
// (0600), each atomically, creating dir 0700. Existing files are replaced (rotation).
func (b Bundle) Save(dir, name string) error {
	caPath, certPath, keyPath, err := bundlePaths(dir, name)
	if err != nil {
		return fmt.Errorf("pki: save bundle: %w", err)
	}
	if _, err := b.parse(); err != nil {
		return fmt.Errorf("pki: save bundle %q: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: save bundle: %w", err)
	}
	for _, f := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{{caPath, b.CAPEM, 0o644}, {keyPath, b.KeyPEM, 0o600}, {certPath, b.CertPEM, 0o644}} {
		if err := writeFileAtomic(f.path, f.data, f.perm); err != nil {
			return fmt.Errorf("pki: save bundle: %w", err)
		}
	}
	return nil
}

// LoadBundle reads what Save wrote and validates it. The key file must not be
// accessible to group or other.
func LoadBundle(dir, name string) (Bundle, error) {
	caPath, certPath, keyPath, err := bundlePaths(dir, name)
	if err != nil {
		return Bundle{}, fmt.Errorf("pki: load bundle: %w", err)
	}
	var b Bundle
	if b.CAPEM, err = readFile(caPath); err == nil {
		if b.CertPEM, err = readFile(certPath); err == nil {
			b.KeyPEM, err = readPrivateFile(keyPath)
		}
	}
	if err != nil {
		return Bundle{}, fmt.Errorf("pki: load bundle: %w", err)
	}
	if _, err := b.parse(); err != nil {
		return Bundle{}, fmt.Errorf("pki: load bundle %s: %w", filepath.Join(dir, name), err)
	}
	return b, nil
}
