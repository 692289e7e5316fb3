package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/plinth-dev/plinth/pkg/driver"
	"golang.org/x/sys/unix"
)

// wantLink is a validated LinkSpec.
type wantLink struct {
	LinkSpec
	mac   net.HardwareAddr
	addrs []netip.Prefix
}

// wantRoute is a validated RouteSpec with its kernel key.
type wantRoute struct {
	RouteSpec
	dst netip.Prefix
	gw  netip.Addr // zero when there is no gateway
	key routeKey
}

// parseNetwork decodes and validates inputs; every error is Permanent.
func parseNetwork(raw json.RawMessage) ([]wantLink, []wantRoute, error) {
	links, routes, err := parseNetworkInputs(raw)
	if err != nil {
		return nil, nil, driver.Permanent(fmt.Errorf("host: invalid inputs: %w", err))
	}
	return links, routes, nil
}

func parseNetworkInputs(raw json.RawMessage) ([]wantLink, []wantRoute, error) {
	var in NetworkInputs
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return nil, nil, err
		}
	}
	var links []wantLink
	names, macs := map[string]bool{}, map[string]bool{}
	for _, s := range in.Links {
		w, err := parseLink(s)
		if err != nil {
			return nil, nil, err
		}
		if (s.Name != "" && names[s.Name]) || (w.mac != nil && macs[w.mac.String()]) {
			return nil, nil, fmt.Errorf("link %s listed twice", linkWanted(s))
		}
		if s.Name != "" {
			names[s.Name] = true
		}
		if w.mac != nil {
			macs[w.mac.String()] = true
		}
		links = append(links, w)
	}
	var routes []wantRoute
	keys := map[routeKey]bool{}
	for _, s := range in.Routes {
		w, err := parseRoute(s)
		if err != nil {
			return nil, nil, fmt.Errorf("route %q: %w", s.Dst, err)
		}
		if keys[w.key] {
			return nil, nil, fmt.Errorf("route %s table %d metric %d listed twice", w.key.Dst, w.key.Table, w.key.Metric)
		}
		keys[w.key] = true
		routes = append(routes, w)
	}
	return links, routes, nil
}

func parseLink(s LinkSpec) (wantLink, error) {
	w := wantLink{LinkSpec: s}
	if s.Name == "" && s.MAC == "" {
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
	return w, nil
}

func parseRoute(s RouteSpec) (wantRoute, error) {
	w := wantRoute{RouteSpec: s}
	if s.Gateway != "" {
		gw, err := netip.ParseAddr(s.Gateway)
		if err != nil {
			return w, fmt.Errorf("gateway: %w", err)
		}
		w.gw = gw
	}
	switch {
	case s.Dst == "default" && w.gw.Is6():
		w.dst = netip.MustParsePrefix("::/0")
	case s.Dst == "default":
		w.dst = netip.MustParsePrefix("0.0.0.0/0")
	default:
		p, err := netip.ParsePrefix(s.Dst)
		if err != nil {
			return w, err
		}
		if p != p.Masked() {
			return w, fmt.Errorf("host bits set (did you mean %s?)", p.Masked())
		}
		w.dst = p
	}
	switch {
	case s.Gateway == "" && s.Dev == "":
		return w, errors.New("needs a gateway or a dev")
	case w.gw.IsValid() && w.gw.Is4() != w.dst.Addr().Is4():
		return w, errors.New("gateway and destination differ in address family")
	case s.Metric < 0 || s.Table < 0 || s.MTU < 0 || int64(s.Table) > math.MaxUint32 || int64(s.Metric) > math.MaxUint32:
		return w, errors.New("metric, table and mtu must be non-negative 32-bit numbers")
	}
	w.key = routeKey{Dst: w.dst.String(), Table: s.Table, Metric: s.Metric}
	if w.key.Table == 0 {
		w.key.Table = unix.RT_TABLE_MAIN
	}
	if w.key.Metric == 0 && w.dst.Addr().Is6() {
		w.key.Metric = 1024 // what the kernel stores for IPv6 metric 0
	}
	return w, nil
}

// linkWanted names a spec for messages: "eth1", "eth1 (mac 02:...)" or "mac 02:...".
func linkWanted(s LinkSpec) string {
	switch {
	case s.MAC == "":
		return s.Name
	case s.Name == "":
		return "mac " + s.MAC
	default:
		return s.Name + " (mac " + s.MAC + ")"
	}
}
