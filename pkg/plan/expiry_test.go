package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

func TestIdentityExpiry(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	agent := api.CertValidity{Name: CertAgent, NotBefore: t0, NotAfter: t0.Add(24 * time.Hour)}
	coord := api.CertValidity{Name: CertCoordinator, NotBefore: t0, NotAfter: t0.Add(365 * 24 * time.Hour)}
	tests := []struct {
		name   string
		certs  []api.CertValidity
		now    time.Duration // after t0
		status string
		reason string
		want   string // in the message
	}{
		{"fresh", []api.CertValidity{agent}, time.Hour, api.ConditionFalse, "Valid", ""},
		{"past renewal, not yet a quarter left", []api.CertValidity{agent}, 17 * time.Hour, api.ConditionFalse, "Valid", ""},
		{"a quarter left", []api.CertValidity{agent}, 18 * time.Hour, api.ConditionTrue, "AgentExpiring", "plinth-agent join --force"},
		{"expired", []api.CertValidity{agent}, 25 * time.Hour, api.ConditionTrue, "AgentExpired", "2026-01-02T00:00:00Z"},
		{"coordinator with three months left", []api.CertValidity{{Name: CertAgent, NotBefore: t0.Add(274 * 24 * time.Hour), NotAfter: t0.Add(275 * 24 * time.Hour)}, coord}, 274 * 24 * time.Hour, api.ConditionTrue, "CoordinatorExpiring", "re-join this coordinator"},
		{"coordinator fine, agent renewed", []api.CertValidity{{Name: CertAgent, NotBefore: t0.Add(200 * 24 * time.Hour), NotAfter: t0.Add(201 * 24 * time.Hour)}, coord}, 200*24*time.Hour + time.Hour, api.ConditionFalse, "Valid", ""},
		{"the one expiring first is named", []api.CertValidity{{Name: CertAgent, NotBefore: t0, NotAfter: t0.Add(400 * 24 * time.Hour)}, coord}, 390 * 24 * time.Hour, api.ConditionTrue, "CoordinatorExpired", "coordinator certificate"},
		{"unknown validity is not judged", []api.CertValidity{{Name: CertAgent}}, time.Hour, api.ConditionFalse, "Valid", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, reason, msg := IdentityExpiry("w1", tt.certs, t0.Add(tt.now))
			if st != tt.status || reason != tt.reason || !strings.Contains(msg, tt.want) {
				t.Fatalf("got %s %s %q, want %s %s containing %q", st, reason, msg, tt.status, tt.reason, tt.want)
			}
			if st == api.ConditionTrue && !strings.Contains(msg, "host w1") {
				t.Fatalf("message does not name the host: %q", msg)
			}
		})
	}
}

func TestKubeAndCAExpiry(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	kube := []api.CertValidity{
		{Name: "ca.crt", NotBefore: t0, NotAfter: t0.Add(10 * year)},
		{Name: "apiserver.crt", NotBefore: t0, NotAfter: t0.Add(year)},
		{Name: "admin.conf", NotBefore: t0, NotAfter: t0.Add(year + 24*time.Hour)},
	}
	if st, _, _ := KubeExpiry("c0", kube, t0.Add(year-31*24*time.Hour)); st != api.ConditionFalse {
		t.Fatalf("31 days left: %s", st)
	}
	st, reason, msg := KubeExpiry("c0", kube, t0.Add(year-29*24*time.Hour))
	if st != api.ConditionTrue || reason != "Expiring" || !strings.Contains(msg, "[apiserver.crt admin.conf]") || !strings.Contains(msg, "kubeadm certs renew all") {
		t.Fatalf("29 days left: %s %s %q", st, reason, msg)
	}
	if _, reason, _ := KubeExpiry("c0", kube, t0.Add(year+time.Hour)); reason != "Expired" {
		t.Fatalf("after expiry: %s", reason)
	}

	ca := api.CertValidity{Name: CertSiteCA, NotBefore: t0, NotAfter: t0.Add(10 * year)}
	for _, tt := range []struct {
		now    time.Duration
		status string
	}{{0, api.ConditionFalse}, {8*year - 24*time.Hour, api.ConditionFalse}, {8*year + 24*time.Hour, api.ConditionTrue}, {11 * year, api.ConditionTrue}} {
		if st, _, msg := CAExpiry(ca, t0.Add(tt.now)); st != tt.status || (st == api.ConditionTrue && !strings.Contains(msg, "docs/operations.md")) {
			t.Fatalf("CA at +%v: %s %q, want %s", tt.now, st, msg, tt.status)
		}
	}
	if st, _, _ := CAExpiry(api.CertValidity{}, t0); st != api.ConditionUnknown {
		t.Fatalf("unrecorded CA: %s", st)
	}
}

func TestSiteCertificateRollup(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	ca := api.CertValidity{Name: CertSiteCA, NotBefore: t0, NotAfter: t0.Add(10 * year)}
	host := func(name string, certs ...api.CertValidity) NamedConditions {
		return NamedConditions{Name: name, Conditions: HostConditions(HostView{Name: name, Enrolled: true, Certs: certs}, nil, t0.Add(20*time.Hour))}
	}
	fresh := api.CertValidity{Name: CertAgent, NotBefore: t0.Add(19 * time.Hour), NotAfter: t0.Add(43 * time.Hour)}
	stale := api.CertValidity{Name: CertAgent, NotBefore: t0, NotAfter: t0.Add(24 * time.Hour)}

	// Without a recorded CA the site has no certificate conditions (as before).
	if c := Find(SiteConditions(1, "", api.SiteSpec{}, []NamedConditions{host("a", stale)}, SiteCerts{}, nil, t0), api.ConditionCertificateExpiring); c != nil {
		t.Fatalf("condition without a recorded CA: %+v", c)
	}
	cs := SiteConditions(1, "", api.SiteSpec{}, []NamedConditions{host("a", fresh), host("b", stale)}, SiteCerts{CA: ca}, nil, t0.Add(20*time.Hour))
	if c := Find(cs, api.ConditionCertificateExpiring); c == nil || c.Status != api.ConditionTrue || !strings.Contains(c.Message, "host b") {
		t.Fatalf("rollup: %+v", c)
	}
	if c := Find(cs, api.ConditionCAExpiring); c == nil || c.Status != api.ConditionFalse {
		t.Fatalf("CA: %+v", c)
	}
	if c := Find(cs, api.ConditionReady); c == nil || c.Status != api.ConditionFalse || c.Reason == "CertificateExpiring" {
		t.Fatalf("Ready: %+v", c)
	}
	// A witness that is not a declared host is judged on the site.
	w := api.CertValidity{Name: CertCoordinator, NotBefore: t0.Add(-300 * 24 * time.Hour), NotAfter: t0.Add(65 * 24 * time.Hour)}
	cs = SiteConditions(1, "", api.SiteSpec{}, []NamedConditions{host("a", fresh)}, SiteCerts{CA: ca, Coordinators: map[string]api.CertValidity{"w": w}}, nil, t0.Add(20*time.Hour))
	if c := Find(cs, api.ConditionCertificateExpiring); c == nil || c.Status != api.ConditionTrue || !strings.Contains(c.Message, "host w: coordinator certificate") {
		t.Fatalf("witness: %+v", c)
	}
}
