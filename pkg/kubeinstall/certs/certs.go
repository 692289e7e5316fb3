// Package certs creates and checks the X.509 material Plinth itself issues for
// Kubernetes: the etcd CA the coordinator generates, the member and client
// certificates each etcd host issues from it, and the CA hash joining nodes pin.
//
// It is standard library only, so the coordinator can generate a CA without linking
// Kubernetes code. It must never write files: callers decide where keys live.
package certs

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
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Validity of what Plinth issues.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
)

// NewCA returns a self-signed CA as one PEM bundle: certificate, then key.
func NewCA(commonName string, now time.Time) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("ca %s: key: %w", commonName, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return "", fmt.Errorf("ca %s: sign: %w", commonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) + string(keyPEM), nil
}

// CA is a parsed CA bundle.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     crypto.Signer
}

// ParseCA parses a bundle written by NewCA (certificate and key PEM, any order).
func ParseCA(bundle string) (*CA, error) {
	var ca CA
	rest := []byte(bundle)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("ca bundle: certificate: %w", err)
			}
			ca.Cert, ca.CertPEM = c, pem.EncodeToMemory(b)
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("ca bundle: key: %w", err)
			}
			ca.Key = k
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("ca bundle: key: %w", err)
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, errors.New("ca bundle: key cannot sign")
			}
			ca.Key = s
		}
	}
	if ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("ca bundle: want a CERTIFICATE and a private key PEM block")
	}
	if !ca.Cert.IsCA {
		return nil, errors.New("ca bundle: certificate is not a CA")
	}
	return &ca, nil
}

// Request describes a leaf certificate.
type Request struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// Issue signs a new key pair and returns certificate and key PEM.
func (ca *CA) Issue(r Request, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: key: %w", r.CommonName, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.CommonName, Organization: r.Organization},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     r.DNSNames,
		IPAddresses:  r.IPs,
	}
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: sign: %w", r.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// Check reports why certPEM does not satisfy r under ca or expires within renewBefore
// of now; nil means it is fine to keep.
func (ca *CA) Check(certPEM []byte, r Request, now time.Time, renewBefore time.Duration) error {
	c, err := ParseCert(certPEM)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	var usages []x509.ExtKeyUsage
	if r.Server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: usages}); err != nil {
		return fmt.Errorf("not valid under the etcd CA: %w", err)
	}
	if left := c.NotAfter.Sub(now); left < renewBefore {
		return fmt.Errorf("expires %s (in %s)", c.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Hour))
	}
	if c.Subject.CommonName != r.CommonName {
		return fmt.Errorf("common name %q, want %q", c.Subject.CommonName, r.CommonName)
	}
	for _, ip := range r.IPs {
		if !hasIP(c.IPAddresses, ip) {
			return fmt.Errorf("lacks IP SAN %s", ip)
		}
	}
	for _, d := range r.DNSNames {
		if !hasString(c.DNSNames, d) {
			return fmt.Errorf("lacks DNS SAN %s", d)
		}
	}
	return nil
}

// ParseCert parses the first certificate in certPEM.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no CERTIFICATE PEM block")
	}
	return x509.ParseCertificate(b.Bytes)
}

// CACertHash is kubeadm's discovery pin: "sha256:" and the hex SHA-256 of the CA's
// DER-encoded SubjectPublicKeyInfo.
func CACertHash(caPEM []byte) (string, error) {
	c, err := ParseCert(caPEM)
	if err != nil {
		return "", fmt.Errorf("ca cert hash: %w", err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func hasIP(ips []net.IP, ip net.IP) bool {
	for _, x := range ips {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

func hasString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
