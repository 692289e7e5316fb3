package agent

import (
	"github.com/plinth-dev/plinth/pkg/atomicfile"

	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Pending is a step result that has been written to disk but not yet accepted by a
// coordinator. It survives a crash so that a finished run is reported once.
//
// It is the agent's own file format, not a message, so it is kept apart from
// wire.StepReport: it adds Seq and SavedAt (replay in order), Kind (logs), and its
// Result is always present. Report is the one conversion to what is sent.
type Pending struct {
	// Seq orders pending results in the order they were produced.
	Seq        int64         `json:"seq"`
	ID         string        `json:"id"`
	Kind       string        `json:"kind"`
	InputsHash string        `json:"inputsHash"`
	RunID      string        `json:"runID,omitempty"`
	Result     driver.Result `json:"result"`
	SavedAt    time.Time     `json:"savedAt"`
	// Unstarted: the run's start was not recorded (wire.StepReport.Unstarted).
	Unstarted bool          `json:"unstarted,omitempty"`
	Took      time.Duration `json:"took,omitempty"`
}

// Report is the result report this pending result is delivered as.
func (p Pending) Report() wire.StepReport {
	return wire.StepReport{ID: p.ID, InputsHash: p.InputsHash, RunID: p.RunID, Result: &p.Result, Unstarted: p.Unstarted, Took: p.Took}
}

// pendingStore keeps one file per step in a directory (0700, files 0600: outputs
// may be secret). A newer result for the same step replaces the older one.
type pendingStore struct {
	dir  string
	mu   sync.Mutex
	last int64
	made bool // dir exists (made once, not per result)
	// seqs is the Seq on disk per step, as this process wrote or listed it, so a
	// delivered result is removed without reading its file back.
	seqs map[string]int64
}

func newPendingStore(dir string) *pendingStore { return &pendingStore{dir: dir} }

// Put writes p durably, assigning its Seq.
func (s *pendingStore) Put(p Pending) (Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Seq = max(time.Now().UnixNano(), s.last+1)
	s.last = p.Seq
	if p.SavedAt.IsZero() {
		p.SavedAt = time.Now().UTC()
	}
	b, err := json.Marshal(p)
	if err != nil {
		return p, fmt.Errorf("agent: encode pending result %s: %w", p.ID, err)
	}
	err = os.ErrNotExist
	if s.made {
		err = atomicfile.WriteFile(s.path(p.ID), b, 0o600)
	}
	if errors.Is(err, os.ErrNotExist) { // first use, or the directory was removed
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return p, fmt.Errorf("agent: pending results: %w", err)
		}
		s.made = true
		err = atomicfile.WriteFile(s.path(p.ID), b, 0o600)
	}
	if err != nil {
		return p, fmt.Errorf("agent: persist result of %s: %w", p.ID, err)
	}
	s.remember(p.ID, p.Seq)
	return p, nil
}

func (s *pendingStore) remember(id string, seq int64) {
	if s.seqs == nil {
		s.seqs = map[string]int64{}
	}
	s.seqs[id] = seq
}

// Delete removes the pending result of id if it is still the one with seq (a newer
// result for the same step is kept). The removal is not synced: a result that
// comes back after a crash is replayed with a check that the step still waits for
// it, so it is never counted twice.
func (s *pendingStore) Delete(id string, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.path(id)
	cur, known := s.seqs[id]
	if !known {
		if p, err := readPending(path); err == nil {
			cur, known = p.Seq, true
		}
	}
	if known && cur != seq {
		return nil
	}
	delete(s.seqs, id)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("agent: remove pending result %s: %w", id, err)
	}
	return nil
}

// List returns pending results in the order they were produced. Unreadable files
// are skipped and reported in the error, never silently deleted.
func (s *pendingStore) List() ([]Pending, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: pending results: %w", err)
	}
	var out []Pending
	var errs []error
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p, err := readPending(filepath.Join(s.dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pending) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.ID, b.ID)) })
	s.mu.Lock()
	for _, p := range out {
		s.last = max(s.last, p.Seq)
		s.remember(p.ID, p.Seq)
	}
	s.mu.Unlock()
	return out, errors.Join(errs...)
}

func readPending(path string) (Pending, error) {
	var p Pending
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("agent: read pending result: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil || p.ID == "" {
		return p, fmt.Errorf("agent: pending result %s is corrupt", path)
	}
	return p, nil
}

func (s *pendingStore) path(id string) string {
	return filepath.Join(s.dir, sanitizeID(id)+".json")
}

// sanitizeID maps a step id to a file name, injectively: letters, digits, '.' and
// '-' are kept, every other byte becomes _XX (hex).
func sanitizeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case c == '.' && i > 0: // no leading dot: hidden files are temp files
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02X", c)
		}
	}
	return b.String()
}
