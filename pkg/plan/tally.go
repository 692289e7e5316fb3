package plan

import "slices"

// StepTally is what a host's conditions read of its steps: how many there are, and
// which of them are blocked, failed, not yet done (busy) or drifted, each kept in
// ID order so the step a message names is the same on every replica. The FSM keeps
// one per host and moves a record through it as the record changes, so a command
// about one step of the first controller (which holds a step for every node of the
// site) does not walk a thousand records to recompute its conditions.
type StepTally struct {
	total int
	sets  [tallyKinds][]string
}

type tallyKind int

const (
	tallyBlocked tallyKind = iota
	tallyFailed
	tallyBusy
	tallyDrifted
	tallyKinds
)

// kinds says which of the tally's sets r belongs to.
func kinds(r *Record) (in [tallyKinds]bool) {
	switch r.State {
	case Blocked:
		in[tallyBlocked] = true
	case Failed:
		in[tallyFailed] = true
	case Succeeded:
	default:
		in[tallyBusy] = true
	}
	in[tallyDrifted] = len(r.Drift) > 0
	return in
}

// TallyOf tallies steps (in any order).
func TallyOf(steps []Record) *StepTally {
	t := &StepTally{}
	for i := range steps {
		t.Add(&steps[i])
	}
	return t
}

// Add counts r, a step not counted yet.
func (t *StepTally) Add(r *Record) {
	t.total++
	for k, in := range kinds(r) {
		if in {
			if i, found := slices.BinarySearch(t.sets[k], r.ID); !found {
				t.sets[k] = slices.Insert(t.sets[k], i, r.ID)
			}
		}
	}
}

// Remove uncounts r as it was counted.
func (t *StepTally) Remove(r *Record) {
	t.total--
	for k, in := range kinds(r) {
		if in {
			if i, found := slices.BinarySearch(t.sets[k], r.ID); found {
				t.sets[k] = slices.Delete(t.sets[k], i, i+1)
			}
		}
	}
}

// Len is how many steps are counted.
func (t *StepTally) Len() int { return t.total }

// Equal reports whether t and o count the same steps the same way.
func (t *StepTally) Equal(o *StepTally) bool {
	if t.total != o.total {
		return false
	}
	for k := range t.sets {
		if !slices.Equal(t.sets[k], o.sets[k]) {
			return false
		}
	}
	return true
}

// first returns the first step of kind k by ID, read through rec, and how many
// steps are of that kind.
func (t *StepTally) first(k tallyKind, rec func(id string) Record) (*Record, int) {
	ids := t.sets[k]
	if len(ids) == 0 {
		return nil, 0
	}
	r := rec(ids[0])
	return &r, len(ids)
}
