package plan

import (
	"fmt"
	"slices"
	"sort"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
)

// renderCeph renders the Ceph steps, all on the site's ceph host: ceph.health first,
// then one ceph.pool step per effective pool, then one ceph.user step per user,
// each after the pools it names. Nothing without a ceph section.
func renderCeph(in renderInput) ([]Step, error) {
	if in.site == nil || in.site.Spec.Ceph == nil {
		return nil, nil
	}
	spec := &in.site.Spec
	c := spec.Ceph.Effective()
	host := api.CephHost(spec)
	if host == "" {
		return nil, fmt.Errorf("plan: ceph: no host to run the ceph steps on (set ceph.host or a controller)")
	}
	conn := cephspec.Conn{Monitors: c.Monitors, ConfigFile: c.ConfigFile, Keyring: c.Keyring, User: c.User}
	fail := func(kind, name string, err error) error {
		return fmt.Errorf("plan: host %s: render %s %s: %w", host, kind, name, err)
	}
	health, err := NewStep(host, cephspec.KindHealth, "", cephspec.HealthInputs{Cluster: conn})
	if err != nil {
		return nil, fail(cephspec.KindHealth, "", err)
	}
	steps := []Step{health}
	poolStep := map[string]string{}
	for _, p := range api.CephPools(spec, in.hosts) {
		pi, err := CephPoolInputs(p, conn)
		if err != nil {
			return nil, fail(cephspec.KindPool, p.Name, err)
		}
		s, err := NewStep(host, cephspec.KindPool, p.Name, pi, health.ID)
		if err != nil {
			return nil, fail(cephspec.KindPool, p.Name, err)
		}
		steps = append(steps, s)
		poolStep[p.Name] = s.ID
	}
	for _, u := range api.CephUsers(spec) {
		ui := cephspec.UserInputs{Cluster: conn, Name: u.Name, Caps: u.Caps, Delete: u.Delete}
		if len(ui.Caps) == 0 {
			ui.Caps = cephspec.RBDCaps(u.Pools, u.ReadOnlyPools)
		}
		// A user waits for the pools it names; one with raw caps for every pool.
		var deps []string
		names := append(append([]string(nil), u.Pools...), u.ReadOnlyPools...)
		if len(u.Caps) > 0 {
			names = nil
			for name := range poolStep {
				names = append(names, name)
			}
		}
		for _, name := range names {
			if id, ok := poolStep[name]; ok && !slices.Contains(deps, id) {
				deps = append(deps, id)
			}
		}
		if len(deps) == 0 {
			deps = []string{health.ID}
		}
		sort.Strings(deps)
		s, err := NewStep(host, cephspec.KindUser, u.Name, ui, deps...)
		if err != nil {
			return nil, fail(cephspec.KindUser, u.Name, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// CephPoolInputs renders one effective pool (see api.CephPools) for its step.
func CephPoolInputs(p api.CephPool, conn cephspec.Conn) (cephspec.PoolInputs, error) {
	in := cephspec.PoolInputs{
		Cluster: conn, Name: p.Name, Size: p.Size, MinSize: p.MinSize, PGNum: p.PGNum,
		Application: p.Application, QuotaMaxObjects: p.Quota.MaxObjects,
		CrushRule: p.CrushRule, Delete: p.Delete,
	}
	if p.FailureDomain != "" {
		in.CrushRule = api.CephRuleName(p.FailureDomain, p.DeviceClass)
		in.FailureDomain, in.DeviceClass = p.FailureDomain, p.DeviceClass
	}
	if p.Quota.MaxBytes != "" {
		n, err := api.ParseCephBytes(p.Quota.MaxBytes)
		if err != nil {
			return in, err
		}
		in.QuotaMaxBytes = n
	}
	return in, nil
}
