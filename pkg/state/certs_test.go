package state

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

func certCondition(t *testing.T, cs []api.Condition, typ string) api.Condition {
	t.Helper()
	c := plan.Find(cs, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, cs)
	}
	return *c
}

func eventsWith(v View, reason string) []Event {
	var out []Event
	for _, e := range v.Events(0) {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// An agent certificate that is not renewed raises CertificateExpiring with an event
// once time alone (the leader's RecordCertificates) moves it into its last quarter;
// renewing clears it. The CA and a witness outside the manifest are judged on the site.
func TestCertificateExpiryConditions(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1")})
	enrolled(l, "w1") // agent certificate for 24h from now
	ca := api.CertValidity{Name: plan.CertSiteCA, NotBefore: l.clock, NotAfter: l.clock.Add(10 * 365 * 24 * time.Hour)}
	coords := map[string]api.CertValidity{
		"c0":      {Name: plan.CertCoordinator, NotBefore: l.clock, NotAfter: l.clock.Add(365 * 24 * time.Hour)},
		"witness": {Name: plan.CertCoordinator, NotBefore: l.clock.Add(-300 * 24 * time.Hour), NotAfter: l.clock.Add(65 * 24 * time.Hour)},
	}
	record := plan.SiteCerts{CA: ca, Coordinators: coords}
	if l.view().CertificatesDue(l.clock) {
		t.Fatal("due right after enrolment")
	}
	l.must(CmdRecordCertificates, RecordCertificates{Certs: record})
	v := l.view()
	w1, _ := v.Host("w1")
	if c := certCondition(t, w1.Host.Status.Conditions, api.ConditionCertificateExpiring); c.Status != api.ConditionFalse {
		t.Fatalf("fresh agent certificate: %+v", c)
	}
	site, _ := v.Site()
	if c := certCondition(t, site.Site.Status.Conditions, api.ConditionCAExpiring); c.Status != api.ConditionFalse {
		t.Fatalf("fresh CA: %+v", c)
	}
	if c := certCondition(t, site.Site.Status.Conditions, api.ConditionCertificateExpiring); c.Status != api.ConditionTrue || !strings.Contains(c.Message, "host witness: coordinator") {
		t.Fatalf("witness with 65 days of a year left: %+v", c)
	}
	if v.CertificatesDue(l.clock.Add(17 * time.Hour)) {
		t.Fatal("due with more than a quarter left")
	}
	later := l.clock.Add(19 * time.Hour)
	if !v.CertificatesDue(later) {
		t.Fatal("not due with less than a quarter left")
	}
	l.clock = later
	l.must(CmdRecordCertificates, RecordCertificates{Certs: record})
	v = l.view()
	if v.CertificatesDue(l.clock) {
		t.Fatal("still due after the refresh")
	}
	w1, _ = v.Host("w1")
	c := certCondition(t, w1.Host.Status.Conditions, api.ConditionCertificateExpiring)
	if c.Status != api.ConditionTrue || c.Reason != "AgentExpiring" || !strings.Contains(c.Message, "agent certificate valid until") {
		t.Fatalf("unrenewed agent certificate: %+v", c)
	}
	if r := certCondition(t, w1.Host.Status.Conditions, api.ConditionReady); r.Reason == api.ConditionCertificateExpiring {
		t.Fatalf("expiry changed Ready: %+v", r)
	}
	if evs := eventsWith(v, api.ConditionCertificateExpiring); len(evs) != 2 || evs[1].Object != "host/w1" || evs[1].Type != EventWarning {
		t.Fatalf("events: %+v", evs)
	}

	l.must(CmdRenewIdentity, RenewIdentity{Name: "w1", Role: "agent", OldSerial: "s-w1", Serial: "s-w1b", NotAfter: l.clock.Add(24 * time.Hour)})
	w1, _ = l.view().Host("w1")
	if c := certCondition(t, w1.Host.Status.Conditions, api.ConditionCertificateExpiring); c.Status != api.ConditionFalse {
		t.Fatalf("after renewal: %+v", c)
	}
	if evs := eventsWith(l.view(), api.ConditionCertificateExpiring+"Cleared"); len(evs) != 1 {
		t.Fatalf("cleared events: %+v", evs)
	}

	// describe host lists every expiry date: agent, coordinator, the CA.
	got := l.view().Certificates("c0")
	if len(got) != 2 || got[0].Name != plan.CertCoordinator || got[1].Name != plan.CertSiteCA {
		t.Fatalf("c0 certificates: %+v", got)
	}
	if got := l.view().Certificates("w1"); len(got) != 2 || got[0].Name != plan.CertAgent || !got[0].NotAfter.Equal(l.clock.Add(23*time.Hour+59*time.Minute+59*time.Second)) {
		t.Fatalf("w1 certificates: %+v", got)
	}
}

// kubeadm's certificates arrive with the facts and raise KubeCertificatesExpiring.
func TestKubeCertificatesFromFacts(t *testing.T) {
	l := newLog(t)
	l.must(CmdApplyManifest, ApplyManifest{Manifest: manifest("c0", "w1")})
	enrolled(l, "c0")
	f := hostspec.Facts{KubeCertificates: []api.CertValidity{
		{Name: "ca.crt", NotBefore: l.clock, NotAfter: l.clock.Add(10 * 365 * 24 * time.Hour)},
		{Name: "apiserver.crt", NotBefore: l.clock.Add(-340 * 24 * time.Hour), NotAfter: l.clock.Add(25 * 24 * time.Hour)},
	}}
	raw, _ := json.Marshal(f)
	l.must(CmdReportFacts, ReportFacts{Host: "c0", Facts: raw, Hash: f.Hash()})
	c0, _ := l.view().Host("c0")
	c := certCondition(t, c0.Host.Status.Conditions, api.ConditionKubeCertificatesExpiring)
	if c.Status != api.ConditionTrue || !strings.Contains(c.Message, "[apiserver.crt]") || !strings.Contains(c.Message, "kubeadm certs renew all") {
		t.Fatalf("kube certificates: %+v", c)
	}
	if got := l.view().Certificates("c0"); len(got) != 3 || got[1].Name != "apiserver.crt" {
		t.Fatalf("c0 certificates: %+v", got)
	}
	if w1, _ := l.view().Host("w1"); plan.Find(w1.Host.Status.Conditions, api.ConditionKubeCertificatesExpiring) != nil {
		t.Fatal("a host without kubeadm certificates has the condition")
	}
}
