package plan

import (
	"slices"

	"github.com/plinth-dev/plinth/pkg/api"
)

// rolledUp are the host condition types the site counts: for each, how many hosts
// hold it (True) and the first of them by name.
var rolledUp = []string{
	api.ConditionInvalidSpec, api.ConditionBlocked, api.ConditionDegraded, api.ConditionDrifted,
	api.ConditionReconciling, api.ConditionCertificateExpiring, api.ConditionKubeCertificatesExpiring,
}

// Rollup is what the site's conditions read from its hosts' conditions, kept up to
// date one host at a time: a command about one host updates one entry instead of
// re-reading every host of the site. The zero value is not usable; see NewRollup.
type Rollup struct {
	conds    map[string][]api.Condition
	holding  map[string][]string // condition type -> sorted names of the hosts holding it
	notReady []string            // sorted names of the hosts not Ready
}

// NewRollup returns an empty roll-up.
func NewRollup() *Rollup {
	return &Rollup{conds: map[string][]api.Condition{}, holding: map[string][]string{}}
}

// RollupOf is the roll-up of hosts.
func RollupOf(hosts []NamedConditions) *Rollup {
	r := NewRollup()
	for _, h := range hosts {
		r.Set(h.Name, h.Conditions)
	}
	return r
}

// Hosts is how many hosts the roll-up holds.
func (r *Rollup) Hosts() int { return len(r.conds) }

// Set records host's conditions (replacing what it had). cs is kept, not copied:
// the caller replaces it rather than changing it in place.
func (r *Rollup) Set(host string, cs []api.Condition) {
	r.conds[host] = cs
	for _, t := range rolledUp {
		c := Find(cs, t)
		r.holding[t] = setMember(r.holding[t], host, c != nil && c.Status == api.ConditionTrue)
	}
	c := Find(cs, api.ConditionReady)
	r.notReady = setMember(r.notReady, host, c == nil || c.Status != api.ConditionTrue)
}

// Remove forgets host.
func (r *Rollup) Remove(host string) {
	if _, ok := r.conds[host]; !ok {
		return
	}
	delete(r.conds, host)
	for _, t := range rolledUp {
		r.holding[t] = setMember(r.holding[t], host, false)
	}
	r.notReady = setMember(r.notReady, host, false)
}

// count counts the hosts holding condition t, with the first one's message.
func (r *Rollup) count(t string) (n int, first string) {
	names := r.holding[t]
	if len(names) == 0 {
		return 0, ""
	}
	return len(names), Find(r.conds[names[0]], t).Message
}

// notReadyCount counts the hosts not Ready, with the first one's message and reason.
func (r *Rollup) notReadyCount() (n int, first, reason string) {
	if len(r.notReady) == 0 {
		return 0, "", ""
	}
	name := r.notReady[0]
	if c := Find(r.conds[name], api.ConditionReady); c != nil {
		return len(r.notReady), c.Message, c.Reason
	}
	return len(r.notReady), "host " + name + ": no status yet", "Unknown"
}

// setMember adds name to (in) or removes it from (!in) the sorted names.
func setMember(names []string, name string, in bool) []string {
	i, found := slices.BinarySearch(names, name)
	switch {
	case in && !found:
		return slices.Insert(names, i, name)
	case !in && found:
		return slices.Delete(names, i, i+1)
	}
	return names
}
