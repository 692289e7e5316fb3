package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
)

// PEM block types.
const (
	pemCert = "CERTIFICATE"
	pemKey  = "PRIVATE KEY"
	pemCSR  = "CERTIFICATE REQUEST"
)

// NewKey generates an ECDSA P-256 private key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return k, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// EncodeKey returns key as PKCS#8 PEM. The result is secret: write it 0600 and
// nowhere else.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	b, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return b, nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemKey, Bytes: der}), nil
}

// ParseKey reads a PEM private key: PKCS#8, or SEC 1 ("EC PRIVATE KEY").
// Errors never include the key material.
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	k, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: parse key: %w", err)
	}
	return k, nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	var (
		k   any
		err error
	)
	switch block.Type {
	case pemKey:
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%T is not a signing key", k)
	}
	return s, nil
}

// EncodeCert returns cert as PEM.
func EncodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: cert.Raw})
}

// ParseCert reads the first PEM certificate in certPEM.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	c, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: parse certificate: %w", err)
	}
	return c, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	if block.Type != pemCert {
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	return x509.ParseCertificate(block.Bytes)
}

// NewCSR returns a PEM certificate signing request for name. The CA decides what
// is actually granted; see CA.SignCSR.
func NewCSR(key crypto.Signer, name string, ips []net.IP, dns []string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("pki: create csr: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    dns,
		IPAddresses: ips,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create csr for %q: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der}), nil
}

// Fingerprint is "sha256:<hex>" of the DER certificate: what join tokens pin.
// It is empty for a nil certificate.
func Fingerprint(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	sum := sha256.Sum256(cert.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CheckFingerprint returns an error unless cert's fingerprint is want.
func CheckFingerprint(cert *x509.Certificate, want string) error {
	if got := Fingerprint(cert); !strings.EqualFold(got, want) {
		return fmt.Errorf("pki: certificate fingerprint %s does not match pinned %s", got, want)
	}
	return nil
}

// checkFingerprintSyntax validates the "sha256:<64 hex>" form.
func checkFingerprintSyntax(fp string) error {
	h, ok := strings.CutPrefix(fp, "sha256:")
	if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != sha256.Size {
		return fmt.Errorf("fingerprint %q is not sha256:<64 hex digits>", fp)
	}
	return nil
}

// publicKeyEqual reports whether two public keys are the same key.
func publicKeyEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}
