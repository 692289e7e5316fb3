package cephtest

import (
	"context"
	"testing"
	"time"
)

// New starts a cluster for t, or skips t with the reason this machine cannot run
// one. The cluster is stopped and its directory removed when t ends, failed or not.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}
