package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
)

// wantLink is a validated LinkSpec.
type wantLink struct {
	hostspec.LinkSpec
	mac   net.HardwareAddr
	addrs []netip.Prefix
	// depth orders links so that lower links come first: 0 for a link on nothing,
	// else one more than its parent and its members.
	depth int
	// created links only:
	bondMode    netlink.BondMode
	lacpRate    netlink.BondLacpRate
	hashPolicy  netlink.BondXmitHashPolicy
	macvlanMode netlink.MacvlanMode
	local, peer netip.Addr // vxlan
}

// wantRoute is a validated RouteSpec with its kernel key.
type wantRoute struct {
	hostspec.RouteSpec
	dst netip.Prefix
	gw  netip.Addr // zero when there is no gateway
	key routeKey
}

// wantRule is a validated RuleSpec with its key.
type wantRule struct {
	hostspec.RuleSpec
	key ruleKey
}

type networkWant struct {
	links  []wantLink // sorted by depth, then as given
	routes []wantRoute
	rules  []wantRule
}

// parseNetwork decodes and validates inputs; every error is Permanent.
func parseNetwork(raw json.RawMessage) (networkWant, error) {
	var in hostspec.NetworkInputs
	if err := driver.DecodeInputs(hostspec.KindNetwork, raw, &in); err != nil {
		return networkWant{}, err
	}
	w, err := checkNetwork(in)
	if err != nil {
		return networkWant{}, driver.Permanent(fmt.Errorf("host: invalid inputs: %w", err))
	}
	return w, nil
}

// checkNetwork validates decoded inputs and orders them for applying.
func checkNetwork(in hostspec.NetworkInputs) (networkWant, error) {
	var out networkWant
	names, macs := map[string]bool{}, map[string]bool{}
	for _, s := range in.Links {
		w, err := parseLink(s)
		if err != nil {
			return out, err
		}
		if (s.Name != "" && names[s.Name]) || (w.mac != nil && s.Kind == "" && macs[w.mac.String()]) {
			return out, fmt.Errorf("link %s listed twice", linkWanted(s))
		}
		if s.Name != "" {
			names[s.Name] = true
		}
		if w.mac != nil && s.Kind == "" {
			macs[w.mac.String()] = true
		}
		out.links = append(out.links, w)
	}
	if err := orderLinks(out.links); err != nil {
		return out, err
	}
	keys := map[routeKey]bool{}
	for _, s := range in.Routes {
		w, err := parseRoute(s)
		if err != nil {
			return out, fmt.Errorf("route %q: %w", s.Dst, err)
		}
		if keys[w.key] {
			return out, fmt.Errorf("route %s table %d metric %d listed twice", w.key.Dst, w.key.Table, w.key.Metric)
		}
		keys[w.key] = true
		out.routes = append(out.routes, w)
	}
	rules := map[ruleKey]bool{}
	for _, s := range in.Rules {
		w, err := parseRule(s)
		if err != nil {
			return out, fmt.Errorf("rule %d: %w", s.Priority, err)
		}
		if rules[w.key] {
			return out, fmt.Errorf("rule %d listed twice", s.Priority)
		}
		rules[w.key] = true
		out.rules = append(out.rules, w)
	}
	return out, nil
}

func parseLink(s hostspec.LinkSpec) (wantLink, error) {
	w := wantLink{LinkSpec: s}
	if s.Name == "" && (s.MAC == "" || s.Kind != "") {
		return w, errors.New("link needs a name or a mac")
	}
	if s.MAC != "" {
		mac, err := net.ParseMAC(s.MAC)
		if err != nil {
			return w, fmt.Errorf("link %s: %w", linkWanted(s), err)
		}
		w.mac = mac
	}
	if s.MTU < 0 || s.MTU > math.MaxUint16 {
		return w, fmt.Errorf("link %s: mtu %d out of range", linkWanted(s), s.MTU)
	}
	if s.Master == s.Name && s.Master != "" || s.Parent == s.Name && s.Parent != "" {
		return w, fmt.Errorf("link %s: cannot sit on itself", s.Name)
	}
	seen := map[netip.Prefix]bool{}
	for _, a := range s.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return w, fmt.Errorf("link %s: address: %w", linkWanted(s), err)
		}
		if !seen[p] {
			seen[p] = true
			w.addrs = append(w.addrs, p)
		}
	}
	if err := parseKind(&w); err != nil {
		return w, fmt.Errorf("link %s: %w", linkWanted(s), err)
	}
	return w, nil
}

// parseKind checks that a link sets exactly the fields of its kind.
func parseKind(w *wantLink) error {
	s := w.LinkSpec
	if (s.Kind == hostspec.LinkVLAN) != (s.VLANID != 0) || (s.Kind == hostspec.LinkBond) != (s.Bond != nil) ||
		(s.Kind == hostspec.LinkMacvlan) != (s.Macvlan != "") || (s.Kind == hostspec.LinkVXLAN) != (s.VXLAN != nil) {
		return fmt.Errorf("kind %q does not match its options (vlanId, bond, macvlanMode, vxlan)", s.Kind)
	}
	switch s.Kind {
	case "", hostspec.LinkBridge, hostspec.LinkBond:
		if s.Parent != "" {
			return fmt.Errorf("a %s has no parent", orStr(s.Kind, "existing link"))
		}
	case hostspec.LinkVLAN, hostspec.LinkMacvlan:
		if s.Parent == "" {
			return fmt.Errorf("a %s needs a parent", s.Kind)
		}
	case hostspec.LinkVXLAN:
	default:
		return fmt.Errorf("unknown kind %q; valid kinds are bridge, bond, vlan, macvlan, vxlan", s.Kind)
	}
	var ok bool
	switch s.Kind {
	case hostspec.LinkVLAN:
		if s.VLANID < 1 || s.VLANID > 4094 {
			return fmt.Errorf("vlan id %d out of range 1..4094", s.VLANID)
		}
	case hostspec.LinkBond:
		if w.bondMode, ok = netlink.StringToBondModeMap[s.Bond.Mode]; !ok || !slices.Contains([]string{"802.3ad", "active-backup", "balance-xor"}, s.Bond.Mode) {
			return fmt.Errorf("bond mode %q; valid modes are 802.3ad, active-backup, balance-xor", s.Bond.Mode)
		}
		w.lacpRate, w.hashPolicy = -1, -1
		if s.Bond.LACPRate != "" {
			if w.lacpRate, ok = netlink.StringToBondLacpRateMap[s.Bond.LACPRate]; !ok {
				return fmt.Errorf("lacp rate %q; valid rates are slow, fast", s.Bond.LACPRate)
			}
		}
		if s.Bond.HashPolicy != "" {
			if w.hashPolicy, ok = netlink.StringToBondXmitHashPolicyMap[s.Bond.HashPolicy]; !ok {
				return fmt.Errorf("hash policy %q; valid policies are layer2, layer2+3, layer3+4, encap2+3, encap3+4", s.Bond.HashPolicy)
			}
		}
		if s.Bond.MIIMon < 0 {
			return fmt.Errorf("miimon %d below 0", s.Bond.MIIMon)
		}
	case hostspec.LinkMacvlan:
		if w.macvlanMode, ok = macvlanModes[s.Macvlan]; !ok {
			return fmt.Errorf("macvlan mode %q; valid modes are bridge, vepa, private, passthru", s.Macvlan)
		}
	case hostspec.LinkVXLAN:
		x := s.VXLAN
		if x.VNI < 1 || x.VNI >= 1<<24 || x.Port < 0 || x.Port > math.MaxUint16 {
			return fmt.Errorf("vxlan vni %d or port %d out of range", x.VNI, x.Port)
		}
		for _, a := range []struct {
			s   string
			dst *netip.Addr
		}{{x.Local, &w.local}, {x.Remote, &w.peer}} {
			if a.s == "" {
				continue
			}
			ip, err := netip.ParseAddr(a.s)
			if err != nil {
				return fmt.Errorf("vxlan: %w", err)
			}
			*a.dst = ip.Unmap()
		}
	}
	return nil
}

var macvlanModes = map[string]netlink.MacvlanMode{
	"bridge": netlink.MACVLAN_MODE_BRIDGE, "vepa": netlink.MACVLAN_MODE_VEPA,
	"private": netlink.MACVLAN_MODE_PRIVATE, "passthru": netlink.MACVLAN_MODE_PASSTHRU,
}

// orderLinks sets each link's depth and sorts lower links first; a cycle through
// parents and masters is an error.
func orderLinks(links []wantLink) error {
	idx := map[string]int{}
	for i, l := range links {
		if l.Name != "" {
			idx[l.Name] = i
		}
	}
	lowers := make([][]int, len(links))
	for i, l := range links {
		if k, ok := idx[l.Parent]; ok && l.Parent != "" {
			lowers[i] = append(lowers[i], k)
		}
		if k, ok := idx[l.Master]; ok && l.Master != "" {
			lowers[k] = append(lowers[k], i)
		}
	}
	const visiting = -1
	depth := make([]int, len(links))
	done := make([]bool, len(links))
	var visit func(i int) error
	visit = func(i int) error {
		if done[i] {
			return nil
		}
		if depth[i] == visiting {
			return fmt.Errorf("links %s form a cycle through their parents and masters", links[i].Name)
		}
		depth[i] = visiting
		d := 0
		for _, k := range lowers[i] {
			if err := visit(k); err != nil {
				return err
			}
			d = max(d, depth[k]+1)
		}
		depth[i], done[i] = d, true
		return nil
	}
	for i := range links {
		if err := visit(i); err != nil {
			return err
		}
	}
	for i := range links {
		links[i].depth = depth[i]
	}
	slices.SortStableFunc(links, func(a, b wantLink) int { return a.depth - b.depth })
	return nil
}

// linkWanted names a spec for messages: "eth1", "eth1 (mac 02:...)" or "mac 02:...".
func linkWanted(s hostspec.LinkSpec) string {
	switch {
	case s.MAC == "" || s.Kind != "":
		return s.Name
	case s.Name == "":
		return "mac " + s.MAC
	default:
		return s.Name + " (mac " + s.MAC + ")"
	}
}

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
