package ovs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/model"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// BridgesDriver executes ovs.bridges steps.
type BridgesDriver struct {
	db   *db
	opts options
}

var (
	_ driver.Driver    = (*BridgesDriver)(nil)
	_ driver.Outputter = (*BridgesDriver)(nil)
)

// Kind implements driver.Driver.
func (d *BridgesDriver) Kind() string { return ovsspec.KindBridges }

// Diff implements driver.Driver. Changes come in this order: Plinth's ports and
// bridges that left the manifest, then per bridge: create it (with its ports) or
// fix it, then its ports. They are applied as one transaction (see batch): one
// reconfiguration of ovs-vswitchd for the whole step.
func (d *BridgesDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	in, err := decodeBridges(raw)
	if err != nil {
		return nil, err
	}
	s, err := d.db.read(ctx)
	if err != nil {
		return nil, err
	}
	wantBridge := map[string]bool{}
	wantPort := map[string]bool{}
	for _, b := range in.Bridges {
		wantBridge[b.Name] = true
		for _, p := range b.Ports {
			wantPort[p.Name] = true
		}
	}
	bt := &batch{d: d, s: s}
	var changes []driver.Change
	for _, name := range slices.Sorted(maps.Keys(s.bridges)) {
		if b := s.bridges[name]; !wantBridge[name] && owned(b.ExternalIDs) {
			changes = append(changes, bt.change(d.removeBridge(s, b)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.portByName)) {
		p := s.portByName[name]
		b := s.bridgeOfPort[p.UUID]
		if b == nil || name == b.Name || wantPort[name] || !owned(p.ExternalIDs) || (!wantBridge[b.Name] && owned(b.ExternalIDs)) {
			continue
		}
		changes = append(changes, bt.change(staged{
			summary: fmt.Sprintf("remove port %s from bridge %s", name, b.Name),
			ops:     func(t *txn) { t.bridgePorts(b.UUID, ovsdb.MutateOperationDelete, p.UUID) },
		}))
	}
	for _, b := range in.Bridges {
		for _, c := range d.bridgeChanges(s, b) {
			changes = append(changes, bt.change(c))
		}
	}
	return changes, nil
}

// staged is one change of a step: its operations and what to check once
// ovs-vswitchd has applied them.
type staged struct {
	summary string
	ops     func(t *txn)
	// settle, if set, is checked after the commit (see BridgesDriver.settle) with
	// ports, the ports the change created or updated.
	settle *ovsspec.Bridge
	ports  []ovsspec.Port
}

// batch applies the changes of one Diff as one OVSDB transaction: ovs-vswitchd
// reconfigures once per step instead of once per bridge or port (each
// reconfiguration of a DPDK datapath costs tens of milliseconds). The first
// change's Apply commits every change; the last one's checks what they created, so
// a failed check is reported after the changes that were committed.
type batch struct {
	d       *BridgesDriver
	s       *dbView
	changes []staged

	committed bool
	err       error
}

// change adds c to the batch and returns it as a driver.Change.
func (bt *batch) change(c staged) driver.Change {
	i := len(bt.changes)
	bt.changes = append(bt.changes, c)
	return driver.Change{Summary: c.summary, Apply: func(ctx context.Context) error { return bt.apply(ctx, i) }}
}

func (bt *batch) apply(ctx context.Context, i int) error {
	if bt.err != nil {
		return bt.err
	}
	if !bt.committed {
		t, err := bt.d.db.begin(ctx, bt.s)
		if err != nil {
			return err
		}
		for _, c := range bt.changes {
			c.ops(t)
		}
		what := bt.changes[0].summary
		if n := len(bt.changes); n > 1 {
			what = fmt.Sprintf("%d changes (%s, ...)", n, what)
		}
		if err := bt.d.db.commit(ctx, t, what, bt.d.opts.settle); err != nil {
			bt.err = err
			return err
		}
		bt.committed = true
	}
	if i < len(bt.changes)-1 {
		return nil
	}
	// Each bridge checked once, with every port the batch created or updated on it.
	var checks []settleCheck
	at := map[string]int{}
	for _, c := range bt.changes {
		if c.settle == nil {
			continue
		}
		if i, ok := at[c.settle.Name]; ok {
			checks[i].ports = append(checks[i].ports, c.ports...)
			continue
		}
		at[c.settle.Name] = len(checks)
		checks = append(checks, settleCheck{bridge: *c.settle, ports: slices.Clone(c.ports)})
	}
	if err := bt.d.settle(ctx, checks); err != nil {
		bt.err = err
		return err
	}
	return nil
}

func decodeBridges(raw json.RawMessage) (ovsspec.BridgesInputs, error) {
	var in ovsspec.BridgesInputs
	if err := driver.DecodeInputs(ovsspec.KindBridges, raw, &in); err != nil {
		return in, err
	}
	seen := map[string]bool{}
	for _, b := range in.Bridges {
		names := []string{b.Name}
		for _, p := range b.Ports {
			names = append(names, p.Name)
			if len(p.Interfaces) == 0 {
				return in, driver.Permanent(fmt.Errorf("ovs: bad inputs: port %s has no interfaces", p.Name))
			}
			for _, i := range p.Interfaces {
				if i.Name != p.Name {
					names = append(names, i.Name)
				}
			}
		}
		for _, n := range names {
			if n == "" || seen[n] {
				return in, driver.Permanent(fmt.Errorf("ovs: bad inputs: name %q is empty or used twice", n))
			}
			seen[n] = true
		}
		if b.Datapath != "netdev" && b.Datapath != "system" {
			return in, driver.Permanent(fmt.Errorf("ovs: bad inputs: bridge %s: datapath %q, want netdev or system", b.Name, b.Datapath))
		}
	}
	return in, nil
}

// bridgeChanges creates b or brings an existing bridge and its ports in line.
func (d *BridgesDriver) bridgeChanges(s *dbView, b ovsspec.Bridge) []staged {
	cur := s.bridges[b.Name]
	if cur != nil {
		if li := s.localIface(cur); li == nil || li.Ofport == nil {
			// vswitchd never created it (system datapath without the kernel module):
			// start over so that the check after the change explains why.
			return []staged{d.createBridge(s, b, cur, "re-create bridge "+b.Name+" (ovs-vswitchd has not created it)")}
		}
	}
	if cur == nil {
		return []staged{d.createBridge(s, b, nil, "add bridge "+describeBridge(b))}
	}
	var changes []staged
	var fix []string
	if cur.DatapathType != b.Datapath {
		fix = append(fix, fmt.Sprintf("datapath_type %q → %q", cur.DatapathType, b.Datapath))
	}
	if !owned(cur.ExternalIDs) {
		fix = append(fix, "adopt (created outside Plinth)")
	}
	if len(fix) > 0 {
		changes = append(changes, staged{
			summary: "bridge " + b.Name + ": " + strings.Join(fix, ", "),
			ops: func(t *txn) {
				row := &model.Bridge{UUID: cur.UUID, DatapathType: b.Datapath}
				t.add(t.c.Where(row).Update(row, &row.DatapathType))
				ids := &model.Bridge{UUID: cur.UUID}
				t.mutateMap(ids, &ids.ExternalIDs, []string{ownerKey}, map[string]string{ownerKey: ownerValue})
			},
			settle: &b,
		})
	}
	for _, p := range b.Ports {
		if c, ok := d.portChange(s, cur, p); ok {
			changes = append(changes, c)
		}
	}
	return changes
}

func (d *BridgesDriver) createBridge(s *dbView, b ovsspec.Bridge, old *model.Bridge, summary string) staged {
	return staged{
		summary: summary,
		settle:  &b,
		ports:   b.Ports,
		ops: func(t *txn) {
			if old != nil {
				t.delBridge(old.UUID)
			}
			for _, p := range b.Ports { // ports moving here from another bridge
				if cur := s.portByName[p.Name]; cur != nil {
					if ob := s.bridgeOfPort[cur.UUID]; ob != nil && ob != old {
						t.bridgePorts(ob.UUID, ovsdb.MutateOperationDelete, cur.UUID)
					}
				}
			}
			t.newBridge(b)
		},
	}
}

// portChange returns the change that adds, moves, re-creates or updates port p of
// bridge cur, if it needs one.
func (d *BridgesDriver) portChange(s *dbView, cur *model.Bridge, p ovsspec.Port) (staged, bool) {
	old := s.portByName[p.Name]
	var oldBridge *model.Bridge
	if old != nil {
		oldBridge = s.bridgeOfPort[old.UUID]
	}
	var summary string
	inPlace := false
	switch {
	case old == nil || oldBridge == nil:
		summary = "add port " + describePort(p) + " to bridge " + cur.Name
	case oldBridge.UUID != cur.UUID:
		summary = fmt.Sprintf("move port %s from bridge %s to %s", p.Name, oldBridge.Name, cur.Name)
	default:
		diffs, recreate := portChange(s, old, p)
		if len(diffs) == 0 {
			return staged{}, false
		}
		verb := "update"
		if recreate {
			verb = "re-create"
		}
		summary = fmt.Sprintf("%s port %s on bridge %s: %s", verb, p.Name, cur.Name, strings.Join(diffs, ", "))
		inPlace = !recreate
	}
	return staged{
		summary: summary,
		ops: func(t *txn) {
			if inPlace {
				t.updatePort(s, old, p)
			} else {
				if oldBridge != nil {
					t.bridgePorts(oldBridge.UUID, ovsdb.MutateOperationDelete, old.UUID)
				}
				t.bridgePorts(cur.UUID, ovsdb.MutateOperationInsert, t.newPort(p))
			}
		},
		settle: &ovsspec.Bridge{Name: cur.Name, Datapath: cur.DatapathType},
		ports:  []ovsspec.Port{p},
	}, true
}

// removeBridge deletes a bridge Plinth created, unless someone else (Neutron) has
// added ports to it: then only Plinth's ports go and the bridge is released.
func (d *BridgesDriver) removeBridge(s *dbView, b *model.Bridge) staged {
	var foreign, mine []string
	var mineUUIDs []string
	for _, p := range s.bridgePorts(b) {
		if owned(p.ExternalIDs) {
			mine = append(mine, p.Name)
			mineUUIDs = append(mineUUIDs, p.UUID)
		} else {
			foreign = append(foreign, p.Name)
		}
	}
	if len(foreign) == 0 {
		return staged{
			summary: "remove bridge " + b.Name,
			ops:     func(t *txn) { t.delBridge(b.UUID) },
		}
	}
	summary := fmt.Sprintf("release bridge %s: keep it for ports Plinth did not create (%s)", b.Name, strings.Join(foreign, ", "))
	if len(mine) > 0 {
		summary += "; remove Plinth's ports " + strings.Join(mine, ", ")
	}
	return staged{
		summary: summary,
		ops: func(t *txn) {
			if len(mineUUIDs) > 0 {
				t.bridgePorts(b.UUID, ovsdb.MutateOperationDelete, mineUUIDs...)
			}
			ids := &model.Bridge{UUID: b.UUID}
			t.mutateMap(ids, &ids.ExternalIDs, []string{ownerKey}, nil)
		},
	}
}

func describeBridge(b ovsspec.Bridge) string {
	s := b.Name + " (" + b.Datapath + ")"
	if len(b.Ports) > 0 {
		var ps []string
		for _, p := range b.Ports {
			ps = append(ps, describePort(p))
		}
		s += " with ports " + strings.Join(ps, ", ")
	}
	return s
}

func describePort(p ovsspec.Port) string {
	var attrs []string
	if len(p.Interfaces) > 1 {
		var ms []string
		for _, i := range p.Interfaces {
			ms = append(ms, i.Name)
		}
		attrs = append(attrs, "bond "+p.BondMode+" of "+strings.Join(ms, "+"))
		if p.LACP != "" {
			attrs = append(attrs, "lacp "+p.LACP)
		}
	} else if i := p.Interfaces[0]; i.Type != ovsspec.TypeSystem {
		attrs = append(attrs, i.Type)
		if i.Devargs != "" {
			attrs = append(attrs, i.Devargs)
		}
	}
	if p.Tag > 0 {
		attrs = append(attrs, fmt.Sprintf("tag %d", p.Tag))
	}
	if len(attrs) == 0 {
		return p.Name
	}
	return p.Name + " [" + strings.Join(attrs, ", ") + "]"
}
