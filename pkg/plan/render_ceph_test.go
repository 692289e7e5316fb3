package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
)

func cephSite(c *api.CephSpec) (*api.Site, []api.Host) {
	s := &api.Site{Metadata: api.ObjectMeta{Name: "s"}}
	s.Spec.Controllers = []string{"ctl-0", "ctl-1"}
	s.Spec.Ceph = c
	var hosts []api.Host
	for _, n := range []string{"ctl-0", "ctl-1", "stor-0", "stor-1", "stor-2"} {
		role := api.RoleController
		if strings.HasPrefix(n, "stor") {
			role = api.RoleStorage
		}
		hosts = append(hosts, api.Host{Metadata: api.ObjectMeta{Name: n}, Spec: api.HostSpec{Roles: []string{role}}})
	}
	return s, hosts
}

func TestRenderCephOpenStackDefaults(t *testing.T) {
	site, hosts := cephSite(&api.CephSpec{
		Keyring: "/etc/ceph/admin.keyring",
		Pools:   []api.CephPool{{Name: "volumes", PGNum: 128, FailureDomain: "rack", Quota: api.CephQuota{MaxBytes: "1Ti"}}},
	})
	steps, err := Render(site, hosts)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Step{}
	var ids []string
	for _, s := range steps {
		if strings.HasPrefix(s.Kind, "ceph.") {
			byID[s.ID] = s
			ids = append(ids, s.ID)
		}
	}
	want := []string{"ctl-0/ceph.health",
		"ctl-0/ceph.pool/kube-rbd", "ctl-0/ceph.pool/images", "ctl-0/ceph.pool/volumes", "ctl-0/ceph.pool/vms", "ctl-0/ceph.pool/backups",
		"ctl-0/ceph.user/kube-rbd", "ctl-0/ceph.user/glance", "ctl-0/ceph.user/cinder", "ctl-0/ceph.user/nova"}
	if !slices.Equal(ids, want) {
		t.Fatalf("steps\n  %v\nwant\n  %v", ids, want)
	}
	var vol cephspec.PoolInputs
	if err := json.Unmarshal(byID["ctl-0/ceph.pool/volumes"].Inputs, &vol); err != nil {
		t.Fatal(err)
	}
	// Three storage hosts: three copies; the declared fields override the default pool.
	if vol.Size != 3 || vol.MinSize != 2 || vol.PGNum != 128 || vol.CrushRule != "replicated-rack" || vol.FailureDomain != "rack" ||
		vol.QuotaMaxBytes != 1<<40 || vol.Application != "rbd" || vol.Cluster.Keyring != "/etc/ceph/admin.keyring" {
		t.Errorf("volumes inputs %+v", vol)
	}
	if d := byID["ctl-0/ceph.pool/volumes"].Deps; !slices.Equal(d, []string{"ctl-0/ceph.health"}) {
		t.Errorf("pool deps %v", d)
	}
	cinder := byID["ctl-0/ceph.user/cinder"]
	if !slices.Equal(cinder.Deps, []string{"ctl-0/ceph.pool/backups", "ctl-0/ceph.pool/images", "ctl-0/ceph.pool/vms", "ctl-0/ceph.pool/volumes"}) {
		t.Errorf("cinder deps %v", cinder.Deps)
	}
	var u cephspec.UserInputs
	if err := json.Unmarshal(cinder.Inputs, &u); err != nil {
		t.Fatal(err)
	}
	if u.Caps["osd"] != "profile rbd pool=volumes, profile rbd pool=vms, profile rbd pool=backups, profile rbd-read-only pool=images" || u.Caps["mon"] != "profile rbd" {
		t.Errorf("cinder caps %v", u.Caps)
	}
}

func TestRenderCephHostAndNone(t *testing.T) {
	site, hosts := cephSite(&api.CephSpec{Host: "ctl-1", Defaults: api.CephDefaultsNone, OSDHosts: 1,
		Pools: []api.CephPool{{Name: "old", Delete: true}, {Name: "one"}}})
	steps, err := Render(site, hosts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		if strings.HasPrefix(s.Kind, "ceph.") {
			got = append(got, s.ID)
			var in map[string]any
			_ = json.Unmarshal(s.Inputs, &in)
			if s.ID == "ctl-1/ceph.pool/one" && (in["size"] != 1.0 || in["minSize"] != 1.0) {
				t.Errorf("osdHosts 1: %v", in)
			}
			if s.ID == "ctl-1/ceph.pool/old" && in["delete"] != true {
				t.Errorf("delete not rendered: %v", in)
			}
		}
	}
	if !slices.Equal(got, []string{"ctl-1/ceph.health", "ctl-1/ceph.pool/old", "ctl-1/ceph.pool/one"}) {
		t.Errorf("steps %v", got)
	}
	site.Spec.Ceph = nil
	steps, _ = Render(site, hosts)
	for _, s := range steps {
		if strings.HasPrefix(s.Kind, "ceph.") {
			t.Errorf("no ceph section, yet %s", s.ID)
		}
	}
}
