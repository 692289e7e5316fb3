// Package driver is the contract between the agent's step loop and the code that
// changes a host: every step kind has one Driver, and Run drives it through
// observe → diff → apply → verify.
//
// Drivers own side effects; this package owns the order in which they happen and how
// their outcome is reported. It must never know about any particular kind of step.
package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Change is one difference between what a step wants and what the host has, with the
// action that removes it. Apply must be idempotent: it may run again after a crash.
type Change struct {
	// Summary is a one-line, human-readable description ("mtu eth1: 1500 -> 9000").
	Summary string `json:"summary"`
	// Apply makes the change. Nil means the change can only be reported.
	Apply func(ctx context.Context) error `json:"-"`
}

// Driver executes steps of one kind.
type Driver interface {
	// Kind is the step kind this driver executes, e.g. "host.network".
	Kind() string
	// Diff observes the host and returns what must change to reach inputs; none means
	// the host is in sync. Diff must not change anything.
	Diff(ctx context.Context, inputs json.RawMessage) ([]Change, error)
}

// Outputter is implemented by drivers whose steps produce values for later steps or
// the coordinator (generated keys, join results). Outputs is called after verify.
type Outputter interface {
	Outputs(ctx context.Context, inputs json.RawMessage) (map[string]string, error)
}

// Result is what the agent reports for one run of a step. It is the one type for
// that meaning from end to end: wire.StepReport carries it to a coordinator,
// state.StepResult into the log, plan.Finish reads it and plan.Record.LastResult
// keeps it. It lives here, below all of them, because plan and state need it.
type Result struct {
	// Changes lists what was applied (or, for a check, what has drifted).
	Changes []string          `json:"changes,omitempty"`
	Outputs map[string]string `json:"outputs,omitempty"`
	Error   string            `json:"error,omitempty"`
	// Retryable says whether running the step again could help.
	Retryable bool `json:"retryable,omitempty"`
}

// OK reports whether the run succeeded.
func (r Result) OK() bool { return r.Error == "" }

// permanentError marks an error that retrying cannot fix (bad inputs, missing hardware).
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one a retry cannot fix.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err (or anything it wraps) was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Registry maps step kinds to drivers.
type Registry struct{ drivers map[string]Driver }

// NewRegistry returns a registry holding ds; a duplicate kind is an error.
func NewRegistry(ds ...Driver) (*Registry, error) {
	r := &Registry{drivers: map[string]Driver{}}
	for _, d := range ds {
		if _, dup := r.drivers[d.Kind()]; dup {
			return nil, fmt.Errorf("driver: kind %q registered twice", d.Kind())
		}
		r.drivers[d.Kind()] = d
	}
	return r, nil
}

// Get returns the driver for kind.
func (r *Registry) Get(kind string) (Driver, bool) {
	d, ok := r.drivers[kind]
	return d, ok
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	out := make([]string, 0, len(r.drivers))
	for k := range r.drivers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxPasses bounds how often Run re-diffs after applying. One change can undo state
// another diff entry took as settled (removing a subnet's last address drops the
// routes through it), so Run applies what is left in a further pass before it
// declares verification failed.
const maxPasses = 3

// Run observes, diffs, applies and verifies one step. It never panics on a driver
// error; everything ends up in the Result.
func Run(ctx context.Context, d Driver, inputs json.RawMessage) Result {
	changes, err := d.Diff(ctx, inputs)
	if err != nil {
		return failed(fmt.Errorf("%s: observe: %w", d.Kind(), err))
	}
	var res Result
	for pass := 1; len(changes) > 0; pass++ {
		if pass > maxPasses {
			return withChanges(failed(fmt.Errorf("%s: verify: still differs after apply: %s", d.Kind(), Summaries(changes))), res.Changes)
		}
		for _, c := range changes {
			if c.Apply == nil {
				return withChanges(failed(fmt.Errorf("%s: %s: cannot be applied automatically", d.Kind(), c.Summary)), res.Changes)
			}
			if err := c.Apply(ctx); err != nil {
				res.Error = fmt.Sprintf("%s: apply %q: %v", d.Kind(), c.Summary, err)
				res.Retryable = !IsPermanent(err)
				return res
			}
			res.Changes = append(res.Changes, c.Summary)
		}
		if changes, err = d.Diff(ctx, inputs); err != nil {
			return withChanges(failed(fmt.Errorf("%s: verify: %w", d.Kind(), err)), res.Changes)
		}
	}
	if o, ok := d.(Outputter); ok {
		out, err := o.Outputs(ctx, inputs)
		if err != nil {
			return withChanges(failed(fmt.Errorf("%s: outputs: %w", d.Kind(), err)), res.Changes)
		}
		res.Outputs = out
	}
	return res
}

// Check observes and diffs without applying: the returned summaries are drift.
func Check(ctx context.Context, d Driver, inputs json.RawMessage) ([]string, error) {
	changes, err := d.Diff(ctx, inputs)
	if err != nil {
		return nil, fmt.Errorf("%s: observe: %w", d.Kind(), err)
	}
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, c.Summary)
	}
	return out, nil
}

// Summaries joins change summaries for a message.
func Summaries(cs []Change) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.Summary
	}
	return strings.Join(s, "; ")
}

func failed(err error) Result {
	return Result{Error: err.Error(), Retryable: !IsPermanent(err)}
}

func withChanges(r Result, cs []string) Result {
	r.Changes = cs
	return r
}
