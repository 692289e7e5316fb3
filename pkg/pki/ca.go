package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA file names inside a CA directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// maxCSRSize bounds CSRs accepted from the network.
const maxCSRSize = 64 << 10

// CA is the site certificate authority. Key is secret; CA's String never shows it.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA creates a self-signed P-256 CA for siteName, valid for CAValidity from now.
func NewCA(siteName string, now time.Time) (*CA, error) {
	if siteName == "" {
		return nil, fmt.Errorf("pki: new ca: site name is empty")
	}
	if now.IsZero() {
		return nil, fmt.Errorf("pki: new ca: time is zero")
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("pki: new ca: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("pki: new ca: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "plinth CA " + siteName, Organization: []string{siteName}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: new ca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: new ca: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: EncodeCert(cert)}, nil
}

// LoadCA reads ca.crt and ca.key from dir. The key file must not be accessible to
// group or other, and must match the certificate.
func LoadCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, err := readFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("pki: load ca: %w", err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: load ca: %s: %w", certPath, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: load ca: %s is not a CA certificate", certPath)
	}
	keyPEM, err := readPrivateFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("pki: load ca: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: load ca: %s: %w", keyPath, err)
	}
	if !publicKeyEqual(key.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("pki: load ca: %s does not match %s", keyPath, certPath)
	}
	return &CA{Cert: cert, Key: key, CertPEM: EncodeCert(cert)}, nil
}

// Save writes ca.crt (0644) and ca.key (0600) into dir, creating dir 0700. Both are
// written atomically; Save fails rather than overwrite an existing ca.key.
func (ca *CA) Save(dir string) error {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return fmt.Errorf("pki: save ca: incomplete CA")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: save ca: %w", err)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	if _, err := os.Lstat(keyPath); err == nil {
		return fmt.Errorf("pki: save ca: %s already exists, refusing to overwrite: %w", keyPath, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pki: save ca: %w", err)
	}
	keyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return fmt.Errorf("pki: save ca: %w", err)
	}
	// Stage the certificate, claim the key name exclusively, then publish the
	// certificate: losing a race for ca.key leaves an existing ca.crt untouched.
	certPath := filepath.Join(dir, CACertFile)
	tmp, err := writeTemp(certPath, EncodeCert(ca.Cert), 0o644)
	if err != nil {
		return fmt.Errorf("pki: save ca: %w", err)
	}
	defer os.Remove(tmp)
	if err := writeFileExclusive(keyPath, keyPEM, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("pki: save ca: %s already exists, refusing to overwrite: %w", keyPath, fs.ErrExist)
		}
		return fmt.Errorf("pki: save ca: %w", err)
	}
	if err := os.Rename(tmp, certPath); err != nil {
		return fmt.Errorf("pki: save ca: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("pki: save ca: %w", err)
	}
	return nil
}

// Fingerprint is the CA certificate's fingerprint, as pinned by join tokens.
func (ca *CA) Fingerprint() string {
	if ca == nil {
		return ""
	}
	return Fingerprint(ca.Cert)
}

// Site is the site name the CA was created for.
func (ca *CA) Site() string {
	if ca == nil || ca.Cert == nil || len(ca.Cert.Subject.Organization) == 0 {
		return ""
	}
	return ca.Cert.Subject.Organization[0]
}

// String describes the CA without its key.
func (ca *CA) String() string {
	if ca == nil || ca.Cert == nil {
		return "pki.CA(nil)"
	}
	return fmt.Sprintf("plinth CA %q %s", ca.Site(), ca.Fingerprint())
}

// GoString keeps %#v from printing the key.
func (ca *CA) GoString() string { return ca.String() }

// IssueRequest describes a certificate to issue.
type IssueRequest struct {
	Name      string // Subject CN: host name for agents
	Role      string // one of the Role constants; the only OU
	DNSNames  []string
	IPs       []net.IP
	PublicKey crypto.PublicKey
	TTL       time.Duration // capped at the CA's own expiry
	Now       time.Time
	Serial    *big.Int // optional; random 128-bit when nil
}

// Issue signs a certificate for req: CN=Name, OU=[Role], O=[site]. Coordinators get
// server and client auth; agents too (they may serve); admins client auth only.
// NotBefore is Now minus a minute of clock skew.
func (ca *CA) Issue(req IssueRequest) (certPEM []byte, cert *x509.Certificate, err error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, nil, fmt.Errorf("pki: issue: incomplete CA")
	}
	if err := checkName(req.Name); err != nil {
		return nil, nil, fmt.Errorf("pki: issue: %w", err)
	}
	if err := checkRole(req.Role); err != nil {
		return nil, nil, fmt.Errorf("pki: issue %q: %w", req.Name, err)
	}
	if req.PublicKey == nil {
		return nil, nil, fmt.Errorf("pki: issue %q: no public key", req.Name)
	}
	if req.TTL <= 0 {
		return nil, nil, fmt.Errorf("pki: issue %q: ttl %v is not positive", req.Name, req.TTL)
	}
	if req.Now.IsZero() {
		return nil, nil, fmt.Errorf("pki: issue %q: time is zero", req.Name)
	}
	if !req.Now.Before(ca.Cert.NotAfter) {
		return nil, nil, fmt.Errorf("pki: issue %q: CA expired at %s", req.Name, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	site := ca.Site()
	if site == "" {
		return nil, nil, fmt.Errorf("pki: issue %q: CA certificate names no site", req.Name)
	}
	serial := req.Serial
	if serial == nil {
		if serial, err = randomSerial(); err != nil {
			return nil, nil, fmt.Errorf("pki: issue %q: %w", req.Name, err)
		}
	} else if serial.Sign() <= 0 {
		return nil, nil, fmt.Errorf("pki: issue %q: serial must be positive", req.Name)
	}
	notAfter := req.Now.Add(req.TTL)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if req.Role != RoleAdmin {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).Set(serial),
		Subject: pkix.Name{
			CommonName:         req.Name,
			OrganizationalUnit: []string{req.Role},
			Organization:       []string{site},
		},
		NotBefore:             req.Now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue %q: %w", req.Name, err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, fmt.Errorf("pki: issue %q: %w", req.Name, err)
	}
	return EncodeCert(cert), cert, nil
}

// SignCSR issues a certificate for the key in csrPEM after checking the CSR's
// signature and that its CN is name. Only the public key is taken from the CSR, plus
// its IP and DNS SANs for the coordinator role; everything else requested is ignored.
func (ca *CA) SignCSR(csrPEM []byte, name, role string, ttl time.Duration, now time.Time) ([]byte, *x509.Certificate, error) {
	if len(csrPEM) > maxCSRSize {
		return nil, nil, fmt.Errorf("pki: sign csr for %q: larger than %d bytes", name, maxCSRSize)
	}
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != pemCSR {
		return nil, nil, fmt.Errorf("pki: sign csr for %q: no %s PEM block", name, pemCSR)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: sign csr for %q: %w", name, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, nil, fmt.Errorf("pki: sign csr for %q: bad signature: %w", name, err)
	}
	if csr.Subject.CommonName != name {
		return nil, nil, fmt.Errorf("pki: sign csr: common name %q does not match expected name %q", csr.Subject.CommonName, name)
	}
	req := IssueRequest{Name: name, Role: role, PublicKey: csr.PublicKey, TTL: ttl, Now: now}
	if role == RoleCoordinator {
		req.IPs, req.DNSNames = csr.IPAddresses, csr.DNSNames
	}
	return ca.Issue(req)
}

// randomSerial returns a random positive serial below 2^128.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
