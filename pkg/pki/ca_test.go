package pki

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCASaveLoad(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	if !ca.Cert.IsCA || ca.Site() != "lab" {
		t.Fatalf("CA: IsCA=%v site=%q", ca.Cert.IsCA, ca.Site())
	}
	if got, want := ca.Cert.NotAfter.Sub(testNow), CAValidity; got != want {
		t.Errorf("validity %v, want %v", got, want)
	}
	dir := filepath.Join(t.TempDir(), "pki", "ca")
	if err := ca.Save(dir); err != nil {
		t.Fatalf("Save: %v", err)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, CACertFile), 0o644)
	checkMode(t, filepath.Join(dir, CAKeyFile), 0o600)
	checkNoTemps(t, dir)

	got, err := LoadCA(dir)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	if got.Fingerprint() != ca.Fingerprint() || !bytes.Equal(got.CertPEM, ca.CertPEM) {
		t.Errorf("loaded CA %s, want %s", got.Fingerprint(), ca.Fingerprint())
	}
	if !publicKeyEqual(got.Key.Public(), ca.Cert.PublicKey) {
		t.Error("loaded key does not match certificate")
	}
	if !strings.HasPrefix(ca.Fingerprint(), "sha256:") || len(ca.Fingerprint()) != len("sha256:")+64 {
		t.Errorf("fingerprint %q", ca.Fingerprint())
	}

	// Never overwrite a CA key, not even with the same CA, and leave ca.crt alone.
	other := newTestCA(t, "lab", testNow)
	for _, c := range []*CA{ca, other} {
		if err := c.Save(dir); !errors.Is(err, fs.ErrExist) {
			t.Errorf("second Save: %v, want ErrExist", err)
		}
	}
	if again, err := LoadCA(dir); err != nil || again.Fingerprint() != ca.Fingerprint() {
		t.Errorf("after refused overwrite: %v, %v", again, err)
	}
	checkNoTemps(t, dir)
}

func TestLoadCARefusesOpenKeyAndMismatch(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	dir := t.TempDir()
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	if err := os.Chmod(keyPath, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), "permissions") {
		t.Errorf("LoadCA with 0640 key: %v", err)
	}
	if err := os.Chmod(keyPath, 0o600); err != nil {
		t.Fatal(err)
	}
	other := newTestCA(t, "lab", testNow)
	if err := os.WriteFile(filepath.Join(dir, CACertFile), other.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("LoadCA with mismatched cert: %v", err)
	}
}

func TestCAStringHidesKey(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	keyPEM, _ := EncodeKey(ca.Key)
	der, _ := pem.Decode(keyPEM)
	for _, s := range []string{ca.String(), ca.GoString()} {
		if strings.Contains(s, "PRIVATE") || strings.Contains(s, string(der.Bytes)) || !strings.Contains(s, ca.Fingerprint()) {
			t.Errorf("CA string %q", s)
		}
	}
}

func TestIssueAndVerifyChain(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, tc := range []struct {
		role   string
		server bool
	}{{RoleCoordinator, true}, {RoleAgent, true}, {RoleAdmin, false}} {
		t.Run(tc.role, func(t *testing.T) {
			key, _ := NewKey()
			ip := net.ParseIP("10.0.0.1")
			pemBytes, cert, err := ca.Issue(IssueRequest{Name: "node-1", Role: tc.role, IPs: []net.IP{ip},
				DNSNames: []string{"node-1"}, PublicKey: key.Public(), TTL: 24 * time.Hour, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			if parsed, err := ParseCert(pemBytes); err != nil || !parsed.Equal(cert) {
				t.Fatalf("PEM does not hold the cert: %v", err)
			}
			s := cert.Subject
			if s.CommonName != "node-1" || !slices.Equal(s.OrganizationalUnit, []string{tc.role}) || !slices.Equal(s.Organization, []string{"lab"}) {
				t.Errorf("subject %v", s)
			}
			if !cert.NotBefore.Equal(testNow.Add(-time.Minute)) || !cert.NotAfter.Equal(testNow.Add(24*time.Hour)) {
				t.Errorf("validity %v..%v", cert.NotBefore, cert.NotAfter)
			}
			if cert.IsCA || cert.SerialNumber.Sign() <= 0 {
				t.Errorf("IsCA=%v serial=%v", cert.IsCA, cert.SerialNumber)
			}
			verify := func(u x509.ExtKeyUsage) error {
				_, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{u}})
				return err
			}
			if err := verify(x509.ExtKeyUsageClientAuth); err != nil {
				t.Errorf("client auth: %v", err)
			}
			if err := verify(x509.ExtKeyUsageServerAuth); (err == nil) != tc.server {
				t.Errorf("server auth: %v, want allowed=%v", err, tc.server)
			}
			if err := cert.VerifyHostname("10.0.0.1"); err != nil {
				t.Errorf("ip SAN: %v", err)
			}
			// A different CA must not verify it.
			otherRoots := x509.NewCertPool()
			otherRoots.AddCert(newTestCA(t, "lab", testNow).Cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: otherRoots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
				t.Error("verified against another CA")
			}
		})
	}
}

func TestIssuePolicy(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	key, _ := NewKey()
	ok := IssueRequest{Name: "node-1", Role: RoleAgent, PublicKey: key.Public(), TTL: time.Hour, Now: testNow}

	req := ok
	req.Serial = big.NewInt(1234)
	if _, cert, err := ca.Issue(req); err != nil || cert.SerialNumber.Int64() != 1234 {
		t.Errorf("explicit serial: %v %v", cert, err)
	}
	req = ok
	req.TTL = 2 * CAValidity
	if _, cert, err := ca.Issue(req); err != nil || !cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("ttl beyond CA expiry not capped: %v", err)
	}
	_, c1, _ := ca.Issue(ok)
	_, c2, _ := ca.Issue(ok)
	if c1.SerialNumber.Cmp(c2.SerialNumber) == 0 {
		t.Error("random serials repeat")
	}

	bad := map[string]func(*IssueRequest){
		"unknown role":  func(r *IssueRequest) { r.Role = "root" },
		"empty name":    func(r *IssueRequest) { r.Name = "" },
		"slash in name": func(r *IssueRequest) { r.Name = "a/b" },
		"no key":        func(r *IssueRequest) { r.PublicKey = nil },
		"zero ttl":      func(r *IssueRequest) { r.TTL = 0 },
		"zero now":      func(r *IssueRequest) { r.Now = time.Time{} },
		"neg serial":    func(r *IssueRequest) { r.Serial = big.NewInt(-1) },
		"ca expired":    func(r *IssueRequest) { r.Now = ca.Cert.NotAfter },
	}
	for name, mutate := range bad {
		req := ok
		mutate(&req)
		if _, _, err := ca.Issue(req); err == nil || !strings.HasPrefix(err.Error(), "pki: ") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestIdentityOf(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	for _, role := range []string{RoleAdmin, RoleCoordinator, RoleAgent} {
		key, _ := NewKey()
		_, cert, err := ca.Issue(IssueRequest{Name: "host-a", Role: role, PublicKey: key.Public(), TTL: time.Hour, Now: testNow, Serial: big.NewInt(255)})
		if err != nil {
			t.Fatal(err)
		}
		id, err := IdentityOf(cert)
		want := Identity{Name: "host-a", Role: role, Serial: "ff", NotAfter: testNow.Add(time.Hour)}
		if err != nil || id != want {
			t.Errorf("IdentityOf(%s) = %+v, %v; want %+v", role, id, err, want)
		}
	}
	for name, tc := range map[string]struct {
		subject pkix.Name
		isCA    bool
		want    string
	}{
		"unknown role":  {pkix.Name{CommonName: "h", OrganizationalUnit: []string{"root"}}, false, "unknown role"},
		"two roles":     {pkix.Name{CommonName: "h", OrganizationalUnit: []string{RoleAgent, RoleAdmin}}, false, "exactly one role"},
		"two same role": {pkix.Name{CommonName: "h", OrganizationalUnit: []string{RoleAgent, RoleAgent}}, false, "exactly one role"},
		"no role":       {pkix.Name{CommonName: "h"}, false, "exactly one role"},
		"no name":       {pkix.Name{OrganizationalUnit: []string{RoleAgent}}, false, "name is empty"},
		"ca":            {pkix.Name{CommonName: "h", OrganizationalUnit: []string{RoleAgent}}, true, "CA certificate"},
	} {
		_, err := IdentityOf(craftCert(t, ca, tc.subject, tc.isCA))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
	if _, err := IdentityOf(nil); err == nil {
		t.Error("nil cert accepted")
	}
}

func TestSignCSR(t *testing.T) {
	ca := newTestCA(t, "lab", testNow)
	key, _ := NewKey()
	ips := []net.IP{net.ParseIP("192.0.2.7")}
	csr, err := NewCSR(key, "web-1", ips, []string{"web-1.lab", "evil.example"})
	if err != nil {
		t.Fatal(err)
	}

	// Agents get no SANs from the CSR, whatever they ask for.
	_, cert, err := ca.SignCSR(csr, "web-1", RoleAgent, time.Hour, testNow)
	if err != nil {
		t.Fatalf("SignCSR agent: %v", err)
	}
	if len(cert.DNSNames) != 0 || len(cert.IPAddresses) != 0 || !publicKeyEqual(key.Public(), cert.PublicKey) {
		t.Errorf("agent cert SANs %v %v", cert.DNSNames, cert.IPAddresses)
	}
	if id, err := IdentityOf(cert); err != nil || id.Name != "web-1" || id.Role != RoleAgent {
		t.Errorf("identity %+v %v", id, err)
	}
	// Coordinators get the IPs and DNS names they asked for.
	_, cert, err = ca.SignCSR(csr, "web-1", RoleCoordinator, time.Hour, testNow)
	if err != nil {
		t.Fatalf("SignCSR coordinator: %v", err)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(ips[0]) || len(cert.DNSNames) != 2 {
		t.Errorf("coordinator SANs %v %v", cert.DNSNames, cert.IPAddresses)
	}

	// Wrong CN: the error names both.
	if _, _, err := ca.SignCSR(csr, "db-1", RoleAgent, time.Hour, testNow); err == nil ||
		!strings.Contains(err.Error(), `"web-1"`) || !strings.Contains(err.Error(), `"db-1"`) {
		t.Errorf("wrong CN: %v", err)
	}

	block, _ := pem.Decode(csr)
	reencode := func(der []byte) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}

	// Forged: the signature no longer matches (last byte of the signature flipped).
	der := bytes.Clone(block.Bytes)
	der[len(der)-1] ^= 0x01
	if _, _, err := ca.SignCSR(reencode(der), "web-1", RoleAgent, time.Hour, testNow); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("bad signature: %v", err)
	}
	// Forged: an honest CSR for web-1 rewritten to claim web-2.
	der = bytes.Replace(bytes.Clone(block.Bytes), []byte("web-1"), []byte("web-2"), 1)
	if _, _, err := ca.SignCSR(reencode(der), "web-2", RoleAgent, time.Hour, testNow); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("rewritten CN: %v", err)
	}

	for name, in := range map[string][]byte{
		"empty":    nil,
		"not pem":  []byte("hello"),
		"cert pem": ca.CertPEM,
		"huge":     bytes.Repeat([]byte{'a'}, maxCSRSize+1),
	} {
		if _, _, err := ca.SignCSR(in, "web-1", RoleAgent, time.Hour, testNow); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, _, err := ca.SignCSR(csr, "web-1", "root", time.Hour, testNow); err == nil {
		t.Error("unknown role accepted")
	}
}

func TestKeyRoundTrip(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	p, err := EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseKey(p)
	if err != nil || !key.Equal(got) {
		t.Fatalf("ParseKey: %v", err)
	}
	// SEC 1 form is accepted too.
	der, _ := x509.MarshalECPrivateKey(key)
	if got, err := ParseKey(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil || !key.Equal(got) {
		t.Errorf("SEC 1: %v", err)
	}
	block, _ := pem.Decode(p)
	block.Bytes[len(block.Bytes)/2] ^= 0xff
	corrupt := pem.EncodeToMemory(block)
	if _, err := ParseKey(corrupt); err == nil {
		t.Error("corrupt key accepted")
	} else if strings.Contains(err.Error(), string(block.Bytes[:8])) {
		t.Error("error leaks key bytes")
	}
	if _, err := ParseKey([]byte("nope")); err == nil {
		t.Error("non-PEM accepted")
	}
}
