package agent

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
)

// backoff is capped exponential backoff with jitter, for retrying a coordinator.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max} }

// next returns the delay before the next attempt: min, 2·min, ... up to max, each
// shortened by up to a quarter at random so agents do not retry in lockstep.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur - time.Duration(rand.Int64N(int64(b.cur/4)+1))
}

func (b *backoff) reset() { b.cur = 0 }

// wait sleeps for next(); it reports false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool { return sleep(ctx, b.next()) }

// sleep waits for d or until ctx ends; it reports whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryable reports whether a request that failed with err may succeed later:
// the coordinator could not be reached, had no leader, or was overloaded.
func retryable(err error) bool {
	switch s := client.StatusOf(err); {
	case s == 0:
		return true
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s >= 500:
		return true
	}
	return false
}
