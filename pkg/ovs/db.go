package ovs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	lmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/plinth-dev/plinth/pkg/ovs/model"
)

// db is a lazily (re)connected libovsdb client. Reads are select transactions, not a
// monitor cache: one transaction returns a consistent view of all four tables,
// and a read right after our own write can never see a stale cache.
type db struct {
	endpoint string
	mu       sync.Mutex
	c        client.Client
	root     string // the Open_vSwitch row's UUID, once known
}

// rootUUID is the Open_vSwitch row's UUID (it never changes in a database's life).
func (d *db) rootUUID(ctx context.Context) string {
	d.mu.Lock()
	root := d.root
	d.mu.Unlock()
	if root == "" {
		if s, err := d.read(ctx); err == nil {
			root = s.root.UUID
		}
	}
	return root
}

// conn returns a connected client, dialling again after a disconnect (the OVS
// service restarts ovsdb-server too).
func (d *db) conn(ctx context.Context) (client.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil && d.c.Connected() {
		return d.c, nil
	}
	if d.c != nil {
		d.c.Close()
		d.c = nil
	}
	cm, err := model.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("ovs: database model: %w", err)
	}
	quiet := logr.Discard()
	c, err := client.NewOVSDBClient(cm, client.WithEndpoint(d.endpoint), client.WithLogger(&quiet))
	if err != nil {
		return nil, fmt.Errorf("ovs: client for %s: %w", d.endpoint, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Connect(cctx); err != nil {
		return nil, fmt.Errorf("ovs: connect to ovsdb-server at %s (is the OVS service running?): %w", d.endpoint, err)
	}
	d.c = c
	return c, nil
}

// Close drops the connection.
func (d *db) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		d.c.Close()
		d.c = nil
	}
}

// transact runs ops as one transaction and checks every operation's result.
func (d *db) transact(ctx context.Context, what string, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.Transact(ctx, ops...)
	if errors.Is(err, client.ErrNotConnected) {
		d.Close() // nothing was sent: reconnect and send once more
		if c, err = d.conn(ctx); err == nil {
			res, err = c.Transact(ctx, ops...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ovs: %s: transact: %w", what, err)
	}
	opErrs, err := ovsdb.CheckOperationResults(res, ops)
	if err != nil {
		msgs := make([]string, 0, len(opErrs)+1)
		for _, e := range opErrs {
			op := e.Operation()
			msgs = append(msgs, fmt.Sprintf("%s %s: %v", op.Op, op.Table, e))
		}
		if len(msgs) == 0 {
			msgs = append(msgs, err.Error())
		}
		return nil, fmt.Errorf("ovs: %s: %s", what, strings.Join(msgs, "; "))
	}
	return res, nil
}

// read reads Open_vSwitch, Bridge, Port and Interface in one transaction.
func (d *db) read(ctx context.Context) (*dbView, error) {
	return d.readTables(ctx, model.OpenvSwitchTable, model.BridgeTable, model.PortTable, model.InterfaceTable)
}

// readRoot reads the Open_vSwitch table alone: all the DPDK settings need.
func (d *db) readRoot(ctx context.Context) (*dbView, error) {
	return d.readTables(ctx, model.OpenvSwitchTable)
}

// readTables reads tables (Open_vSwitch among them) in one transaction.
func (d *db) readTables(ctx context.Context, tables ...string) (*dbView, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	ops := make([]ovsdb.Operation, len(tables))
	for i, t := range tables {
		ops[i] = ovsdb.Operation{Op: ovsdb.OperationSelect, Table: t, Columns: readColumns[t]}
	}
	res, err := d.transact(ctx, "read", ops)
	if err != nil {
		return nil, err
	}
	dbm := c.Cache().DatabaseModel()
	s := newDBView()
	for i, t := range tables {
		for j := range res[i].Rows {
			row := res[i].Rows[j]
			uuid, _ := row["_uuid"].(ovsdb.UUID)
			m, err := lmodel.CreateModel(dbm, t, &row, uuid.GoUUID)
			if err != nil {
				return nil, fmt.Errorf("ovs: read %s row %s: %w", t, uuid.GoUUID, err)
			}
			s.add(m)
		}
	}
	if s.root != nil {
		d.mu.Lock()
		d.root = s.root.UUID
		d.mu.Unlock()
	}
	if s.root == nil {
		return nil, errors.New("ovs: the Open_vSwitch table is empty: the OVS service has not initialised its database (ovs-vsctl init)")
	}
	return s, nil
}

// readColumns are the columns a read selects, per table: those the drivers use.
// Decoding a column costs the same whether or not anything reads it, and the
// columns ovs-vswitchd keeps counters and status in were most of a read's bytes;
// a step reads the tables five or six times (2.2 ms a read with every column, under
// 1 ms with these). TestReadColumnsCoverUsedFields fails when code uses a model
// field whose column is not here.
var readColumns = map[string][]string{
	model.OpenvSwitchTable: {"_uuid", "bridges", "cur_cfg", "dpdk_initialized", "dpdk_version", "external_ids", "next_cfg", "other_config"},
	model.BridgeTable:      {"_uuid", "datapath_type", "external_ids", "name", "other_config", "ports"},
	model.PortTable:        {"_uuid", "bond_mode", "external_ids", "interfaces", "lacp", "name", "other_config", "tag", "trunks"},
	model.InterfaceTable:   {"_uuid", "error", "external_ids", "link_state", "mtu", "mtu_request", "name", "ofport", "options", "other_config", "type"},
}
