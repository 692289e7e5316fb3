package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NetworkDriver executes host.network steps in the network namespace of the thread
// that calls Diff and the returned Apply closures. The changes of one Diff share one
// netlink handle, opened in the namespace of the thread that applies the first of
// them: apply them all from that namespace.
type NetworkDriver struct {
	state *stateStore
	o     options
}

var _ driver.Driver = (*NetworkDriver)(nil)

// NewNetworkDriver returns a driver that records the links, memberships, addresses,
// routes and rules it adds in stateDir/host.network.owned.json.
func NewNetworkDriver(stateDir string, opts ...Option) *NetworkDriver {
	d := &NetworkDriver{state: &stateStore{}, o: newOptions(opts)}
	if stateDir != "" {
		d.state.path = filepath.Join(stateDir, ownedFile)
	}
	return d
}

// Kind implements driver.Driver.
func (d *NetworkDriver) Kind() string { return hostspec.KindNetwork }

// Diff implements driver.Driver. Changes come in this order: links created, members
// attached or released, MTUs lowered (upper links first) and raised (lower links
// first), admin state, address removals and additions, route and rule additions,
// route and rule removals, and last the deletion of links Plinth created earlier.
func (d *NetworkDriver) Diff(ctx context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	if d.state.path == "" {
		return nil, driver.Permanent(errors.New("host: network driver has no state directory"))
	}
	want, err := parseNetwork(inputs)
	if err != nil {
		return nil, err
	}
	c := &conn{}
	steps, err := d.steps(ctx, want, c)
	if err != nil {
		return nil, err
	}
	return closing(changes(&d.o, steps, func(ctx context.Context) ([]undoable, error) { return d.steps(ctx, want, c) }), c), nil
}

// closing closes c after the last of cs or the first that fails: driver.Run applies
// a Diff's changes in order and stops at the first error.
func closing(cs []driver.Change, c *conn) []driver.Change {
	for i, ch := range cs {
		last := i == len(cs)-1
		cs[i].Apply = func(ctx context.Context) error {
			err := ch.Apply(ctx)
			if err != nil || last {
				c.close()
			}
			return err
		}
	}
	return cs
}

// steps observes the namespace and plans what it takes to reach want; the steps
// apply through c.
func (d *NetworkDriver) steps(ctx context.Context, want networkWant, c *conn) ([]undoable, error) {
	owned, err := d.state.load()
	if err != nil {
		return nil, err
	}
	snap, err := observe(ctx, want.scope(owned))
	if err != nil {
		return nil, err
	}
	p := &planner{d: d, c: c, snap: snap, owned: owned, intent: &intent{store: d.state, owned: owned},
		links: map[string]*linkPlan{}, routes: map[routeKey]netlink.Route{}}
	for _, r := range snap.routes {
		if k, ok := keyOf(r); ok {
			if _, dup := p.routes[k]; !dup { // first wins, as with findRoute
				p.routes[k] = r
			}
		}
	}
	return p.plan(want)
}

// scope is what the planner looks at besides links and addresses: the tables of the
// routes wanted or owned, and rules when any are wanted or owned.
func (w networkWant) scope(owned ownedState) scope {
	sc := scope{rules: len(w.rules) > 0 || len(owned.Rules) > 0}
	keys := slices.Clone(owned.Routes)
	for _, r := range w.routes {
		keys = append(keys, r.key)
	}
	for _, k := range keys {
		t := routeTable{family: netlink.FAMILY_V4, table: k.Table}
		if strings.Contains(k.Dst, ":") {
			t.family = netlink.FAMILY_V6
		}
		if !slices.Contains(sc.tables, t) {
			sc.tables = append(sc.tables, t)
		}
	}
	return sc
}

// linkPlan is a wanted link resolved against the snapshot.
type linkPlan struct {
	w    wantLink
	name string       // kernel name
	link netlink.Link // as observed; nil when fresh
	// fresh links are created (or re-created) by this run: they start down, without
	// addresses, members or routes.
	fresh bool
}

// ref is how Apply finds the link: by the index Diff saw, or by name when it is
// created in the same run.
func (lp *linkPlan) ref() linkRef {
	if lp.fresh {
		return linkRef{name: lp.name}
	}
	return linkRef{name: lp.name, index: lp.link.Attrs().Index}
}

// label names the link in summaries.
func (lp *linkPlan) label() string {
	s := "link " + lp.name
	if lp.w.Name != "" && lp.w.Name != lp.name {
		s += " (wanted name " + lp.w.Name + ", matched by mac)"
	}
	return s
}

// linkRef finds a link at Apply time.
type linkRef struct {
	name  string
	index int
}

func (r linkRef) get(c *conn, h *netlink.Handle) (netlink.Link, error) {
	if r.index > 0 {
		return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: r.index, Name: r.name}}, nil
	}
	l, err := c.byName(h, r.name)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", r.name, err)
	}
	return l, nil
}

// planner turns one snapshot, the ownership state and the inputs into steps.
type planner struct {
	d      *NetworkDriver
	c      *conn // what the changes apply through
	snap   snapshot
	owned  ownedState
	intent *intent
	links  map[string]*linkPlan // spec name -> plan
	order  []*linkPlan          // lower links first
	routes map[routeKey]netlink.Route
	addrs  map[int]map[string]bool // link index -> CIDRs, built by addrsOn

	create, members, mtuDown, mtuUp, updown, addrDel, addrAdd, routeSet, ruleAdd, routeDel, ruleDel, linkDel []undoable
}

func (p *planner) plan(want networkWant) ([]undoable, error) {
	used := map[int]string{}
	for _, w := range want.links {
		lp, err := p.resolve(w)
		if err != nil {
			return nil, err
		}
		if !lp.fresh {
			idx := lp.link.Attrs().Index
			if prev, dup := used[idx]; dup {
				return nil, driver.Permanent(fmt.Errorf("host: links %s and %s are the same link %s", prev, linkWanted(w.LinkSpec), lp.name))
			}
			used[idx] = linkWanted(w.LinkSpec)
		}
		if w.Name != "" {
			p.links[w.Name] = lp
		}
		p.order = append(p.order, lp)
	}
	wantAddrs := map[addrKey]bool{}
	for _, lp := range p.order {
		if err := p.planMember(lp); err != nil {
			return nil, err
		}
		p.planLink(lp)
		for _, pfx := range lp.w.addrs {
			wantAddrs[addrKey{Link: lp.name, CIDR: pfx.String()}] = true
		}
	}
	p.planOwnedMembers()
	p.planOwnedAddrs(wantAddrs)

	wantRoutes := map[routeKey]bool{}
	for _, w := range want.routes {
		if err := p.planRoute(w); err != nil {
			return nil, err
		}
		wantRoutes[w.key] = true
	}
	p.planOwnedRoutes(wantRoutes)
	p.planRules(want.rules)
	p.planOwnedLinks()
	slices.Reverse(p.mtuDown) // upper links first
	return startingIntent(slices.Concat(p.create, p.members, p.mtuDown, p.mtuUp, p.updown, p.addrDel, p.addrAdd,
		p.routeSet, p.ruleAdd, p.routeDel, p.ruleDel, p.linkDel), p.intent), nil
}

// resolve finds the link a spec means, planning its creation when it is of a kind
// Plinth creates and is missing or must be re-created.
func (p *planner) resolve(w wantLink) (*linkPlan, error) {
	if w.Kind != "" {
		return p.resolveCreated(w)
	}
	l, err := p.findLink(w)
	if err != nil {
		return nil, err
	}
	return &linkPlan{w: w, name: l.Attrs().Name, link: l}, nil
}

// findLink resolves an existing link: by MAC when set (the name is then only a hint
// and is never applied), else by name. Missing hardware is Permanent.
func (p *planner) findLink(w wantLink) (netlink.Link, error) {
	if w.mac == nil {
		if l := p.snap.linkByName(w.Name); l != nil {
			return l, nil
		}
		return nil, driver.Permanent(fmt.Errorf("host: link %s not found", w.Name))
	}
	var found []netlink.Link
	for _, l := range p.snap.links {
		if bytes.Equal(l.Attrs().HardwareAddr, w.mac) {
			if l.Attrs().Name == w.Name {
				return l, nil
			}
			found = append(found, l)
		}
	}
	if len(found) > 1 { // e.g. a bridge that took its port's MAC: prefer the hardware
		found = slices.DeleteFunc(found, func(l netlink.Link) bool { return l.Type() != "device" })
	}
	switch len(found) {
	case 0:
		return nil, driver.Permanent(fmt.Errorf("host: link %s not found", linkWanted(w.LinkSpec)))
	case 1:
		if w.Name != "" {
			p.d.o.log.Warn("host: link found by mac under another name; not renaming",
				"mac", w.MAC, "wanted", w.Name, "actual", found[0].Attrs().Name)
		}
		return found[0], nil
	default:
		return nil, driver.Permanent(fmt.Errorf("host: link %s is ambiguous", linkWanted(w.LinkSpec)))
	}
}

// planLink plans a link's MTU and admin state and the addresses it lacks.
func (p *planner) planLink(lp *linkPlan) {
	w, ref, label := lp.w, lp.ref(), lp.label()
	var mtu int
	var up bool
	if !lp.fresh {
		a := lp.link.Attrs()
		mtu, up = a.MTU, a.Flags&net.FlagUp != 0
	}
	if w.MTU > 0 && (lp.fresh || mtu != w.MTU) {
		summary := fmt.Sprintf("%s: mtu %d -> %d", label, mtu, w.MTU)
		if lp.fresh {
			summary = fmt.Sprintf("%s: set mtu %d", label, w.MTU)
		}
		s := undoable{
			summary: summary,
			apply:   func(ctx context.Context) error { return setMTU(ctx, p.c, ref, w.MTU) },
		}
		if !lp.fresh {
			s.undo = func(ctx context.Context) error { return setMTU(ctx, p.c, ref, mtu) }
		}
		if lp.fresh || w.MTU > mtu {
			p.mtuUp = append(p.mtuUp, s)
		} else {
			p.mtuDown = append(p.mtuDown, s)
		}
	}
	if up != w.Up && (!lp.fresh || w.Up) {
		verb := map[bool]string{true: "set up", false: "set down"}
		p.updown = append(p.updown, undoable{
			summary: label + ": " + verb[w.Up],
			apply:   func(ctx context.Context) error { return setUp(ctx, p.c, ref, w.Up) },
			undo:    func(ctx context.Context) error { return setUp(ctx, p.c, ref, up) },
		})
	}
	var have map[string]bool
	if !lp.fresh {
		have = p.addrsOn(lp.link.Attrs().Index)
	}
	for _, pfx := range w.addrs {
		if have[pfx.String()] {
			continue // present: kept, owned or not
		}
		k := addrKey{Link: lp.name, CIDR: pfx.String()}
		p.intent.addrs = append(p.intent.addrs, k)
		p.addrAdd = append(p.addrAdd, undoable{
			summary: fmt.Sprintf("address %s on %s: add", k.CIDR, k.Link),
			apply: func(ctx context.Context) error {
				if err := p.intent.record(); err != nil {
					return err
				}
				return addAddr(ctx, p.c, ref, pfx)
			},
			undo: func(ctx context.Context) error {
				if err := delAddr(ctx, p.c, ref, pfx); err != nil {
					return err
				}
				return p.d.forgetAddr(k)
			},
		})
	}
}

func setMTU(ctx context.Context, c *conn, ref linkRef, mtu int) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		l, err := ref.get(c, h)
		if err != nil {
			return err
		}
		if err := h.LinkSetMTU(l, mtu); err != nil {
			err = fmt.Errorf("host: set mtu %d on %s: %w", mtu, ref.name, err)
			if errors.Is(err, unix.EINVAL) {
				return driver.Permanent(err) // out of the device's range
			}
			return err
		}
		return nil
	})
}

func setUp(ctx context.Context, c *conn, ref linkRef, up bool) error {
	return c.do(ctx, func(h *netlink.Handle) error {
		l, err := ref.get(c, h)
		if err != nil {
			return err
		}
		verb, set := "set down", h.LinkSetDown
		if up {
			verb, set = "set up", h.LinkSetUp
		}
		if err := set(l); err != nil {
			return fmt.Errorf("host: %s %s: %w", verb, ref.name, err)
		}
		return nil
	})
}

// addrsOn is the set of CIDRs on link index i; callers must not change it.
func (p *planner) addrsOn(i int) map[string]bool {
	if p.addrs == nil { // indexed once: every link asks
		p.addrs = map[int]map[string]bool{}
		for _, a := range p.snap.addrs {
			if pfx, ok := toPrefix(a.IPNet); ok {
				if p.addrs[a.LinkIndex] == nil {
					p.addrs[a.LinkIndex] = map[string]bool{}
				}
				p.addrs[a.LinkIndex][pfx.String()] = true
			}
		}
	}
	return p.addrs[i]
}

// intent records, once and before the first add, ownership of everything a Diff is
// about to add: a crash after recording leaves owned-but-absent entries, which the
// next Diff either adds again or forgets. The first change starts the write in the
// background, so that its fsyncs overlap with the changes before the first add (MTUs,
// admin state); the first add waits for it. A change that fails before any add
// takes the record back, as if it had never been written.
type intent struct {
	store   *stateStore
	owned   ownedState // as the Diff saw it: what taking back keeps
	mu      sync.Mutex
	done    bool          // the record is durable
	writing chan struct{} // closed when the write start began has ended
	used    bool          // an add went ahead on the record
	addrs   []addrKey
	routes  []routeKey
	links   []linkKey
	members []memberKey
	rules   []ruleKey
}

func (in *intent) empty() bool {
	return len(in.addrs)+len(in.routes)+len(in.links)+len(in.members)+len(in.rules) == 0
}

// start begins writing the record in the background, once.
func (in *intent) start() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done || in.writing != nil || in.empty() {
		return
	}
	ch := make(chan struct{})
	in.writing = ch
	go func() {
		defer close(ch)
		err := in.write()
		in.mu.Lock()
		in.done = err == nil // else record writes again, and reports the error
		in.mu.Unlock()
	}()
}

// wait returns once the write start began, if any, has ended.
func (in *intent) wait() {
	in.mu.Lock()
	ch := in.writing
	in.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// record makes the record durable before an add.
func (in *intent) record() error {
	in.wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.done {
		if err := in.write(); err != nil {
			return err
		}
		in.done = true
	}
	in.used = true
	return nil
}

func (in *intent) write() error {
	return in.store.update(func(s *ownedState) {
		s.Addresses = append(s.Addresses, in.addrs...)
		s.Routes = append(s.Routes, in.routes...)
		s.Links = append(s.Links, in.links...)
		s.Members = append(s.Members, in.members...)
		s.Rules = append(s.Rules, in.rules...)
	})
}

// abandon takes back a record no add has used, keeping what was owned before.
func (in *intent) abandon() error {
	in.wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.done || in.used {
		return nil
	}
	err := in.store.update(func(s *ownedState) {
		s.Addresses = unrecord(s.Addresses, in.addrs, in.owned.Addresses)
		s.Routes = unrecord(s.Routes, in.routes, in.owned.Routes)
		s.Links = unrecord(s.Links, in.links, in.owned.Links)
		s.Members = unrecord(s.Members, in.members, in.owned.Members)
		s.Rules = unrecord(s.Rules, in.rules, in.owned.Rules)
	})
	if err != nil {
		return fmt.Errorf("take back the ownership record: %w", err)
	}
	in.done = false
	return nil
}

// unrecord deletes from s the keys of added that kept does not hold.
func unrecord[T comparable](s, added, kept []T) []T {
	return deleteKeys(s, func(k T) bool { return slices.Contains(added, k) && !slices.Contains(kept, k) })
}

// startingIntent makes every step start the intent's write, and take it back when
// the step fails before any add used it.
func startingIntent(steps []undoable, in *intent) []undoable {
	for i, s := range steps {
		steps[i].apply = func(ctx context.Context) error {
			in.start()
			err := s.apply(ctx)
			if err != nil {
				if aerr := in.abandon(); aerr != nil {
					return errors.Join(err, aerr)
				}
			}
			return err
		}
	}
	return steps
}

// describe renders a change target: "route 10.1.0.0/16 via 10.0.0.1 dev eth1 table 100".
func (w wantRoute) describe() string {
	var b strings.Builder
	b.WriteString("route " + showDst(w.key.Dst))
	if w.gw.IsValid() {
		b.WriteString(" via " + w.gw.String())
	}
	if w.Dev != "" {
		b.WriteString(" dev " + w.Dev)
	}
	b.WriteString(keySuffix(w.key))
	return b.String()
}

func showDst(dst string) string {
	if dst == "0.0.0.0/0" {
		return "default"
	}
	return dst
}

func keySuffix(k routeKey) string {
	var s string
	if k.Table != unix.RT_TABLE_MAIN {
		s += fmt.Sprintf(" table %d", k.Table)
	}
	if k.Metric != 0 && !(k.Metric == 1024 && strings.Contains(k.Dst, ":")) {
		s += fmt.Sprintf(" metric %d", k.Metric)
	}
	return s
}
