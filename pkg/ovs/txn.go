package ovs

import (
	"context"
	"fmt"
	"time"

	"github.com/ovn-org/libovsdb/client"
	lmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/plinth-dev/plinth/pkg/ovs/model"
)

// txn collects the operations of one change; commit sends them as one transaction
// that also bumps next_cfg, then waits until ovs-vswitchd has applied it (cur_cfg),
// the way ovs-vsctl does without --no-wait.
type txn struct {
	c    client.Client
	root string // Open_vSwitch row UUID
	ops  []ovsdb.Operation
	err  error
	n    int // named-UUID counter
	// force commits even without operations: a bare next_cfg round trip.
	force bool
}

// sync waits until ovs-vswitchd has read the database as it is now (after a
// restart: the new process is up and has configured itself).
func (d *db) sync(ctx context.Context, what string, wait time.Duration) error {
	var s *dbView
	if err := d.poll(ctx, wait, func(got *dbView) bool { s = got; return true }); err != nil {
		return fmt.Errorf("ovs: %s: %w", what, err)
	}
	t, err := d.begin(ctx, s)
	if err != nil {
		return err
	}
	t.force = true
	return d.commit(ctx, t, what, wait)
}

func (d *db) begin(ctx context.Context, s *dbView) (*txn, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	return &txn{c: c, root: s.root.UUID}, nil
}

// add appends ops built by a libovsdb API call, keeping the first error.
func (t *txn) add(ops []ovsdb.Operation, err error) {
	if err != nil && t.err == nil {
		t.err = err
	}
	t.ops = append(t.ops, ops...)
}

// name returns a fresh named UUID for a row inserted by this transaction.
func (t *txn) name(prefix string) string {
	t.n++
	return fmt.Sprintf("%s%d", prefix, t.n)
}

func (t *txn) mutateRoot(field func(*model.OpenvSwitch) any, mutator ovsdb.Mutator, value any) {
	row := &model.OpenvSwitch{UUID: t.root}
	t.add(t.c.Where(row).Mutate(row, lmodel.Mutation{Field: field(row), Mutator: mutator, Value: value}))
}

// commit runs the transaction and waits for ovs-vswitchd to catch up (wait > 0).
func (d *db) commit(ctx context.Context, t *txn, what string, wait time.Duration) error {
	if t.err != nil {
		return fmt.Errorf("ovs: %s: build transaction: %w", what, t.err)
	}
	if len(t.ops) == 0 && !t.force {
		return nil
	}
	t.mutateRoot(func(r *model.OpenvSwitch) any { return &r.NextCfg }, ovsdb.MutateOperationAdd, 1)
	n := len(t.ops)
	ops := append(t.ops, ovsdb.Operation{
		Op: ovsdb.OperationSelect, Table: model.OpenvSwitchTable, Columns: []string{"next_cfg"},
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: t.root})},
	})
	if t.err != nil {
		return fmt.Errorf("ovs: %s: build transaction: %w", what, t.err)
	}
	res, err := d.transact(ctx, what, ops)
	if err != nil {
		return err
	}
	if wait <= 0 {
		return nil
	}
	var next int
	if rows := res[n].Rows; len(rows) == 1 {
		if v, ok := rows[0]["next_cfg"].(float64); ok {
			next = int(v)
		} else if v, ok := rows[0]["next_cfg"].(int); ok {
			next = v
		}
	}
	return d.waitApplied(ctx, what, next, wait)
}

// waitApplied waits until cur_cfg reaches next: ovs-vswitchd has reconfigured.
// ovsdb-server does the waiting (a "wait" operation, re-evaluated on every change),
// in slices of a second so that a cur_cfg that jumped past next (someone else
// changed the database too) is noticed with a plain read.
func (d *db) waitApplied(ctx context.Context, what string, next int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	cur := -1
	for {
		slice := int(min(time.Until(deadline), time.Second) / time.Millisecond)
		op := ovsdb.Operation{
			Op: ovsdb.OperationWait, Table: model.OpenvSwitchTable, Timeout: &slice, Until: string(ovsdb.WaitConditionEqual),
			Where:   []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: d.rootUUID(ctx)})},
			Columns: []string{"cur_cfg"}, Rows: []ovsdb.Row{{"cur_cfg": next}},
		}
		if slice > 0 {
			if _, err := d.transact(ctx, what, []ovsdb.Operation{op}); err == nil {
				return nil
			}
		}
		if s, err := d.read(ctx); err == nil {
			if cur = s.root.CurCfg; cur >= next {
				return nil
			}
		} else {
			d.Close() // a restarting ovsdb-server: dial again next round
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ovs: %s: ovs-vswitchd has not applied it within %s (cur_cfg %d, want %d): is ovs-vswitchd running?", what, wait, cur, next)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// poll reads views until done returns true or wait passes; read errors (a
// restarting ovsdb-server) are retried.
func (d *db) poll(ctx context.Context, wait time.Duration, done func(*dbView) bool) error {
	deadline := time.Now().Add(wait)
	var last error
	for {
		s, err := d.read(ctx)
		if err == nil && done(s) {
			return nil
		}
		if err != nil {
			last = err
			d.Close()
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("last read: %w", last)
			}
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
