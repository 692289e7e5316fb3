package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

// HostView is what the condition rollup needs to know about one host.
type HostView struct {
	Name       string
	Generation int64
	Enrolled   bool
	// Reachable is api.ConditionTrue/False/Unknown as membership last said.
	Reachable       string
	ReachableReason string
	ReachableMsg    string
	// Invalid says why the host's spec does not fit its reported facts (CheckFacts);
	// "" when it does or no facts are known.
	Invalid string
	// Steps are the host's step records, in any order; or, from a caller that
	// keeps a tally of them, Tally and Step, which reads one record by ID.
	Steps []Record
	Tally *StepTally
	Step  func(id string) Record
	// Certs are the host's own certificates (agent; coordinator on controllers),
	// KubeCerts kubeadm's control-plane certificates it reported; each judged only
	// when known (IdentityExpiry, KubeExpiry).
	Certs     []api.CertValidity
	KubeCerts []api.CertValidity
}

// HostConditions computes a host's conditions. prev carries the last transition times.
func HostConditions(h HostView, prev []api.Condition, now time.Time) []api.Condition {
	tally, rec := h.Tally, h.Step
	if tally == nil {
		tally = TallyOf(h.Steps)
		byID := make(map[string]int, len(h.Steps))
		for i := range h.Steps {
			byID[h.Steps[i].ID] = i
		}
		rec = func(id string) Record { return h.Steps[byID[id]] }
	}
	blocked, nBlocked := tally.first(tallyBlocked, rec)
	failed, nFailed := tally.first(tallyFailed, rec)
	busy, nBusy := tally.first(tallyBusy, rec)
	drifted, nDrifted := tally.first(tallyDrifted, rec)
	total := tally.Len()
	c := conds{gen: h.Generation, now: now, prev: prev, out: make([]api.Condition, 0, 9)}

	reach := h.Reachable
	if reach == "" {
		reach = api.ConditionUnknown
	}
	switch {
	case !h.Enrolled:
		c.set(api.ConditionReachable, api.ConditionUnknown, "NotEnrolled", "no agent has enrolled for this host yet")
	default:
		c.set(api.ConditionReachable, reach, nonEmpty(h.ReachableReason, "Membership"), h.ReachableMsg)
	}

	if h.Invalid != "" {
		c.set(api.ConditionInvalidSpec, api.ConditionTrue, "FactsMismatch", h.Invalid)
	} else {
		c.set(api.ConditionInvalidSpec, api.ConditionFalse, "Valid", "")
	}
	if nBlocked > 0 {
		c.set(api.ConditionBlocked, api.ConditionTrue, "StepBlocked", stepMsg(h.Name, blocked, nBlocked))
	} else {
		c.set(api.ConditionBlocked, api.ConditionFalse, "NoBlockedSteps", "")
	}
	if nDrifted > 0 {
		c.set(api.ConditionDrifted, api.ConditionTrue, "HostChanged", stepMsg(h.Name, drifted, nDrifted))
	} else {
		c.set(api.ConditionDrifted, api.ConditionFalse, "InSync", "")
	}
	if len(h.Certs) > 0 {
		st, reason, msg := IdentityExpiry(h.Name, h.Certs, now)
		c.set(api.ConditionCertificateExpiring, st, reason, msg)
	}
	if len(h.KubeCerts) > 0 {
		st, reason, msg := KubeExpiry(h.Name, h.KubeCerts, now)
		c.set(api.ConditionKubeCertificatesExpiring, st, reason, msg)
	}
	unfinished := nBlocked + nFailed + nBusy
	if unfinished > 0 {
		first := firstOf(failed, busy, blocked)
		c.set(api.ConditionReconciling, api.ConditionTrue, "StepsPending", fmt.Sprintf("%d of %d steps not done; %s", unfinished, total, stepMsg(h.Name, first, 1)))
	} else {
		c.set(api.ConditionReconciling, api.ConditionFalse, "Converged", fmt.Sprintf("%d steps done", total))
	}
	switch {
	case nFailed > 0:
		c.set(api.ConditionDegraded, api.ConditionTrue, "StepFailing", stepMsg(h.Name, failed, nFailed))
	case h.Enrolled && reach == api.ConditionFalse:
		c.set(api.ConditionDegraded, api.ConditionTrue, "Unreachable", fmt.Sprintf("host %s is unreachable: %s", h.Name, nonEmpty(h.ReachableMsg, "membership declared it dead")))
	case nDrifted > 0:
		c.set(api.ConditionDegraded, api.ConditionTrue, "Drifted", stepMsg(h.Name, drifted, nDrifted))
	default:
		c.set(api.ConditionDegraded, api.ConditionFalse, "Healthy", "")
	}

	switch {
	case !h.Enrolled:
		c.set(api.ConditionReady, api.ConditionFalse, "NotEnrolled", fmt.Sprintf("host %s: waiting for its agent to enrol", h.Name))
	case reach == api.ConditionFalse:
		c.set(api.ConditionReady, api.ConditionFalse, "Unreachable", fmt.Sprintf("host %s is unreachable: %s", h.Name, nonEmpty(h.ReachableMsg, "membership declared it dead")))
	case h.Invalid != "":
		c.set(api.ConditionReady, api.ConditionFalse, "InvalidSpec", fmt.Sprintf("host %s: its steps are held until the manifest fits its facts: %s", h.Name, h.Invalid))
	case nBlocked > 0:
		c.set(api.ConditionReady, api.ConditionFalse, "StepBlocked", stepMsg(h.Name, blocked, nBlocked))
	case nFailed > 0:
		c.set(api.ConditionReady, api.ConditionFalse, "StepFailing", stepMsg(h.Name, failed, nFailed))
	case nBusy > 0:
		c.set(api.ConditionReady, api.ConditionFalse, "Reconciling", stepMsg(h.Name, busy, nBusy))
	case nDrifted > 0:
		c.set(api.ConditionReady, api.ConditionFalse, "Drifted", stepMsg(h.Name, drifted, nDrifted))
	case reach != api.ConditionTrue:
		c.set(api.ConditionReady, api.ConditionUnknown, "ReachabilityUnknown", fmt.Sprintf("host %s: no membership report yet", h.Name))
	default:
		c.set(api.ConditionReady, api.ConditionTrue, "Converged", fmt.Sprintf("host %s: all %d steps done", h.Name, total))
	}
	return c.out
}

// NamedConditions pairs a host name with its conditions for the site rollup.
type NamedConditions struct {
	Name       string
	Conditions []api.Condition
}

// FaultTolerance judges a site's topology: with two controllers and a witness, the
// coordinators' Raft and Kubernetes' etcd both keep quorum when any one member is
// lost; without the witness, losing either controller stops writes (until the fenced
// recovery); one controller is no redundancy at all.
func FaultTolerance(spec api.SiteSpec) (status, reason, msg string) {
	switch {
	case len(spec.Controllers) >= 2 && spec.Witness != "":
		return api.ConditionTrue, "WitnessQuorum", fmt.Sprintf("controllers %v and witness %s: losing any one keeps quorum for the coordinators and etcd", spec.Controllers, spec.Witness)
	case len(spec.Controllers) >= 2:
		return api.ConditionFalse, "NoWitness", "two controllers and no witness: losing either stops coordinator writes and the Kubernetes API (2-member quorum); add spec.witness, or after a permanent loss use the fenced recovery (docs/operations.md, docs/kubernetes.md)"
	default:
		return api.ConditionFalse, "SingleController", "one controller: the coordinators and the control plane do not survive its loss"
	}
}

// SiteConditions rolls hosts up onto the site: the site is Ready when every host is,
// and each condition's message names the first host holding it back. FaultTolerant
// comes from the site's topology (see FaultTolerance); it does not affect Ready.
// CAExpiring judges certs.CA once recorded; CertificateExpiring rolls up the hosts'
// certificate conditions and judges coordinators that are not hosts. Neither affects
// Ready: they warn ahead, while everything still works.
func SiteConditions(gen int64, invalid string, spec api.SiteSpec, hosts []NamedConditions, certs SiteCerts, prev []api.Condition, now time.Time) []api.Condition {
	return SiteConditionsOf(gen, invalid, spec, RollupOf(hosts), certs, prev, now)
}

// SiteConditionsOf is SiteConditions over a roll-up of the hosts kept up to date.
func SiteConditionsOf(gen int64, invalid string, spec api.SiteSpec, hosts *Rollup, certs SiteCerts, prev []api.Condition, now time.Time) []api.Condition {
	c := conds{gen: gen, now: now, prev: prev}
	ft, ftReason, ftMsg := FaultTolerance(spec)
	c.set(api.ConditionFaultTolerant, ft, ftReason, ftMsg)

	if invalid != "" {
		c.set(api.ConditionInvalidSpec, api.ConditionTrue, "ValidationFailed", invalid)
	} else if n, first := hosts.count(api.ConditionInvalidSpec); n > 0 {
		c.set(api.ConditionInvalidSpec, api.ConditionTrue, "HostsAffected", fmt.Sprintf("%d host(s) do not fit their facts; first: %s", n, first))
	} else {
		c.set(api.ConditionInvalidSpec, api.ConditionFalse, "Valid", "")
	}
	for _, t := range []string{api.ConditionBlocked, api.ConditionDegraded, api.ConditionDrifted, api.ConditionReconciling} {
		if n, first := hosts.count(t); n > 0 {
			c.set(t, api.ConditionTrue, "HostsAffected", fmt.Sprintf("%d host(s); first: %s", n, first))
		} else {
			c.set(t, api.ConditionFalse, "NoHostsAffected", "")
		}
	}
	if !certs.CA.NotAfter.IsZero() {
		st, reason, msg := CAExpiry(certs.CA, now)
		c.set(api.ConditionCAExpiring, st, reason, msg)
		n, first := hosts.count(api.ConditionCertificateExpiring)
		k, kfirst := hosts.count(api.ConditionKubeCertificatesExpiring)
		if n == 0 {
			first = kfirst
		}
		n += k
		for _, name := range sortedKeys(certs.Coordinators) {
			if st, _, msg := IdentityExpiry(name, []api.CertValidity{certs.Coordinators[name]}, now); st == api.ConditionTrue {
				if n == 0 {
					first = msg
				}
				n++
			}
		}
		if n > 0 {
			c.set(api.ConditionCertificateExpiring, api.ConditionTrue, "CertificatesAffected", fmt.Sprintf("%d certificate condition(s); first: %s", n, first))
		} else {
			c.set(api.ConditionCertificateExpiring, api.ConditionFalse, "NoCertificatesAffected", "")
		}
	}
	notReady, first, reason := hosts.notReadyCount()
	switch {
	case invalid != "":
		c.set(api.ConditionReady, api.ConditionFalse, "InvalidSpec", invalid)
	case hosts.Hosts() == 0:
		c.set(api.ConditionReady, api.ConditionFalse, "NoHosts", "the site has no hosts yet")
	case notReady > 0:
		c.set(api.ConditionReady, api.ConditionFalse, reason, fmt.Sprintf("%d of %d hosts not ready; %s", notReady, hosts.Hosts(), first))
	default:
		c.set(api.ConditionReady, api.ConditionTrue, "AllHostsReady", fmt.Sprintf("all %d hosts ready", hosts.Hosts()))
	}
	return c.out
}

// Find returns the condition of type t, or nil.
func Find(cs []api.Condition, t string) *api.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

type conds struct {
	gen  int64
	now  time.Time
	prev []api.Condition
	out  []api.Condition
}

func (c *conds) set(t, status, reason, msg string) {
	ltt := c.now
	if p := Find(c.prev, t); p != nil && p.Status == status {
		ltt = p.LastTransitionTime
	}
	c.out = append(c.out, api.Condition{
		Type: t, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: c.gen, LastTransitionTime: ltt,
	})
}

func stepMsg(host string, r *Record, n int) string {
	var what string
	switch r.State {
	case Blocked:
		what = fmt.Sprintf("blocked after %d attempt(s): %s", r.Attempts, lastErr(r))
	case Failed:
		what = fmt.Sprintf("failed (attempt %d, retry at %s): %s", r.Attempts, r.RetryAt.UTC().Format(time.RFC3339), lastErr(r))
	case Succeeded:
		what = fmt.Sprintf("drifted: %v", r.Drift)
	default:
		what = string(r.State)
		if len(r.Deps) > 0 && r.State == Pending {
			what += " (waiting on " + listSome(r.Deps, msgDeps) + ")"
		}
		if len(r.Drift) > 0 {
			what += fmt.Sprintf(", repairing drift: %v", r.Drift)
		}
	}
	msg := "host " + host + " step " + r.Kind + ": " + what
	if n > 1 {
		msg += " (and " + strconv.Itoa(n-1) + " more)"
	}
	return msg
}

// msgDeps bounds the dependencies a message lists: a site-wide step (the first
// controller's, after every node) waits on one per host, and its message is
// rebuilt at each of that host's commands.
const msgDeps = 3

// listSome formats the first n of l as %v would ("[a b c]"), then how many more.
func listSome(l []string, n int) string {
	if len(l) <= n {
		return "[" + strings.Join(l, " ") + "]"
	}
	return "[" + strings.Join(l[:n], " ") + "] and " + strconv.Itoa(len(l)-n) + " more"
}

func lastErr(r *Record) string {
	if r.LastResult != nil && r.LastResult.Error != "" {
		return r.LastResult.Error
	}
	return "no error recorded"
}

func firstOf(rs ...*Record) *Record {
	for _, r := range rs {
		if r != nil {
			return r
		}
	}
	return &Record{}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
