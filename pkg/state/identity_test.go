package state

import (
	"strings"
	"testing"
	"time"
)

func revoked(l *log, serial string) string {
	id, ok := l.view().Identity(serial)
	if !ok {
		l.t.Fatalf("identity %s not in the table", serial)
	}
	return id.Revoked
}

func TestRenewalIsConfirmedByUse(t *testing.T) {
	l := newLog(t)
	enrolled(l, "w1")
	renew := func(old, serial string) error {
		return l.apply(CmdRenewIdentity, RenewIdentity{Name: "w1", Role: "agent", OldSerial: old, Serial: serial, NotAfter: l.clock.Add(24 * time.Hour)})
	}
	if err := renew("s-w1", "s2"); err != nil {
		t.Fatal(err)
	}
	if r := revoked(l, "s-w1"); r != "" {
		t.Fatalf("old certificate revoked before the new one was used: %s", r)
	}
	// Renewed again from the old one: the first answer was never used.
	if err := renew("s-w1", "s3"); err != nil {
		t.Fatal(err)
	}
	if r := revoked(l, "s2"); !strings.Contains(r, "never confirmed") {
		t.Fatalf("unconfirmed s2: revoked %q", r)
	}
	if err := l.apply(CmdConfirmIdentity, ConfirmIdentity{Serial: "s2"}); err == nil {
		t.Fatal("a revoked certificate confirmed itself")
	}
	l.must(CmdConfirmIdentity, ConfirmIdentity{Serial: "s3"})
	l.must(CmdConfirmIdentity, ConfirmIdentity{Serial: "s3"}) // idempotent
	if r := revoked(l, "s-w1"); r != "superseded by certificate s3" {
		t.Fatalf("old certificate after confirmation: revoked %q", r)
	}
	if err := renew("s-w1", "s4"); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("renewal from a revoked certificate: %v", err)
	}
}

func TestDeleteHostRevokesAndMakesRekeyDue(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{File: "site.yaml", Manifest: manifest("c0", "w1", "w2")})
	enrolled(l, "w1")
	enrolled(l, "w2")
	l.must(CmdDeleteHost, DeleteHost{Name: "w1"})
	v := l.view()
	if _, ok := v.Host("w1"); ok {
		t.Fatal("the deleted host's record is still there")
	}
	if r := revoked(l, "s-w1"); r != "host w1 was deleted" {
		t.Fatalf("w1's certificate: revoked %q", r)
	}
	if r := revoked(l, "s-w2"); r != "" {
		t.Fatalf("w2's certificate revoked too: %q", r)
	}
	if v.GossipRekey() != l.idx {
		t.Fatalf("gossip rekey due at %d, want %d", v.GossipRekey(), l.idx)
	}
}

func TestSetGossipKeysIsOnePhase(t *testing.T) {
	l := newLog(t)
	rec := func(name string) *SecretRecord { return &SecretRecord{Name: name, Ciphertext: []byte(name)} }
	l.must(CmdSetGossipKeys, SetGossipKeys{Primary: rec(GossipKeySecret), Next: rec(GossipNextKeySecret)})
	if err := l.apply(CmdSetGossipKeys, SetGossipKeys{Primary: rec(GossipKeySecret), Previous: rec("wrong")}); err == nil {
		t.Fatal("a misnamed record was accepted")
	}
	if _, ok := l.view().Secret(GossipNextKeySecret); !ok {
		t.Fatal("a refused command changed the keys")
	}
	if err := l.apply(CmdSetGossipKeys, SetGossipKeys{}); err == nil {
		t.Fatal("no primary was accepted")
	}
	l.must(CmdSetGossipKeys, SetGossipKeys{Primary: rec(GossipKeySecret)})
	v := l.view()
	if _, ok := v.Secret(GossipNextKeySecret); ok {
		t.Fatal("next key kept")
	}
	if p, _ := v.Secret(GossipKeySecret); p.Index != l.idx {
		t.Fatalf("primary index %d, want %d", p.Index, l.idx)
	}
}
