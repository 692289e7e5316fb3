package pki

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// testNow is a fixed clock for tests that do not hand certificates to crypto/tls.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestCA(t *testing.T, site string, now time.Time) *CA {
	t.Helper()
	ca, err := NewCA(site, now)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

// issueBundle issues a fresh key and certificate valid around the real clock.
func issueBundle(t *testing.T, ca *CA, name, role string, ips []net.IP, dns []string) Bundle {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(IssueRequest{Name: name, Role: role, IPs: ips, DNSNames: dns,
		PublicKey: key.Public(), TTL: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatalf("Issue %s/%s: %v", name, role, err)
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Bundle{CAPEM: ca.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM}
}

// craftCert signs an arbitrary subject with ca, bypassing Issue's policy.
func craftCert(t *testing.T, ca *CA, subject pkix.Name, isCA bool) *x509.Certificate {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               subject,
		NotBefore:             testNow,
		NotAfter:              testNow.Add(time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %04o, want %04o", path, got, want)
	}
}

// checkNoTemps fails if a temp file was left behind in dir.
func checkNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if len(e.Name()) > 0 && e.Name()[0] == '.' {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}
