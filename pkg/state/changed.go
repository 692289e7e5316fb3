package state

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

// stepWrite is one write of a step record: the index that wrote it and its ID.
type stepWrite struct {
	idx uint64
	id  string
}

// hasSecretRefs reports whether a step's inputs reference a secret, whose value
// may change at an index no write of the step carries.
func hasSecretRefs(r *plan.Record) bool {
	return bytes.Contains(r.Inputs, []byte(secretref.Prefix))
}

// indexChanges rebuilds stepLog and refSteps from the records (under the write
// lock; hostSteps must be built).
func (t *tables) indexChanges() {
	t.stepLog = make(map[string][]stepWrite, len(t.hostSteps))
	t.refSteps = map[string][]string{}
	for host, ids := range t.hostSteps {
		t.compactLog(host)
		for _, id := range ids { // ID order
			if r := t.Steps[id]; hasSecretRefs(&r) {
				t.refSteps[host] = append(t.refSteps[host], id)
			}
		}
	}
}

// compactLog rewrites host's log as one entry a step, in index order.
func (t *tables) compactLog(host string) {
	ids := t.hostSteps[host]
	log := make([]stepWrite, 0, len(ids))
	for _, id := range ids {
		log = append(log, stepWrite{t.Steps[id].ModifyIndex, id})
	}
	slices.SortStableFunc(log, func(a, b stepWrite) int { return cmp.Compare(a.idx, b.idx) })
	t.stepLog[host] = log
}

// logWrite records that r (already in Steps) was written at its ModifyIndex.
func (t *tables) logWrite(r *plan.Record) {
	log := append(t.stepLog[r.Host], stepWrite{r.ModifyIndex, r.ID})
	t.stepLog[r.Host] = log
	if len(log) > 2*len(t.hostSteps[r.Host])+16 {
		t.compactLog(r.Host)
	}
	refs := t.refSteps[r.Host]
	i, in := slices.BinarySearch(refs, r.ID)
	switch has := hasSecretRefs(r); {
	case has && !in:
		t.refSteps[r.Host] = slices.Insert(refs, i, r.ID)
	case !has && in:
		t.refSteps[r.Host] = slices.Delete(refs, i, i+1)
	}
}

// EachHostStepChangedSince calls fn, in ID order and without a deep copy (as
// EachHostStep), with each of host's step records written after since and, if a
// secret was written or removed after since, each whose inputs reference one (its
// resolution may differ at an index the record does not carry); no other record
// is read. An answer to the host's agent that may leave out what it holds reads
// only these: the first controller holds a step for every node of the site, and
// its agent asks after each of them changes.
func (v View) EachHostStepChangedSince(host string, since uint64, fn func(r plan.Record)) {
	log := v.t.stepLog[host]
	i, _ := slices.BinarySearchFunc(log, since+1, func(w stepWrite, idx uint64) int { return cmp.Compare(w.idx, idx) })
	var ids []string
	if v.t.secretsChanged > since {
		ids = slices.Clone(v.t.refSteps[host])
	}
	for _, w := range log[i:] {
		ids = append(ids, w.id)
	}
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		if r, ok := v.t.Steps[id]; ok && r.Host == host {
			fn(r)
		}
	}
}
