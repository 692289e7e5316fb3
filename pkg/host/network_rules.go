package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ruleKeyOf is the key of a kernel rule.
func ruleKeyOf(r netlink.Rule) ruleKey {
	k := ruleKey{Family: r.Family, Priority: r.Priority, IIF: r.IifName, OIF: r.OifName, Mark: r.Mark, Table: r.Table}
	if p, ok := toPrefix(r.Src); ok {
		k.From = p.Masked().String()
	}
	if p, ok := toPrefix(r.Dst); ok {
		k.To = p.Masked().String()
	}
	return k
}

// describeRule renders "rule 1000 from 10.0.5.0/24 lookup 205".
func describeRule(k ruleKey) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %d", k.Priority)
	for _, sel := range [][2]string{{"from", k.From}, {"to", k.To}, {"iif", k.IIF}, {"oif", k.OIF}} {
		if sel[1] != "" {
			b.WriteString(" " + sel[0] + " " + sel[1])
		}
	}
	if k.Mark != 0 {
		fmt.Fprintf(&b, " fwmark %d", k.Mark)
	}
	if k.From == "" && k.To == "" && k.Family == unix.AF_INET6 {
		b.WriteString(" (ipv6)")
	}
	fmt.Fprintf(&b, " lookup %d", k.Table)
	return b.String()
}

// ruleOf builds the netlink rule for a key.
func ruleOf(k ruleKey) *netlink.Rule {
	r := netlink.NewRule()
	r.Family, r.Priority, r.Table, r.Mark = k.Family, k.Priority, k.Table, k.Mark
	r.IifName, r.OifName = k.IIF, k.OIF
	if p, err := netip.ParsePrefix(k.From); err == nil {
		r.Src = toIPNet(p)
	}
	if p, err := netip.ParsePrefix(k.To); err == nil {
		r.Dst = toIPNet(p)
	}
	return r
}

func addRule(ctx context.Context, c *conn, k ruleKey) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		if err := ignoreErr(h.RuleAdd(ruleOf(k)), unix.EEXIST); err != nil {
			return fmt.Errorf("host: add %s: %w", describeRule(k), err)
		}
		return nil
	})
}

func delRule(ctx context.Context, c *conn, k ruleKey) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		if err := ignoreErr(h.RuleDel(ruleOf(k)), unix.ENOENT, unix.ESRCH); err != nil {
			return fmt.Errorf("host: remove %s: %w", describeRule(k), err)
		}
		return nil
	})
}

// planRules adds missing rules and removes the ones Plinth added that are no longer
// wanted; a rule that exists already is kept without becoming owned.
func (p *planner) planRules(want []wantRule) {
	have := map[ruleKey]bool{}
	for _, r := range p.snap.rules {
		have[ruleKeyOf(r)] = true
	}
	wanted := map[ruleKey]bool{}
	for _, w := range want {
		k := w.key
		wanted[k] = true
		if have[k] {
			continue
		}
		p.intent.rules = append(p.intent.rules, k)
		p.ruleAdd = append(p.ruleAdd, undoable{
			summary: describeRule(k) + ": add",
			apply: func(ctx context.Context) error {
				if err := p.intent.record(); err != nil {
					return err
				}
				return addRule(ctx, p.c, k)
			},
			undo: func(ctx context.Context) error {
				if err := delRule(ctx, p.c, k); err != nil {
					return err
				}
				return p.d.forgetRule(k)
			},
		})
	}
	for _, k := range p.owned.Rules {
		if wanted[k] {
			continue
		}
		forget := func(context.Context) error { return p.d.forgetRule(k) }
		if !have[k] {
			p.ruleDel = append(p.ruleDel, undoable{summary: describeRule(k) + ": forget (already gone)", apply: forget})
			continue
		}
		p.ruleDel = append(p.ruleDel, undoable{
			summary: describeRule(k) + ": remove",
			apply: func(ctx context.Context) error {
				if err := delRule(ctx, p.c, k); err != nil {
					return err
				}
				return p.d.forgetRule(k)
			},
			undo: func(ctx context.Context) error {
				if err := p.d.state.update(func(s *ownedState) { s.Rules = append(s.Rules, k) }); err != nil {
					return err
				}
				return addRule(ctx, p.c, k)
			},
		})
	}
}

func (d *NetworkDriver) forgetRule(k ruleKey) error {
	return d.state.update(func(s *ownedState) {
		s.Rules = deleteKeys(s.Rules, func(o ruleKey) bool { return o == k })
	})
}

func parseRule(s hostspec.RuleSpec) (wantRule, error) {
	w := wantRule{RuleSpec: s}
	k := ruleKey{Family: unix.AF_INET, Priority: s.Priority, IIF: s.IIF, OIF: s.OIF, Table: s.Table}
	switch {
	case s.Priority < 1 || s.Priority > 32765:
		return w, errors.New("priority out of range 1..32765")
	case s.Table < 1 || int64(s.Table) > math.MaxUint32:
		return w, errors.New("table out of range")
	case s.FWMark < 0 || int64(s.FWMark) > math.MaxUint32:
		return w, errors.New("fwmark out of range")
	}
	k.Mark = uint32(s.FWMark)
	fams := map[int]bool{}
	for _, sel := range []struct {
		s   string
		dst *string
	}{{s.From, &k.From}, {s.To, &k.To}} {
		if sel.s == "" {
			continue
		}
		p, err := netip.ParsePrefix(sel.s)
		if err != nil {
			return w, err
		}
		if p != p.Masked() {
			return w, fmt.Errorf("%s has host bits set", p)
		}
		*sel.dst = p.String()
		if p.Addr().Is6() {
			k.Family = unix.AF_INET6
		}
		fams[k.Family] = true
	}
	if len(fams) > 1 {
		return w, errors.New("from and to differ in address family")
	}
	w.key = k
	return w, nil
}
