package ovs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	lmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/plinth-dev/plinth/pkg/ovs/model"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// Interface options and port settings Plinth manages; others are left alone.
var managedOptions = []string{"dpdk-devargs", "n_rxq"}

const lacpTimeKey = "lacp-time"

func ifaceOptions(in ovsspec.Interface) map[string]string {
	o := map[string]string{}
	if in.Type == ovsspec.TypeDPDK {
		o["dpdk-devargs"] = in.Devargs
		if in.RxQueues > 0 {
			o["n_rxq"] = strconv.Itoa(in.RxQueues)
		}
	}
	return o
}

func ptr[T any](v T) *T { return &v }

// newIface inserts an Interface row and returns its named UUID.
func (t *txn) newIface(in ovsspec.Interface) string {
	n := t.name("iface")
	row := &model.Interface{UUID: n, Name: in.Name, Type: ovsspec.OVSType(in.Type), Options: ifaceOptions(in)}
	if in.MTU > 0 {
		row.MTURequest = ptr(in.MTU)
	}
	t.add(t.c.Create(row))
	return n
}

// newPort inserts a Port row with its interfaces and returns its named UUID.
func (t *txn) newPort(p ovsspec.Port) string {
	row := &model.Port{Name: p.Name, ExternalIDs: map[string]string{ownerKey: ownerValue}}
	for _, in := range p.Interfaces {
		row.Interfaces = append(row.Interfaces, t.newIface(in))
	}
	setPortFields(row, p)
	row.UUID = t.name("port")
	t.add(t.c.Create(row))
	return row.UUID
}

// setPortFields sets the Port columns Plinth manages from p.
func setPortFields(row *model.Port, p ovsspec.Port) {
	row.Tag, row.Trunks, row.BondMode, row.LACP = nil, p.Trunks, nil, nil
	if p.Tag > 0 {
		row.Tag = ptr(p.Tag)
	}
	if len(p.Interfaces) > 1 {
		row.BondMode = ptr(p.BondMode)
		if p.LACP != "" {
			row.LACP = ptr(p.LACP)
		}
	}
	if p.LACPTime != "" {
		if row.OtherConfig == nil {
			row.OtherConfig = map[string]string{}
		}
		row.OtherConfig[lacpTimeKey] = p.LACPTime
	}
}

// newBridge inserts a bridge with its local internal port and ports, and adds it to
// the Open_vSwitch table, as ovs-vsctl add-br does.
func (t *txn) newBridge(b ovsspec.Bridge) {
	ports := []string{t.newPort(ovsspec.Port{Name: b.Name, Interfaces: []ovsspec.Interface{{Name: b.Name, Type: ovsspec.TypeInternal}}})}
	for _, p := range b.Ports {
		ports = append(ports, t.newPort(p))
	}
	row := &model.Bridge{UUID: t.name("bridge"), Name: b.Name, DatapathType: b.Datapath, Ports: ports,
		ExternalIDs: map[string]string{ownerKey: ownerValue}}
	t.add(t.c.Create(row))
	t.mutateRoot(func(r *model.OpenvSwitch) any { return &r.Bridges }, ovsdb.MutateOperationInsert, []string{row.UUID})
}

func (t *txn) delBridge(uuid string) {
	t.mutateRoot(func(r *model.OpenvSwitch) any { return &r.Bridges }, ovsdb.MutateOperationDelete, []string{uuid})
}

// bridgePorts adds (insert) or removes (delete) port UUIDs on an existing bridge.
// Removed Port and Interface rows are garbage-collected by ovsdb-server.
func (t *txn) bridgePorts(bridgeUUID string, mutator ovsdb.Mutator, ports ...string) {
	row := &model.Bridge{UUID: bridgeUUID}
	t.add(t.c.Where(row).Mutate(row, lmodel.Mutation{Field: &row.Ports, Mutator: mutator, Value: ports}))
}

// mutateMap replaces keys of a map column: delete them, then insert the wanted ones.
func (t *txn) mutateMap(m lmodel.Model, field any, keys []string, want map[string]string) {
	t.add(t.c.Where(m).Mutate(m, lmodel.Mutation{Field: field, Mutator: ovsdb.MutateOperationDelete, Value: keys}))
	if len(want) > 0 {
		t.add(t.c.Where(m).Mutate(m, lmodel.Mutation{Field: field, Mutator: ovsdb.MutateOperationInsert, Value: want}))
	}
}

// portChange describes how an existing port differs from p. recreate means the
// difference needs new rows (interfaces, their type or devargs, an error).
func portChange(s *dbView, cur *model.Port, p ovsspec.Port) (diffs []string, recreate bool) {
	ifaces := s.portIfaces(cur)
	var have []string
	byName := map[string]*model.Interface{}
	for _, i := range ifaces {
		have = append(have, i.Name)
		byName[i.Name] = i
	}
	var want []string
	for _, in := range p.Interfaces {
		want = append(want, in.Name)
	}
	slices.Sort(have)
	if !slices.Equal(have, slices.Sorted(slices.Values(want))) {
		return []string{fmt.Sprintf("interfaces %s → %s", strings.Join(have, ","), strings.Join(slices.Sorted(slices.Values(want)), ","))}, true
	}
	for _, in := range p.Interfaces {
		i := byName[in.Name]
		if e := ifaceError(i); e != "" {
			return []string{fmt.Sprintf("%s: OVS reports %q", in.Name, e)}, true
		}
		if i.Type != ovsspec.OVSType(in.Type) {
			return []string{fmt.Sprintf("%s: type %q → %q", in.Name, i.Type, ovsspec.OVSType(in.Type))}, true
		}
		wo := ifaceOptions(in)
		if i.Options["dpdk-devargs"] != wo["dpdk-devargs"] {
			return []string{fmt.Sprintf("%s: dpdk-devargs %q → %q", in.Name, i.Options["dpdk-devargs"], wo["dpdk-devargs"])}, true
		}
		if i.Options["n_rxq"] != wo["n_rxq"] {
			diffs = append(diffs, fmt.Sprintf("%s: n_rxq %s → %s", in.Name, orNone(i.Options["n_rxq"]), orNone(wo["n_rxq"])))
		}
		if got, w := intOr(i.MTURequest), in.MTU; got != w {
			diffs = append(diffs, fmt.Sprintf("%s: mtu_request %s → %s", in.Name, itoaOr(got), itoaOr(w)))
		}
	}
	wantRow := &model.Port{}
	setPortFields(wantRow, p)
	if intOr(cur.Tag) != intOr(wantRow.Tag) {
		diffs = append(diffs, fmt.Sprintf("tag %s → %s", itoaOr(intOr(cur.Tag)), itoaOr(intOr(wantRow.Tag))))
	}
	if !slices.Equal(slices.Sorted(slices.Values(cur.Trunks)), slices.Sorted(slices.Values(p.Trunks))) {
		diffs = append(diffs, fmt.Sprintf("trunks %v → %v", cur.Trunks, p.Trunks))
	}
	if strOr(cur.BondMode) != strOr(wantRow.BondMode) {
		diffs = append(diffs, fmt.Sprintf("bond_mode %s → %s", orNone(strOr(cur.BondMode)), orNone(strOr(wantRow.BondMode))))
	}
	if strOr(cur.LACP) != strOr(wantRow.LACP) {
		diffs = append(diffs, fmt.Sprintf("lacp %s → %s", orNone(strOr(cur.LACP)), orNone(strOr(wantRow.LACP))))
	}
	if cur.OtherConfig[lacpTimeKey] != p.LACPTime {
		diffs = append(diffs, fmt.Sprintf("lacp-time %s → %s", orNone(cur.OtherConfig[lacpTimeKey]), orNone(p.LACPTime)))
	}
	if !owned(cur.ExternalIDs) {
		diffs = append(diffs, "adopt (created outside Plinth)")
	}
	return diffs, false
}

// updatePort brings an existing port's columns to p in place.
func (t *txn) updatePort(s *dbView, cur *model.Port, p ovsspec.Port) {
	row := &model.Port{UUID: cur.UUID}
	setPortFields(row, p)
	t.add(t.c.Where(row).Update(row, &row.Tag, &row.Trunks, &row.BondMode, &row.LACP))
	lt := map[string]string{}
	if p.LACPTime != "" {
		lt[lacpTimeKey] = p.LACPTime
	}
	pr := &model.Port{UUID: cur.UUID}
	t.mutateMap(pr, &pr.OtherConfig, []string{lacpTimeKey}, lt)
	pe := &model.Port{UUID: cur.UUID}
	t.mutateMap(pe, &pe.ExternalIDs, []string{ownerKey}, map[string]string{ownerKey: ownerValue})
	byName := map[string]*model.Interface{}
	for _, i := range s.portIfaces(cur) {
		byName[i.Name] = i
	}
	for _, in := range p.Interfaces {
		i := byName[in.Name]
		ir := &model.Interface{UUID: i.UUID}
		t.mutateMap(ir, &ir.Options, managedOptions, ifaceOptions(in))
		mr := &model.Interface{UUID: i.UUID}
		if in.MTU > 0 {
			mr.MTURequest = ptr(in.MTU)
		}
		t.add(t.c.Where(mr).Update(mr, &mr.MTURequest))
	}
}

// ifaceError is OVS's complaint about an interface: its error column, or an ofport
// of -1 (OVS failed to add it).
func ifaceError(i *model.Interface) string {
	switch {
	case i.Error != nil && *i.Error != "":
		return *i.Error
	case i.Ofport != nil && *i.Ofport == -1:
		return "ofport -1: ovs-vswitchd could not add the interface"
	}
	return ""
}

func intOr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func strOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func itoaOr(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
