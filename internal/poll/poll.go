// Package poll waits in tests for something real to happen — a leader elected, a
// member declared dead, a step converged — by polling with a deadline, so tests
// assert outcomes, never timings. Every package's tests share it.
package poll

import (
	"testing"
	"time"
)

// Interval is how often conditions are re-checked.
const Interval = 50 * time.Millisecond

// Until calls f until it returns nil and returns how long that took; after within
// it fails t naming what and f's last error.
func Until(t testing.TB, within time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(within)
	for {
		err := f()
		if err == nil {
			return time.Since(begin)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
			return time.Since(begin)
		}
		time.Sleep(Interval)
	}
}

// True is Until for a condition without an error to report.
func True(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Until(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

type notYet struct{}

func (notYet) Error() string { return "condition not met" }

var errNotYet error = notYet{}
