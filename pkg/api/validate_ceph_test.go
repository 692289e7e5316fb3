package api

import (
	"slices"
	"strings"
	"testing"
)

const cephSiteYAML = `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata: {name: s}
spec:
  controllers: [c1]
  ceph:
    host: c1
    monitors: [10.0.0.11, "10.0.0.12:6789", "v2:10.0.0.13:3300"]
    keyring: /etc/ceph/ceph.client.admin.keyring
    pools:
    - {name: volumes, pgNum: 64, quota: {maxBytes: 500Gi, maxObjects: 100000}}
    - {name: metrics, application: rgw, failureDomain: osd, deviceClass: ssd}
    users:
    - {name: telemetry, caps: {mon: "allow r", osd: "allow rw pool=metrics"}}
---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: c1}
spec: {roles: [controller], managementAddress: 10.0.0.11}
`

func cephSite(t *testing.T) *Manifest {
	t.Helper()
	m, err := Decode("site.yaml", []byte(cephSiteYAML))
	if err != nil {
		t.Fatal(err)
	}
	if errs := m.Validate("site.yaml"); len(errs) > 0 {
		t.Fatalf("valid Ceph site rejected:\n%v", errs)
	}
	return m
}

func TestCephEffectivePoolsAndUsers(t *testing.T) {
	m := cephSite(t)
	pools := CephPools(&m.Site.Spec, m.Hosts)
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
		// One controller and no storage host: a single-node site, one copy.
		if p.Size != 1 || p.MinSize != 1 {
			t.Errorf("pool %s: size %d min_size %d on a single-node site", p.Name, p.Size, p.MinSize)
		}
	}
	if want := []string{"kube-rbd", "images", "volumes", "vms", "backups", "metrics"}; !slices.Equal(names, want) {
		t.Errorf("pools %v, want %v", names, want)
	}
	if v := pools[2]; v.PGNum != 64 || v.Application != "rbd" || v.Quota.MaxObjects != 100000 {
		t.Errorf("the declared volumes pool does not override the default: %+v", v)
	}
	if p := pools[5]; p.Application != "rgw" {
		t.Errorf("metrics: %+v", p)
	}
	users := CephUsers(&m.Site.Spec)
	if len(users) != 5 || users[2].Name != "cinder" || !slices.Equal(users[2].ReadOnlyPools, []string{"images"}) || users[4].Name != "telemetry" {
		t.Errorf("users %+v", users)
	}

	// Sizing follows the hosts with OSDs.
	s := m.Site.Spec
	var hosts []Host
	for _, n := range []string{"s1", "s2", "s3", "s4"} {
		hosts = append(hosts, Host{Metadata: ObjectMeta{Name: n}, Spec: HostSpec{Roles: []string{RoleStorage}}})
	}
	for _, c := range []struct {
		hosts           []Host
		controllers     []string
		size, minSize   int
		declaredOSDHost int
	}{
		{hosts[:2], nil, 2, 1, 0},
		{hosts, nil, 3, 2, 0},
		{nil, []string{"c1", "c2"}, 2, 1, 0},
		{hosts, nil, 1, 1, 1},
	} {
		s.Controllers = append([]string{"c1"}, c.controllers...)
		if c.controllers != nil {
			s.Controllers = c.controllers
		}
		ceph := *s.Ceph
		ceph.OSDHosts = c.declaredOSDHost
		s.Ceph = &ceph
		p := CephPools(&s, c.hosts)[0]
		if p.Size != c.size || p.MinSize != c.minSize {
			t.Errorf("%d storage hosts, controllers %v, osdHosts %d: size %d/%d, want %d/%d",
				len(c.hosts), s.Controllers, c.declaredOSDHost, p.Size, p.MinSize, c.size, c.minSize)
		}
	}

	s.Ceph = &CephSpec{Defaults: CephDefaultsNone, Pools: []CephPool{{Name: "only"}}}
	if p := CephPools(&s, nil); len(p) != 1 || p[0].Name != "only" || len(CephUsers(&s)) != 0 {
		t.Errorf("defaults none: %+v %+v", p, CephUsers(&s))
	}
}

func TestValidateCeph(t *testing.T) {
	c := func(m *Manifest) *CephSpec { return m.Site.Spec.Ceph }
	const p = "site.spec.ceph"
	for _, tc := range []struct {
		name   string
		mutate func(m *Manifest)
		path   string
		msg    string
	}{
		{"unknown host", func(m *Manifest) { c(m).Host = "c9" }, p + ".host", `no Host named "c9"`},
		{"bad monitor", func(m *Manifest) { c(m).Monitors[1] = "mon-a" }, p + ".monitors[1]", `"mon-a" is not a monitor address`},
		{"relative config file", func(m *Manifest) { c(m).ConfigFile = "ceph.conf" }, p + ".configFile", "must be an absolute path"},
		{"bad defaults", func(m *Manifest) { c(m).Defaults = "all" }, p + ".defaults", "valid values are openstack, none"},
		{"pg_num not a power of two", func(m *Manifest) { c(m).Pools[0].PGNum = 100 }, p + ".pools[volumes].pgNum", "use a power of two"},
		{"quota bytes", func(m *Manifest) { c(m).Pools[0].Quota.MaxBytes = "10GB" }, p + ".pools[volumes].quota.maxBytes", `"10GB" is not a byte count`},
		{"bad failure domain", func(m *Manifest) { c(m).Pools[1].FailureDomain = "shelf" }, p + ".pools[metrics].failureDomain", `"shelf" is not valid`},
		{"rule and failure domain", func(m *Manifest) { c(m).Pools[1].CrushRule = "fast" }, p + ".pools[metrics].failureDomain", "set crushRule or failureDomain, not both"},
		{"class without failure domain", func(m *Manifest) { c(m).Pools[1].FailureDomain = "" }, p + ".pools[metrics].deviceClass", "needs failureDomain"},
		{"min_size above size", func(m *Manifest) { c(m).Pools[0].Size, c(m).Pools[0].MinSize = 2, 3 }, p + ".pools[volumes].minSize", "3 is above size 2"},
		{"size above declared OSD hosts", func(m *Manifest) { c(m).OSDHosts = 1; c(m).Pools[0].Size = 3 }, p + ".pools[volumes].size",
			"3 replicas need 3 hosts with OSDs, and ceph.osdHosts is 1; a single-node site needs size 1"},
		{"duplicate pool", func(m *Manifest) { c(m).Pools[1].Name = "volumes" }, p + ".pools[volumes].name", "duplicate pool name"},
		{"pool name", func(m *Manifest) { c(m).Pools[1].Name = "a/b" }, p + `.pools["a/b"].name`, "not a valid pool name"},
		{"user of an unknown pool", func(m *Manifest) {
			c(m).Users = append(c(m).Users, CephUser{Name: "x", Pools: []string{"nope"}})
		}, p + ".users[x].pools[0]", `no pool "nope"; valid pools are backups, images, kube-rbd, metrics, vms, volumes`},
		{"default user of a pool marked for deletion", func(m *Manifest) {
			c(m).Pools = append(c(m).Pools, CephPool{Name: "images", Delete: true})
		}, p + ".users[glance].pools[0]", `pool "images" is marked for deletion (default user "glance"`},
		{"caps and pools", func(m *Manifest) { c(m).Users[0].Pools = []string{"metrics"} }, p + ".users[telemetry].caps", "not both"},
		{"cap key", func(m *Manifest) { c(m).Users[0].Caps["rgw"] = "allow" }, p + ".users[telemetry].caps[rgw]", `"rgw" is not a cap key`},
		{"cap naming an unknown pool", func(m *Manifest) { c(m).Users[0].Caps["osd"] = "allow r pool=metrics, allow rw pool=secrets" }, p + ".users[telemetry].caps[osd]",
			`names pool "secrets", which the site does not declare; valid pools are backups, images, kube-rbd, metrics, vms, volumes`},
		{"admin user", func(m *Manifest) { c(m).Users[0].Name = "admin" }, p + ".users[admin].name", "the identity Plinth itself uses"},
		{"client prefix", func(m *Manifest) { c(m).Users[0].Name = "client.x" }, p + `.users["client.x"].name`, `leave out the "client." prefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := cephSite(t)
			tc.mutate(m)
			errs := m.Validate("site.yaml")
			if !findError(errs, tc.path, tc.msg) {
				t.Errorf("want %s: %s; got:\n%v", tc.path, tc.msg, errs)
			}
		})
	}
}

func TestDecodeCephStrict(t *testing.T) {
	_, err := Decode("site.yaml", []byte(strings.Replace(cephSiteYAML, "pgNum: 64", "pg_num: 64", 1)))
	if err == nil || !strings.Contains(err.Error(), "pg_num") {
		t.Errorf("unknown field accepted: %v", err)
	}
}

func TestParseCephBytes(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "4096": 4096, "10Ki": 10 << 10, "500Gi": 500 << 30, "2Ti": 2 << 40} {
		if got, err := ParseCephBytes(s); err != nil || got != want {
			t.Errorf("%s: %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "-1", "10GB", "1.5Gi", "9999999999Pi"} {
		if _, err := ParseCephBytes(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
