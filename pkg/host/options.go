package host

import (
	"context"
	"log/slog"
	"time"
)

// Option configures the drivers of this package.
type Option func(*options)

type options struct {
	log *slog.Logger
	// probe reports whether a coordinator is reachable; nil disables the guard.
	probe           func(ctx context.Context) error
	rollbackTimeout time.Duration
	procSys         string // sysctl root, normally /proc/sys
	sysfs           string // hugepages root, normally /sys
}

// DefaultRollbackTimeout is how long a guarded change may leave the host without a
// coordinator before it is rolled back.
const DefaultRollbackTimeout = 20 * time.Second

func newOptions(opts []Option) options {
	o := options{log: slog.Default(), rollbackTimeout: DefaultRollbackTimeout, procSys: "/proc/sys", sysfs: "/sys"}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// WithReachability guards the changes of every Diff: probe must succeed before the
// first change (else they go unguarded, with a warning) and again within the rollback
// timeout after the last, or every one of them is undone and the step fails without
// retry. The agent passes "can I reach a coordinator".
func WithReachability(probe func(ctx context.Context) error) Option {
	return func(o *options) { o.probe = probe }
}

// WithRollbackTimeout sets how long WithReachability's probe may keep failing after
// the changes before they are rolled back.
func WithRollbackTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.rollbackTimeout = d
		}
	}
}

// WithProcSys points the sysctl driver at another /proc/sys (tests use a directory).
func WithProcSys(dir string) Option {
	return func(o *options) { o.procSys = dir }
}

// WithSysfs points the hugepages driver at another /sys (tests use a directory).
func WithSysfs(dir string) Option {
	return func(o *options) { o.sysfs = dir }
}
