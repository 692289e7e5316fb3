package poll

import (
	"errors"
	"testing"
	"time"
)

// recorder captures a Fatalf without stopping the calling test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = format }

func TestUntilSucceedsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, time.Second, "third call", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("called %d times", n)
	}
}

func TestUntilFailsAfterTheDeadline(t *testing.T) {
	r := &recorder{TB: t}
	True(r, 120*time.Millisecond, "never", func() bool { return false })
	if r.failed == "" {
		t.Fatal("a condition that never holds did not fail the test")
	}
}
