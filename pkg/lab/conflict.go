package lab

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// networkConflict says which of the lab's networks (CIDRs) is already on one of the
// machine's interfaces (name → its addresses), or "" when none is. Two labs on one
// machine with the same network route each other's traffic to the wrong bridge
// ("no route to host" to the VIP), so the second one must stop at once and say why.
func networkConflict(networks []string, ifaces map[string][]netip.Prefix) (string, error) {
	names := make([]string, 0, len(ifaces))
	for n := range ifaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, cidr := range networks {
		want, err := netip.ParsePrefix(cidr)
		if err != nil {
			return "", fmt.Errorf("lab: network %q: %w", cidr, err)
		}
		want = want.Masked()
		for _, n := range names {
			for _, have := range ifaces[n] {
				if have.Addr().Is4In6() || have.Addr().IsLinkLocalUnicast() {
					continue
				}
				if want.Overlaps(have.Masked()) {
					return fmt.Sprintf("network %s is already on interface %s (%s): another lab is running on this machine, or one was left behind; "+
						"stop it (plinth-lab down --dir DIR) or, if it is a stale lab bridge, delete it (ip link del %s)", want, n, have, n), nil
				}
			}
		}
	}
	return "", nil
}

// machineAddrs lists the machine's interfaces and their addresses.
func machineAddrs() (map[string][]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("lab: list interfaces: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, i := range ifs {
		as, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("lab: addresses of %s: %w", i.Name, err)
		}
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out[i.Name] = append(out[i.Name], p)
			}
		}
	}
	return out, nil
}

// checkNetworksFree refuses to build a lab whose networks another interface holds.
func checkNetworksFree(spec Spec) error {
	ifaces, err := machineAddrs()
	if err != nil {
		return err
	}
	msg, err := networkConflict(append([]string{spec.Subnet}, spec.BridgeAddrs...), ifaces)
	if err != nil {
		return err
	}
	if msg != "" {
		return fmt.Errorf("lab: %s", strings.TrimSpace(msg))
	}
	return nil
}
