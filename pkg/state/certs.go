package state

import (
	"slices"
	"sort"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// expiryConditions are the condition types that follow certificate expiry; their
// transitions are events, and CertificatesDue watches them.
var expiryConditions = []string{api.ConditionCertificateExpiring, api.ConditionKubeCertificatesExpiring, api.ConditionCAExpiring}

// identityCerts returns each host's own certificates: the newest unrevoked agent
// certificate in the identity table (its lifetime counted from when it was issued,
// not from the backdated NotBefore) and, for a coordinator of the same name, the
// coordinator certificate the leader recorded; only those hosts if only is not nil.
// One pass over the identity table.
func (t *tables) identityCerts(only map[string]bool) map[string][]api.CertValidity {
	out := make(map[string][]api.CertValidity, max(len(only), 1))
	add := func(id *IdentityRecord) {
		if id.Role != "agent" || id.Revoked != "" {
			return
		}
		c := api.CertValidity{Name: plan.CertAgent, NotBefore: id.IssuedAt, NotAfter: id.NotAfter}
		switch have := out[id.Name]; {
		case have == nil:
			out[id.Name] = []api.CertValidity{c}
		case id.NotAfter.After(have[0].NotAfter):
			have[0] = c
		}
	}
	if only == nil {
		for _, id := range t.Identities {
			add(id)
		}
	} else {
		byName := t.identitiesByName()
		for n := range only {
			for _, id := range byName[n] {
				add(id)
			}
		}
	}
	for n, c := range t.Certs.Coordinators {
		if h, ok := t.Hosts[n]; ok && h.Declared && (only == nil || only[n]) {
			out[n] = append(out[n], c)
		}
	}
	return out
}

// siteCerts is what the site's certificate conditions judge: the CA and the
// coordinators that are not declared hosts.
func (t *tables) siteCerts() plan.SiteCerts {
	out := plan.SiteCerts{CA: t.Certs.CA}
	for n, c := range t.Certs.Coordinators {
		if h, ok := t.Hosts[n]; !ok || !h.Declared {
			if out.Coordinators == nil {
				out.Coordinators = map[string]api.CertValidity{}
			}
			out.Coordinators[n] = c
		}
	}
	return out
}

// expiryTransitions records an event when a certificate condition changes status:
// a warning when it turns True, a normal event when it clears.
func (a *applier) expiryTransitions(object string, prev, next []api.Condition) {
	for _, t := range expiryConditions {
		p, n := plan.Find(prev, t), plan.Find(next, t)
		if n == nil || (p != nil && p.Status == n.Status && p.Reason == n.Reason) {
			continue
		}
		switch {
		case n.Status == api.ConditionTrue:
			a.event(EventWarning, object, t, n.Message)
		case p != nil && p.Status == api.ConditionTrue:
			a.event(EventNormal, object, t+"Cleared", object+": "+t+" cleared (renewed)")
		}
	}
}

// SiteCerts returns the recorded validity of the site CA and every coordinator's
// certificate.
func (v View) SiteCerts() plan.SiteCerts { return v.t.Certs }

// coordinatorCerts lists the site CA and each coordinator's certificate, named
// "coordinator <name>", for `describe site`.
func (v View) coordinatorCerts() []api.CertValidity {
	var out []api.CertValidity
	if !v.t.Certs.CA.NotAfter.IsZero() {
		out = append(out, v.t.Certs.CA)
	}
	names := make([]string, 0, len(v.t.Certs.Coordinators))
	for n := range v.t.Certs.Coordinators {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := v.t.Certs.Coordinators[n]
		c.Name = plan.CertCoordinator + " " + n
		out = append(out, c)
	}
	return out
}

// Certificates lists every certificate that concerns host, for `describe host`:
// its own (agent, coordinator), kubeadm's on a controller, and the site CA.
func (v View) Certificates(host string) []api.CertValidity {
	var out []api.CertValidity
	if h, ok := v.t.Hosts[host]; ok {
		for _, id := range v.t.Identities {
			if id.Name == host && id.Role == "agent" && id.Revoked == "" && (len(out) == 0 || id.NotAfter.After(out[0].NotAfter)) {
				out = []api.CertValidity{{Name: plan.CertAgent, NotBefore: id.IssuedAt, NotAfter: id.NotAfter}}
			}
		}
		if c, ok := v.t.Certs.Coordinators[host]; ok {
			out = append(out, c)
		}
		kube := append([]api.CertValidity(nil), h.KubeCerts...)
		sort.Slice(kube, func(i, j int) bool { return kube[i].Name < kube[j].Name })
		out = append(out, kube...)
	}
	if !v.t.Certs.CA.NotAfter.IsZero() {
		out = append(out, v.t.Certs.CA)
	}
	return out
}

// CertificatesDue reports whether an expiry condition computed at now would differ
// from the stored one: time alone moves a certificate into its warning window, and
// the leader proposes RecordCertificates so the conditions are refreshed.
func (v View) CertificatesDue(now time.Time) bool {
	t := v.t
	differs := func(cs []api.Condition, typ, status, reason string) bool {
		c := plan.Find(cs, typ)
		return c == nil || c.Status != status || c.Reason != reason
	}
	ids := t.identityCerts(nil)
	for n, h := range t.Hosts {
		if !h.Declared {
			continue
		}
		cs := h.Host.Status.Conditions
		if certs := ids[n]; len(certs) > 0 {
			if st, reason, _ := plan.IdentityExpiry(n, certs, now); differs(cs, api.ConditionCertificateExpiring, st, reason) {
				return true
			}
		}
		if len(h.KubeCerts) > 0 {
			if st, reason, _ := plan.KubeExpiry(n, h.KubeCerts, now); differs(cs, api.ConditionKubeCertificatesExpiring, st, reason) {
				return true
			}
		}
	}
	if t.Site == nil || t.Certs.CA.NotAfter.IsZero() {
		return false
	}
	cs := t.Site.Site.Status.Conditions
	if st, reason, _ := plan.CAExpiry(t.Certs.CA, now); differs(cs, api.ConditionCAExpiring, st, reason) {
		return true
	}
	for n, c := range t.siteCerts().Coordinators {
		st, _, _ := plan.IdentityExpiry(n, []api.CertValidity{c}, now)
		if st == api.ConditionTrue && !differs(cs, api.ConditionCertificateExpiring, api.ConditionFalse, "NoCertificatesAffected") {
			return true
		}
	}
	return false
}

// identitiesByName indexes the identities by holder, built when first needed after
// a decode or a removal (which sets it to nil); addIdentity keeps it current.
func (t *tables) identitiesByName() map[string][]*IdentityRecord {
	if t.idsByName == nil {
		t.idsByName = make(map[string][]*IdentityRecord, len(t.Identities))
		for _, id := range t.Identities {
			t.idsByName[id.Name] = append(t.idsByName[id.Name], id)
		}
	}
	return t.idsByName
}

// addIdentity records id and keeps the holder index current, so an enrolment does
// not cost a rebuild of it over every identity of the site.
func (t *tables) addIdentity(id *IdentityRecord) {
	if old, ok := t.Identities[id.Serial]; ok && t.idsByName != nil {
		t.idsByName[old.Name] = slices.DeleteFunc(t.idsByName[old.Name], func(x *IdentityRecord) bool { return x == old })
	}
	t.Identities[id.Serial] = id
	if t.idsByName != nil {
		t.idsByName[id.Name] = append(t.idsByName[id.Name], id)
	}
}
