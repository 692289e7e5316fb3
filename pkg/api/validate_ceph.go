package api

import (
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ceph validates site.spec.ceph against the effective pools and users, so a
// reference to a default pool is as good as one to a declared pool.
func (v *validator) ceph(s *SiteSpec, hosts []Host) {
	const p = "site.spec.ceph"
	c := s.Ceph
	if c.Host != "" {
		v.name(p+".host", c.Host, "ceph host")
		if len(hosts) > 0 && isDNSLabel(c.Host) && !slices.ContainsFunc(hosts, func(h Host) bool { return h.Metadata.Name == c.Host }) {
			v.add(p+".host", "no Host named %q; the ceph steps run on a declared host that holds the admin keyring", c.Host)
		}
	}
	for i, m := range c.Monitors {
		if !validMonitor(m) {
			v.add(index(p+".monitors", strconv.Itoa(i)), "%q is not a monitor address; use ip, ip:port, v1:ip:port or v2:ip:port", clip(m))
		}
	}
	for _, f := range []struct{ field, val string }{{"configFile", c.ConfigFile}, {"keyring", c.Keyring}} {
		if f.val != "" && !path.IsAbs(f.val) {
			v.add(p+"."+f.field, "%q must be an absolute path on the ceph host", clip(f.val))
		}
	}
	if c.User != "" && !validCephName(c.User) {
		v.add(p+".user", "%q is not a valid cephx name (without \"client.\"): %s", clip(c.User), cephNameRule)
	}
	if c.OSDHosts < 0 {
		v.add(p+".osdHosts", "%d must be positive (0 means: count the storage hosts, else the controllers)", c.OSDHosts)
	}
	v.oneOf(p+".defaults", c.Defaults, true, CephDefaultSets...)
	v.cephPools(s, hosts)
	v.cephUsers(s)
}

const cephNameRule = "use letters, digits, '-', '_' and '.', at most 63 characters"

func validCephName(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func validMonitor(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "v1:"), "v2:")
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	_, err := netip.ParseAddrPort(s)
	return err == nil
}

func (v *validator) cephPools(s *SiteSpec, hosts []Host) {
	c := s.Ceph
	seen := map[string]bool{}
	for i, pool := range c.Pools {
		p := index("site.spec.ceph.pools", key(pool.Name, i))
		switch {
		case pool.Name == "":
			v.add(p+".name", "required: the pool name")
		case !validCephName(pool.Name):
			v.add(p+".name", "%q is not a valid pool name: %s", clip(pool.Name), cephNameRule)
		case seen[pool.Name]:
			v.add(p+".name", "duplicate pool name %q; pool names must be unique", clip(pool.Name))
		}
		seen[pool.Name] = true
		if pool.Size < 0 || pool.Size > 10 {
			v.add(p+".size", "%d is out of range; valid sizes are 1..10 (0 for the default)", pool.Size)
		}
		if pool.MinSize < 0 || pool.MinSize > 10 {
			v.add(p+".minSize", "%d is out of range; valid values are 1..size (0 for the default)", pool.MinSize)
		}
		if n := pool.PGNum; n != 0 && (n < 1 || n > 32768 || bits.OnesCount(uint(n)) != 1) {
			v.add(p+".pgNum", "%d is not valid; use a power of two from 1 to 32768, or 0 for the autoscaler", n)
		}
		if pool.Application != "" && !validCephName(pool.Application) {
			v.add(p+".application", "%q is not a valid application name (rbd, rgw, cephfs...)", clip(pool.Application))
		}
		if pool.Quota.MaxBytes != "" {
			if _, err := ParseCephBytes(pool.Quota.MaxBytes); err != nil {
				v.add(p+".quota.maxBytes", "%v", err)
			}
		}
		if pool.Quota.MaxObjects < 0 {
			v.add(p+".quota.maxObjects", "%d must be positive (0 for no quota)", pool.Quota.MaxObjects)
		}
		if pool.CrushRule != "" && !validCephName(pool.CrushRule) {
			v.add(p+".crushRule", "%q is not a valid rule name: %s", clip(pool.CrushRule), cephNameRule)
		}
		if pool.FailureDomain != "" {
			v.oneOf(p+".failureDomain", pool.FailureDomain, false, CephFailureDomains...)
			if pool.CrushRule != "" {
				v.add(p+".failureDomain", "set crushRule or failureDomain, not both")
			}
		}
		if pool.DeviceClass != "" {
			if !validCephName(pool.DeviceClass) {
				v.add(p+".deviceClass", "%q is not a valid device class (hdd, ssd, nvme...)", clip(pool.DeviceClass))
			}
			if pool.FailureDomain == "" {
				v.add(p+".deviceClass", "needs failureDomain: the class restricts the rule Plinth creates for it")
			}
		}
	}
	// Replication is checked on the effective pools, where defaults are filled in.
	// Only a declared osdHosts is held against size: hosts of any role may carry
	// OSDs, and the pool step checks the real CRUSH map anyway.
	for i, pool := range CephPools(s, hosts) {
		if pool.Delete || pool.Size < 1 || pool.Size > 10 {
			continue
		}
		p := index("site.spec.ceph.pools", key(pool.Name, i))
		if pool.MinSize > pool.Size {
			v.add(p+".minSize", "%d is above size %d; min_size must be at most size", pool.MinSize, pool.Size)
		}
		byHost := pool.FailureDomain == "" || pool.FailureDomain == "host"
		if c.OSDHosts > 0 && byHost && pool.CrushRule == "" && pool.Size > c.OSDHosts {
			v.add(p+".size", "%d replicas need %d hosts with OSDs, and ceph.osdHosts is %d; a single-node site needs size 1, which keeps one copy of the data",
				pool.Size, pool.Size, c.OSDHosts)
		}
	}
}

func (v *validator) cephUsers(s *SiteSpec) {
	c := s.Ceph
	pools := map[string]CephPool{}
	var names []string
	for _, p := range CephPools(s, nil) {
		pools[p.Name] = p
		if !p.Delete {
			names = append(names, p.Name)
		}
	}
	sort.Strings(names)
	seen := map[string]bool{}
	for i, u := range c.Users {
		p := index("site.spec.ceph.users", key(u.Name, i))
		switch {
		case u.Name == "":
			v.add(p+".name", "required: the user name, without \"client.\"")
		case !validCephName(u.Name):
			v.add(p+".name", "%q is not a valid cephx name: %s", clip(u.Name), cephNameRule)
		case strings.HasPrefix(u.Name, "client."):
			v.add(p+".name", "%q: leave out the \"client.\" prefix", clip(u.Name))
		case u.Name == DefaultCephUser || u.Name == c.User:
			v.add(p+".name", "%q is the identity Plinth itself uses; it cannot also be managed as a user", u.Name)
		case seen[u.Name]:
			v.add(p+".name", "duplicate user name %q; user names must be unique", clip(u.Name))
		}
		seen[u.Name] = true
		if len(u.Caps) > 0 && len(u.Pools)+len(u.ReadOnlyPools) > 0 {
			v.add(p+".caps", "set caps or pools/readOnlyPools, not both")
		}
		for k := range u.Caps {
			if !slices.Contains(CephCapKeys, k) {
				v.add(index(p+".caps", mapKey(k)), "%q is not a cap key; valid keys are %s", clip(k), strings.Join(CephCapKeys, ", "))
			}
		}
	}
	// References are checked on the effective users: a default user that needs a
	// pool marked for deletion must be overridden too.
	for i, u := range CephUsers(s) {
		if u.Delete {
			continue
		}
		p := index("site.spec.ceph.users", key(u.Name, i))
		note := ""
		if !slices.ContainsFunc(c.Users, func(d CephUser) bool { return d.Name == u.Name }) {
			note = fmt.Sprintf(" (default user %q of defaults %s: override it, or set defaults: none)", u.Name, CephDefaultsOpenStack)
		}
		for _, f := range []struct {
			field string
			list  []string
		}{{"pools", u.Pools}, {"readOnlyPools", u.ReadOnlyPools}} {
			for j, name := range f.list {
				pp, ok := pools[name]
				switch {
				case !ok:
					v.add(index(p+"."+f.field, strconv.Itoa(j)), "no pool %q; valid pools are %s%s", clip(name), poolList(names), note)
				case pp.Delete:
					v.add(index(p+"."+f.field, strconv.Itoa(j)), "pool %q is marked for deletion%s", name, note)
				}
			}
		}
		// Caps are free text for Ceph, but a pool they name must be the site's.
		for _, k := range sortedKeys(u.Caps) {
			for _, m := range capPoolRE.FindAllStringSubmatch(u.Caps[k], -1) {
				name := m[1]
				pp, ok := pools[name]
				switch {
				case !ok:
					v.add(index(p+".caps", mapKey(k)), "names pool %q, which the site does not declare; valid pools are %s%s", clip(name), poolList(names), note)
				case pp.Delete:
					v.add(index(p+".caps", mapKey(k)), "names pool %q, which is marked for deletion%s", name, note)
				}
			}
		}
	}
}

// capPoolRE finds the pools a cephx cap string grants on ("pool=NAME").
var capPoolRE = regexp.MustCompile(`(?:^|[\s,;])pool=([^\s,;]+)`)

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func poolList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ParseCephBytes reads a byte count: digits with an optional Ki, Mi, Gi, Ti or Pi suffix.
func ParseCephBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for i, suf := range []string{"Ki", "Mi", "Gi", "Ti", "Pi"} {
		if strings.HasSuffix(s, suf) {
			num, mult = strings.TrimSuffix(s, suf), int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte count; use digits with an optional Ki, Mi, Gi, Ti or Pi suffix, e.g. 500Gi", clip(s))
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", clip(s))
	}
	return n * mult, nil
}
