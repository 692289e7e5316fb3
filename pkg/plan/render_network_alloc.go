package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Allocation is an address the coordinator gave a host from a network's pool. The
// FSM records the list Allocate returns, so an address stays with its host as long
// as the host uses the pool: hosts added later, whatever their names, get other
// addresses.
type Allocation struct {
	Network string `json:"network"`
	Host    string `json:"host"`
	Address string `json:"address"`
}

// Allocate returns the pool addresses the hosts (sorted by name) need, keeping each
// previous allocation that is still needed and still valid (inside the pool, not a
// static, management or gateway address, not given twice), and giving every other
// host that needs one the lowest free address, in host name order. Allocations no
// longer needed are dropped, which frees their addresses. Validation guarantees the
// pools are large enough; an exhausted pool is an error all the same.
func Allocate(site *api.Site, hosts []api.Host, prev []Allocation) ([]Allocation, error) {
	if site == nil {
		return nil, nil
	}
	nets := map[string]api.Network{}
	for _, n := range site.Spec.Networks {
		nets[n.Name] = n
	}
	need := map[string][]string{} // network -> hosts, in name order
	for i := range hosts {
		h := &hosts[i]
		for k := range h.Spec.Interfaces {
			for _, n := range api.AllocatesFrom(&h.Spec, &h.Spec.Interfaces[k], nets) {
				if !slices.Contains(need[n], h.Metadata.Name) {
					need[n] = append(need[n], h.Metadata.Name)
				}
			}
		}
	}
	had := map[[2]string]netip.Addr{}
	for _, a := range prev {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			had[[2]string{a.Network, a.Host}] = ip
		}
	}
	var out []Allocation
	for _, n := range site.Spec.Networks {
		users := need[n.Name]
		if len(users) == 0 || n.Pool == nil {
			continue
		}
		start, err1 := netip.ParseAddr(n.Pool.Start)
		end, err2 := netip.ParseAddr(n.Pool.End)
		cidr, err3 := netip.ParsePrefix(n.CIDR)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("plan: network %s: invalid pool or cidr", n.Name)
		}
		start, end = start.Unmap(), end.Unmap()
		inPool := func(a netip.Addr) bool { return cidr.Contains(a) && !a.Less(start) && !end.Less(a) }
		taken := api.ReservedAddresses(n, hosts)
		got := map[string]netip.Addr{}
		for _, h := range users { // keep what is still valid, first come first kept
			if a, ok := had[[2]string{n.Name, h}]; ok && inPool(a) && !taken[a] {
				got[h], taken[a] = a, true
			}
		}
		next := start
		for _, h := range users {
			if _, ok := got[h]; ok {
				continue
			}
			for next.IsValid() && inPool(next) && taken[next] {
				next = next.Next()
			}
			if !next.IsValid() || !inPool(next) {
				return nil, fmt.Errorf("plan: network %s: pool %s-%s has no free address left for host %s", n.Name, start, end, h)
			}
			got[h], taken[next] = next, true
		}
		for _, h := range users {
			out = append(out, Allocation{Network: n.Name, Host: h, Address: got[h].String()})
		}
	}
	slices.SortFunc(out, func(a, b Allocation) int {
		return cmp.Or(cmp.Compare(a.Network, b.Network), cmp.Compare(a.Host, b.Host))
	})
	return out, nil
}

func allocIndex(allocs []Allocation) map[[2]string]string {
	m := make(map[[2]string]string, len(allocs))
	for _, a := range allocs {
		m[[2]string{a.Network, a.Host}] = a.Address
	}
	return m
}
