package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/pki"
)

func testCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("lab", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func testBundle(t *testing.T, ca *pki.CA, name string, ttl time.Duration) pki.Bundle {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(pki.IssueRequest{Name: name, Role: pki.RoleAgent, PublicKey: key.Public(), TTL: ttl, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Bundle{CAPEM: ca.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM}
}

func serialOf(t *testing.T, b pki.Bundle) string {
	t.Helper()
	c, err := pki.ParseCert(b.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

func TestJoinRefusesWrongNameAndRole(t *testing.T) {
	ca := testCA(t)
	dir := t.TempDir()
	tok, _ := pki.NewToken("compute-0", pki.RoleAgent, ca.Fingerprint(), time.Now().Add(time.Hour))
	err := Join(context.Background(), JoinOptions{StateDir: dir, Name: "compute-1", Token: tok.String(), JoinAddrs: []string{"127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), `bound to host "compute-0"`) || !strings.Contains(err.Error(), `named "compute-1"`) {
		t.Fatalf("Join with another host's token: %v", err)
	}
	ctok, _ := pki.NewToken("c1", pki.RoleCoordinator, ca.Fingerprint(), time.Now().Add(time.Hour))
	err = Join(context.Background(), JoinOptions{StateDir: dir, Name: "c1", Token: ctok.String(), JoinAddrs: []string{"127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "plinth-coordinator join") {
		t.Fatalf("Join with a coordinator token: %v", err)
	}
	if err := Join(context.Background(), JoinOptions{StateDir: dir, Name: "x", Token: "nonsense", JoinAddrs: []string{"127.0.0.1:1"}}); !errors.Is(err, pki.ErrNotToken) {
		t.Fatalf("Join with garbage: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("refused joins wrote files: %v", ents)
	}
}

func TestJoinIsIdempotent(t *testing.T) {
	ca := testCA(t)
	dir := t.TempDir()
	if err := saveBundle(dir, testBundle(t, ca, "compute-0", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := (agentid.Identity{Name: "compute-0", Coordinators: []string{"127.0.0.1:1"}}).Save(dir); err != nil {
		t.Fatal(err)
	}
	tok, _ := pki.NewToken("compute-0", pki.RoleAgent, ca.Fingerprint(), time.Now().Add(time.Hour))
	o := JoinOptions{StateDir: dir, Name: "compute-0", Token: tok.String(), JoinAddrs: []string{"127.0.0.1:1"}}
	if err := Join(context.Background(), o); !errors.Is(err, ErrAlreadyEnrolled) {
		t.Fatalf("second join: %v, want ErrAlreadyEnrolled", err)
	}
	// --force really tries to enrol (and here finds no coordinator).
	o.Force = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Join(ctx, o); err == nil || errors.Is(err, ErrAlreadyEnrolled) {
		t.Fatalf("forced join: %v, want an enrolment error", err)
	}
	// Enrolled under another name: refuse without --force, naming both.
	tok2, _ := pki.NewToken("compute-9", pki.RoleAgent, ca.Fingerprint(), time.Now().Add(time.Hour))
	err := Join(context.Background(), JoinOptions{StateDir: dir, Name: "compute-9", Token: tok2.String(), JoinAddrs: []string{"127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), `enrolled as "compute-0"`) {
		t.Fatalf("join as another name: %v", err)
	}
}

func TestInterruptedRenewalIsFinished(t *testing.T) {
	ca := testCA(t)
	dir := t.TempDir()
	old := testBundle(t, ca, "h", time.Hour)
	if err := saveBundle(dir, old); err != nil {
		t.Fatal(err)
	}
	// Crash after staging, before the live files were replaced.
	next := testBundle(t, ca, "h", time.Hour)
	if err := next.Save(filepath.Join(dir, pkiDir, renewDir), bundleName); err != nil {
		t.Fatal(err)
	}
	got, err := LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	if serialOf(t, got) != serialOf(t, next) {
		t.Fatal("staged renewal was not completed")
	}
	if _, err := os.Stat(filepath.Join(dir, pkiDir, renewDir)); !os.IsNotExist(err) {
		t.Fatalf("stage left behind: %v", err)
	}
	// Crash while staging: the stage is incomplete and the live bundle stays.
	stage := filepath.Join(dir, pkiDir, renewDir)
	if err := os.MkdirAll(stage, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stage, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = LoadBundle(dir)
	if err != nil || serialOf(t, got) != serialOf(t, next) {
		t.Fatalf("after a cut-short stage: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, pkiDir, "agent.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("agent.key: %v %v", fi.Mode(), err)
	}
}

func TestRenewAt(t *testing.T) {
	ca := testCA(t)
	c, _ := pki.ParseCert(testBundle(t, ca, "h", 24*time.Hour).CertPEM)
	mid := renewAt(c, time.Time{})
	if d := c.NotAfter.Sub(mid); d < 12*time.Hour || d > 12*time.Hour+time.Minute {
		t.Fatalf("renewAt leaves %v, want about half of 24h", d)
	}
	// A short certificate just received is not renewed again at once, even though
	// NotBefore is backdated by more than half its lifetime.
	short, _ := pki.ParseCert(testBundle(t, ca, "h", 30*time.Second).CertPEM)
	now := time.Now()
	if at := renewAt(short, now); !at.After(now.Add(10 * time.Second)) {
		t.Fatalf("short cert renews at %v, now %v", at, now)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	if fc, err := LoadFile(p, true); err != nil || fc.Name != "" {
		t.Fatalf("missing optional file: %+v %v", fc, err)
	}
	if _, err := LoadFile(p, false); err == nil {
		t.Fatal("missing required file: no error")
	}
	os.WriteFile(p, []byte("stateDir: /srv/plinth\ngossipAddr: 10.0.0.21:7444\nfactsInterval: 10s\ncoordinators: [10.0.0.11:7440]\n"), 0o644)
	fc, err := LoadFile(p, false)
	if err != nil || fc.StateDir != "/srv/plinth" || time.Duration(fc.FactsInterval) != 10*time.Second || fc.Coordinators[0] != "10.0.0.11:7440" {
		t.Fatalf("LoadFile = %+v, %v", fc, err)
	}
	for _, bad := range []string{"stateDri: /x\n", "factsInterval: 10\n", "gossipProfile: wan\n"} {
		os.WriteFile(p, []byte(bad), 0o644)
		if _, err := LoadFile(p, false); err == nil {
			t.Errorf("LoadFile(%q): no error", bad)
		}
	}
}
