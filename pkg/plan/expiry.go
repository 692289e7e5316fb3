package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// When a certificate's expiry becomes the operator's business. Agents renew at half
// their lifetime, so a quarter left means renewal has failed for a quarter of it;
// coordinators do not renew themselves, so a quarter (three months of a year) is the
// time to re-join them. The site CA cannot be rotated without re-issuing everything:
// a fifth of its ten years (two years) leaves time to plan the rollover.
const (
	identityWarnDivisor = 4
	caWarnDivisor       = 5
)

// Certificate names in api.CertValidity.Name.
const (
	CertAgent       = "agent"
	CertCoordinator = "coordinator"
	CertSiteCA      = "site CA"
)

// warnAt is when c's expiry becomes a condition: a divisor-th of its lifetime before
// NotAfter.
func warnAt(c api.CertValidity, divisor int) time.Time {
	return c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / time.Duration(divisor))
}

// expiryState is the reason for c at now once it warns: "Expired" or "Expiring".
func expiryState(c api.CertValidity, now time.Time) string {
	if !now.Before(c.NotAfter) {
		return "Expired"
	}
	return "Expiring"
}

// soonest returns the certificate of cs that warns at now and expires first.
func soonest(cs []api.CertValidity, now time.Time, warn func(api.CertValidity) time.Time) (api.CertValidity, bool) {
	var out api.CertValidity
	found := false
	for _, c := range cs {
		if c.NotAfter.IsZero() || now.Before(warn(c)) {
			continue
		}
		if !found || c.NotAfter.Before(out.NotAfter) {
			out, found = c, true
		}
	}
	return out, found
}

func day(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// IdentityExpiry judges a host's own certificates (its agent's, and its
// coordinator's on a controller or witness): True when one has less than a quarter of
// its lifetime left, naming it, its NotAfter and the repair. Messages hold absolute
// times only, so they do not change while time passes.
func IdentityExpiry(host string, certs []api.CertValidity, now time.Time) (status, reason, msg string) {
	c, ok := soonest(certs, now, func(c api.CertValidity) time.Time { return warnAt(c, identityWarnDivisor) })
	if !ok {
		return api.ConditionFalse, "Valid", ""
	}
	st := expiryState(c, now)
	switch c.Name {
	case CertCoordinator:
		return api.ConditionTrue, "Coordinator" + st, fmt.Sprintf("host %s: coordinator certificate valid until %s (less than a quarter of its lifetime left); "+
			"coordinators do not renew their own certificate: re-join this coordinator with a new token before then (docs/operations.md, \"Certificates\")", host, day(c.NotAfter))
	default:
		return api.ConditionTrue, "Agent" + st, fmt.Sprintf("host %s: %s certificate valid until %s has not been renewed (agents renew at half-life); "+
			"check that plinth-agent runs and reaches a coordinator (`journalctl -u plinth-agent`); once expired, re-enrol with `plinth-agent join --force` and a new token", host, c.Name, day(c.NotAfter))
	}
}

// KubeExpiry judges kubeadm's control-plane certificates on a controller: True when
// one expires within kubespec.CertWarnBefore. Plinth does not renew them: renewal
// restarts the control plane, which the operator schedules.
func KubeExpiry(host string, certs []api.CertValidity, now time.Time) (status, reason, msg string) {
	c, ok := soonest(certs, now, func(c api.CertValidity) time.Time { return c.NotAfter.Add(-kubespec.CertWarnBefore) })
	if !ok {
		return api.ConditionFalse, "Valid", ""
	}
	var names []string
	for _, o := range certs {
		if !now.Before(o.NotAfter.Add(-kubespec.CertWarnBefore)) {
			names = append(names, o.Name)
		}
	}
	return api.ConditionTrue, expiryState(c, now), fmt.Sprintf("host %s: kubeadm certificates %v expire, the first %s at %s; on %s run `kubeadm certs renew all`, "+
		"then restart kube-apiserver, kube-controller-manager, kube-scheduler (move their manifests out of /etc/kubernetes/manifests and back), one controller at a time (docs/kubernetes.md)",
		host, names, c.Name, day(c.NotAfter), host)
}

// CAExpiry judges the site CA: True with a fifth of its lifetime left.
func CAExpiry(ca api.CertValidity, now time.Time) (status, reason, msg string) {
	if ca.NotAfter.IsZero() {
		return api.ConditionUnknown, "NotRecorded", "the leader has not recorded the site CA yet"
	}
	if now.Before(warnAt(ca, caWarnDivisor)) {
		return api.ConditionFalse, "Valid", ""
	}
	return api.ConditionTrue, expiryState(ca, now), fmt.Sprintf("site CA valid until %s (less than a fifth of its lifetime left); it is not rotated automatically: "+
		"plan the CA rollover in docs/operations.md (\"Certificates\") before then", day(ca.NotAfter))
}

// SiteCerts is what the site's certificate conditions judge besides its hosts: the
// site CA, and coordinators that are not declared hosts (a witness outside the
// manifest), by name.
type SiteCerts struct {
	CA           api.CertValidity            `json:"ca"`
	Coordinators map[string]api.CertValidity `json:"coordinators,omitempty"`
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
