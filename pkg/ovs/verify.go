package ovs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/model"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// settleCheck is one bridge a step created or changed, with the ports it created
// or updated there.
type settleCheck struct {
	bridge ovsspec.Bridge
	ports  []ovsspec.Port
}

// settle checks what a step created once ovs-vswitchd has applied it: each bridge
// exists in the datapath, every interface has an ofport and no error, and links are
// up. An interface in error is removed with its port, so that ovs-vswitchd stops
// retrying it on every reconfiguration and flooding its log; the error quotes OVS.
// One read serves every bridge and one wait every link: each round trip is time
// the step spends beyond ovs-vswitchd's own reconfiguration.
func (d *BridgesDriver) settle(ctx context.Context, checks []settleCheck) error {
	if len(checks) == 0 {
		return nil
	}
	s, err := d.db.read(ctx)
	if err != nil {
		return err
	}
	var ports []ovsspec.Port
	for _, c := range checks {
		if err := d.settleBridge(ctx, s, c.bridge, c.ports); err != nil {
			return err
		}
		ports = append(ports, c.ports...)
	}
	return d.waitLinks(ctx, ports)
}

// settleBridge checks bridge b and its ports in s; it removes what failed and
// returns why.
func (d *BridgesDriver) settleBridge(ctx context.Context, s *dbView, b ovsspec.Bridge, ports []ovsspec.Port) error {
	br := s.bridges[b.Name]
	if br == nil {
		return fmt.Errorf("ovs: bridge %s vanished after it was added", b.Name)
	}
	if li := s.localIface(br); li == nil || li.Ofport == nil || *li.Ofport < 0 {
		msg := fmt.Sprintf("ovs: bridge %s: ovs-vswitchd could not create it with datapath %q", b.Name, br.DatapathType)
		if br.DatapathType == "system" || br.DatapathType == "" {
			msg += " (no openvswitch kernel module? use datapath netdev on hosts without it)"
		}
		if owned(br.ExternalIDs) {
			t, err := d.db.begin(ctx, s)
			if err != nil {
				return err
			}
			t.delBridge(br.UUID)
			if err := d.db.commit(ctx, t, "remove failed bridge "+b.Name, d.opts.settle); err != nil {
				return fmt.Errorf("%s; removing it failed too: %w", msg, err)
			}
			msg += "; removed it so ovs-vswitchd stops retrying"
		}
		return driver.Permanent(errors.New(msg))
	}
	var problems []string
	var broken []string
	for _, p := range ports {
		cur := s.portByName[p.Name]
		if cur == nil {
			return fmt.Errorf("ovs: port %s vanished after it was added", p.Name)
		}
		for _, i := range s.portIfaces(cur) {
			if e := ifaceError(i); e != "" {
				problems = append(problems, fmt.Sprintf("port %s: interface %s: %s", p.Name, i.Name, e))
				if !slices.Contains(broken, cur.UUID) {
					broken = append(broken, cur.UUID)
				}
			}
		}
	}
	if len(broken) > 0 {
		t, err := d.db.begin(ctx, s)
		if err != nil {
			return err
		}
		t.bridgePorts(br.UUID, ovsdb.MutateOperationDelete, broken...)
		msg := "ovs: " + strings.Join(problems, "; ")
		if err := d.db.commit(ctx, t, "remove failed ports", d.opts.settle); err != nil {
			return fmt.Errorf("%s; removing them failed too: %w", msg, err)
		}
		return errors.New(msg + " (removed so ovs-vswitchd stops retrying)")
	}
	return nil
}

// waitLinks waits for the links of dpdk and system interfaces to come up. The
// ovsdb-server does the waiting (one wait operation an interface, answered once
// every link_state is "up"), in slices of a second; when time is up, a read says
// which links are down.
func (d *BridgesDriver) waitLinks(ctx context.Context, ports []ovsspec.Port) error {
	var names []string
	for _, p := range ports {
		for _, in := range p.Interfaces {
			if in.Type != ovsspec.TypeInternal { // an internal port's link follows its admin state on the host
				names = append(names, in.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	deadline := time.Now().Add(d.opts.linkWait)
	for {
		slice := int(min(time.Until(deadline), time.Second) / time.Millisecond)
		if slice <= 0 {
			break
		}
		ops := make([]ovsdb.Operation, len(names))
		for i, name := range names {
			ops[i] = ovsdb.Operation{
				Op: ovsdb.OperationWait, Table: model.InterfaceTable, Timeout: &slice, Until: string(ovsdb.WaitConditionEqual),
				Where:   []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)},
				Columns: []string{"link_state"}, Rows: []ovsdb.Row{{"link_state": "up"}},
			}
		}
		start := time.Now()
		if _, err := d.db.transact(ctx, "wait for links", ops); err == nil {
			return nil
		}
		// Not a timed-out wait (ovsdb-server restarting): don't spin.
		if time.Since(start) < time.Duration(slice)*time.Millisecond/2 {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	s, err := d.db.read(ctx)
	if err != nil {
		return err
	}
	if down := linksDown(s, ports); len(down) > 0 {
		return fmt.Errorf("ovs: link down: %s", strings.Join(down, ", "))
	}
	return nil
}

// bridgeStatus reads bridges' interfaces in s: the outputs, what is wrong, and the
// interfaces whose only fault is a link not up (one a port), which a link wait may
// still see come up.
func bridgeStatus(s *dbView, bridges []ovsspec.Bridge) (out map[string]string, problems []string, linkDown []ovsspec.Port) {
	out = map[string]string{}
	for _, b := range bridges {
		var ports []string
		for _, p := range b.Ports {
			var st []string
			for _, want := range p.Interfaces {
				i := s.ifaceByName[want.Name]
				switch {
				case i == nil:
					problems = append(problems, want.Name+": missing")
					continue
				case ifaceError(i) != "":
					problems = append(problems, want.Name+": "+ifaceError(i))
				case i.Ofport == nil:
					problems = append(problems, want.Name+": no ofport")
				case want.Type != ovsspec.TypeInternal && strOr(i.LinkState) != "up":
					problems = append(problems, want.Name+": link "+orNone(strOr(i.LinkState)))
					linkDown = append(linkDown, ovsspec.Port{Name: p.Name, Interfaces: []ovsspec.Interface{want}})
				}
				st = append(st, fmt.Sprintf("%s ofport %d link %s", want.Name, intOr(i.Ofport), orNone(strOr(i.LinkState))))
			}
			ports = append(ports, strings.Join(st, " + "))
		}
		out["bridge/"+b.Name] = strings.Join(ports, "; ")
	}
	return out, problems, linkDown
}

func linksDown(s *dbView, ports []ovsspec.Port) []string {
	var down []string
	for _, p := range ports {
		for _, in := range p.Interfaces {
			if in.Type == ovsspec.TypeInternal {
				continue // an internal port's link follows its admin state on the host
			}
			if i := s.ifaceByName[in.Name]; i == nil || strOr(i.LinkState) != "up" {
				down = append(down, in.Name)
			}
		}
	}
	return down
}

// Outputs implements driver.Outputter: every port has an ofport and no error, links
// are up, and every DPDK interface is polled by a PMD thread on pmd-cpu-mask's CPUs.
func (d *BridgesDriver) Outputs(ctx context.Context, raw json.RawMessage) (map[string]string, error) {
	in, err := decodeBridges(raw)
	if err != nil {
		return nil, err
	}
	// ovs-vswitchd answers for its PMD threads while ovsdb-server answers the read:
	// asked one after the other, the step would wait for both in turn.
	dpdk := dpdkInterfaces(in.Bridges)
	var pmd *pmdQuery
	if len(dpdk) > 0 {
		qctx, cancel := context.WithCancel(ctx)
		defer cancel()
		pmd = d.opts.askPMD(qctx)
	}
	s, err := d.db.read(ctx)
	if err != nil {
		return nil, err
	}
	out, problems, linkWait := bridgeStatus(s, in.Bridges)
	if len(linkWait) > 0 && len(linkWait) == len(problems) {
		// A link that came up a moment ago may not be in the database yet (a retried
		// step has nothing to apply, so settle did not wait): wait as settle does.
		if err := d.waitLinks(ctx, linkWait); err != nil {
			return nil, err
		}
		if s, err = d.db.read(ctx); err != nil {
			return nil, err
		}
		out, problems, _ = bridgeStatus(s, in.Bridges)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("ovs: %s", strings.Join(problems, "; "))
	}
	if pmd != nil {
		threads, err := pmd.answer(ctx)
		if err != nil {
			return nil, err
		}
		cores, err := pmdVerdict(threads, s.root.OtherConfig["pmd-cpu-mask"], dpdk)
		if err != nil {
			return nil, err
		}
		out["pmd_cores"] = cores
	}
	return out, nil
}

// dpdkInterfaces names the DPDK interfaces of bridges.
func dpdkInterfaces(bridges []ovsspec.Bridge) []string {
	var names []string
	for _, b := range bridges {
		for _, p := range b.Ports {
			for _, i := range p.Interfaces {
				if i.Type == ovsspec.TypeDPDK {
					names = append(names, i.Name)
				}
			}
		}
	}
	return names
}
