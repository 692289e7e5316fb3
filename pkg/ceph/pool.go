package ceph

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// PoolDriver runs ceph.pool steps: one replicated pool with its replication, pg
// policy, CRUSH rule, application, RBD initialisation and quotas, or its deletion.
type PoolDriver struct{ c *Client }

// Kind implements driver.Driver.
func (d *PoolDriver) Kind() string { return cephspec.KindPool }

// Diff implements driver.Driver.
func (d *PoolDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	in, err := parsePool(raw)
	if err != nil {
		return nil, err
	}
	acts, err := d.plan(ctx, in)
	d.c.forget(in.Cluster, err)
	if err != nil {
		return nil, err
	}
	return d.c.changes(in.Cluster, acts), nil
}

func (d *PoolDriver) plan(ctx context.Context, in cephspec.PoolInputs) ([]action, error) {
	cl, err := d.c.session(ctx, in.Cluster)
	if err != nil {
		return nil, err
	}
	pools, err := listPools(cl)
	if err != nil {
		return nil, err
	}
	var cur *poolState
	for i := range pools {
		if pools[i].Name == in.Name {
			cur = &pools[i]
		}
	}
	if in.Delete {
		return planDelete(in.Name, cur), nil
	}
	topo, err := observeTopology(cl)
	if err != nil {
		return nil, err
	}
	rbdReady := false
	if cur != nil && in.Application == "rbd" {
		// rbd pool init leaves this object behind once it validated the pool.
		if rbdReady, err = cl.ObjectExists(in.Name, "rbd_info"); err != nil {
			return nil, fmt.Errorf("ceph: pool %q: check RBD initialisation: %w", in.Name, err)
		}
	}
	acts, progress := planPool(in, cur, topo, rbdReady)
	if progress != "" {
		d.c.log.Info("ceph: placement groups still moving; the target is set", "progress", progress)
	}
	return acts, nil
}

// changes binds actions to the session for conn. Each Apply looks the session up
// again, so one dropped after a transport error is never used.
func (c *Client) changes(conn cephspec.Conn, acts []action) []driver.Change {
	out := make([]driver.Change, 0, len(acts))
	for _, a := range acts {
		out = append(out, driver.Change{Summary: a.summary, Apply: func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			cl, err := c.session(ctx, conn)
			if err != nil {
				return err
			}
			err = a.do(cl)
			c.forget(conn, err)
			return err
		}})
	}
	return out
}

// Outputs implements driver.Outputter; a pool has none unless the client skips.
func (d *PoolDriver) Outputs(context.Context, json.RawMessage) (map[string]string, error) {
	return nil, nil
}
