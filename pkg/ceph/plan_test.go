package ceph

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// Captured from a single-node Pacific cluster (cephtest): one host, one OSD, the
// default rule choosing OSDs.
const (
	sampleTree  = `{"nodes":[{"id":-1,"name":"default","type":"root","type_id":11,"children":[-3]},{"id":-3,"name":"vm","type":"host","type_id":1,"children":[0]},{"id":0,"device_class":"hdd","name":"osd.0","type":"osd","type_id":0,"status":"up","reweight":1}],"stray":[]}`
	sampleRules = `[{"rule_id":0,"rule_name":"replicated_rule","type":1,"steps":[{"op":"take","item":-1,"item_name":"default"},{"op":"choose_firstn","num":0,"type":"osd"},{"op":"emit"}]}]`
)

func sampleTopology(t *testing.T) topology {
	t.Helper()
	var topo topology
	if err := json.Unmarshal([]byte(sampleRules), &topo.rules); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(sampleTree), &topo.tree); err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestDomains(t *testing.T) {
	topo := sampleTopology(t)
	for _, c := range []struct {
		root, class, typ string
		want             int
	}{
		{"default", "", "osd", 1},
		{"default", "", "host", 1},
		{"default", "ssd", "host", 0},
		{"default", "hdd", "host", 1},
		{"other", "", "host", 0},
	} {
		if got := topo.tree.domains(c.root, c.class, c.typ); got != c.want {
			t.Errorf("domains(%s, %q, %s) = %d, want %d", c.root, c.class, c.typ, got, c.want)
		}
	}
	root, class, typ := topo.rules[0].domain()
	if root != "default" || class != "" || typ != "osd" {
		t.Errorf("rule domain = %s %q %s", root, class, typ)
	}
}

func summaries(acts []action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, a.summary)
	}
	return out
}

func TestPlanPool(t *testing.T) {
	topo := sampleTopology(t)
	base := cephspec.PoolInputs{Name: "volumes", Size: 1, MinSize: 1, Application: "rbd"}
	inSync := poolState{Name: "volumes", Size: 1, MinSize: 1, AutoscaleMode: "on", PGNum: 32, PGNumTarget: 32,
		Applications: map[string]map[string]string{"rbd": {}}}
	with := func(f func(*cephspec.PoolInputs)) cephspec.PoolInputs { in := base; f(&in); return in }
	state := func(f func(*poolState)) *poolState { s := inSync; f(&s); return &s }
	for _, c := range []struct {
		name     string
		in       cephspec.PoolInputs
		cur      *poolState
		rbdReady bool
		want     []string
	}{
		{"in sync", base, &inSync, true, nil},
		{"missing", base, nil, false, []string{
			"create pool volumes (size 1, min_size 1, pg autoscale on, application rbd; one copy of the data: a single-node site has no redundancy)",
			"pool volumes: enable application rbd and initialise for RBD",
		}},
		{"size changed by hand", base, state(func(s *poolState) { s.Size = 2 }), true, []string{
			"pool volumes: size 2 -> 1 (one copy of the data: a single-node site has no redundancy)",
		}},
		{"not rbd-initialised", base, &inSync, false, []string{"pool volumes: initialise for RBD"}},
		{"rbd application disabled by hand", base, state(func(s *poolState) { s.Applications = nil }), true, []string{
			"pool volumes: enable application rbd",
		}},
		{"rbd application disabled and not rbd-initialised", base, state(func(s *poolState) { s.Applications = nil }), false, []string{
			"pool volumes: enable application rbd and initialise for RBD",
		}},
		{"another application's pool asked for rbd: the mon command says why it refuses", base,
			state(func(s *poolState) { s.Applications = map[string]map[string]string{"rgw": {}} }), false, []string{
				"pool volumes: enable application rbd",
				"pool volumes: initialise for RBD",
			}},
		{"fixed pg_num", with(func(p *cephspec.PoolInputs) { p.PGNum = 64 }), &inSync, true, []string{
			"pool volumes: pg autoscale on -> off (pgNum 64 is fixed)",
			"pool volumes: pg_num 32 -> 64 (Ceph moves there gradually)",
		}},
		{"pg_num moving to its target is in sync", with(func(p *cephspec.PoolInputs) { p.PGNum = 64 }),
			state(func(s *poolState) { s.AutoscaleMode, s.PGNum, s.PGNumTarget = "off", 40, 64 }), true, nil},
		{"quota", with(func(p *cephspec.PoolInputs) { p.QuotaMaxBytes = 1 << 30 }), &inSync, true, []string{
			"pool volumes: quota max_bytes none -> 1073741824",
		}},
		{"quota removed by the manifest", base, state(func(s *poolState) { s.QuotaMaxObjects = 10 }), true, []string{
			"pool volumes: quota max_objects 10 -> none",
		}},
		{"rule for a failure domain", with(func(p *cephspec.PoolInputs) { p.CrushRule, p.FailureDomain = "replicated-osd", "osd" }), &inSync, true, []string{
			"create CRUSH rule replicated-osd (root default, failure domain osd)",
			"pool volumes: crush_rule replicated_rule -> replicated-osd",
		}},
		{"too few OSDs for size", with(func(p *cephspec.PoolInputs) { p.Size, p.MinSize = 3, 2 }), &inSync, true, []string{
			"pool volumes: size 3 needs 3 osd buckets with an up OSD under default; the cluster has 1",
		}},
		{"rgw pool is not rbd-initialised", with(func(p *cephspec.PoolInputs) { p.Application = "rgw" }),
			state(func(s *poolState) { s.Applications = map[string]map[string]string{"rgw": {}} }), false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			acts, _ := planPool(c.in, c.cur, topo, c.rbdReady)
			if got := summaries(acts); !slices.Equal(got, c.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

func TestReplicationOrder(t *testing.T) {
	up := replication(cephspec.PoolInputs{Name: "p", Size: 3, MinSize: 2}, poolState{Size: 1, MinSize: 1})
	if got := summaries(up); !slices.Equal(got, []string{"pool p: size 1 -> 3", "pool p: min_size 1 -> 2"}) {
		t.Errorf("growing: %v", got)
	}
	down := replication(cephspec.PoolInputs{Name: "p", Size: 1, MinSize: 1}, poolState{Size: 3, MinSize: 2})
	if got := summaries(down); len(got) != 2 || !strings.HasPrefix(got[0], "pool p: min_size 2 -> 1") {
		t.Errorf("shrinking: %v", got)
	}
}

func TestPlanUser(t *testing.T) {
	caps := cephspec.RBDCaps([]string{"volumes", "vms"}, []string{"images"})
	if caps["osd"] != "profile rbd pool=volumes, profile rbd pool=vms, profile rbd-read-only pool=images" ||
		caps["mon"] != "profile rbd" || caps["mgr"] != "profile rbd pool=volumes, profile rbd pool=vms" {
		t.Fatalf("RBDCaps = %v", caps)
	}
	in := cephspec.UserInputs{Name: "cinder", Caps: caps}
	if got := summaries(planUser(in, nil, false)); len(got) != 1 || !strings.HasPrefix(got[0], "create user client.cinder (mgr 'profile rbd pool=volumes") {
		t.Errorf("create: %v", got)
	}
	if got := planUser(in, caps, true); got != nil {
		t.Errorf("in sync: %v", summaries(got))
	}
	drifted := map[string]string{"mon": "allow r", "osd": caps["osd"], "mgr": caps["mgr"]}
	if got := summaries(planUser(in, drifted, true)); !slices.Equal(got, []string{"user client.cinder: caps mon 'allow r' -> 'profile rbd'"}) {
		t.Errorf("caps drift: %v", got)
	}
	if got := summaries(planUser(cephspec.UserInputs{Name: "old", Delete: true}, caps, true)); !slices.Equal(got, []string{"delete user client.old"}) {
		t.Errorf("delete: %v", got)
	}
	if got := planUser(cephspec.UserInputs{Name: "old", Delete: true}, nil, false); got != nil {
		t.Errorf("delete, already gone: %v", summaries(got))
	}
}

func TestHealthProblems(t *testing.T) {
	for _, c := range []struct {
		name, status string
		want         []string
	}{
		{"ok", `{"health":{"status":"HEALTH_OK","checks":{}},"osdmap":{"num_osds":1,"num_up_osds":1,"num_in_osds":1}}`, nil},
		{"warn is not a problem", `{"health":{"status":"HEALTH_WARN","checks":{"POOL_APP_NOT_ENABLED":{"severity":"HEALTH_WARN","summary":{"message":"1 pool(s) do not have an application enabled"}}}},"osdmap":{"num_osds":3,"num_up_osds":3,"num_in_osds":3}}`, nil},
		{"error names its checks", `{"health":{"status":"HEALTH_ERR","checks":{"MGR_MODULE_ERROR":{"severity":"HEALTH_ERR","summary":{"message":"6 mgr modules have failed"}},"X":{"severity":"HEALTH_WARN","summary":{"message":"x"}}}},"osdmap":{"num_osds":1,"num_up_osds":1,"num_in_osds":1}}`,
			[]string{"cluster health HEALTH_ERR: MGR_MODULE_ERROR: 6 mgr modules have failed"}},
		{"osd down", `{"health":{"status":"HEALTH_WARN","checks":{"OSD_DOWN":{"severity":"HEALTH_WARN","summary":{"message":"1 osds down"}}}},"osdmap":{"osdmap":{"num_osds":3,"num_up_osds":2,"num_in_osds":3}}}`,
			[]string{"1 of 3 OSDs down (OSD_DOWN: 1 osds down)"}},
		{"no osds", `{"health":{"status":"HEALTH_WARN"},"osdmap":{"num_osds":0,"num_up_osds":0,"num_in_osds":0}}`, []string{"the cluster has no OSDs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st clusterStatus
			if err := json.Unmarshal([]byte(c.status), &st); err != nil {
				t.Fatal(err)
			}
			if got := st.problems(); !slices.Equal(got, c.want) {
				t.Errorf("problems = %q, want %q", got, c.want)
			}
		})
	}
}

func TestMonAddrs(t *testing.T) {
	var m monMap
	raw := `{"fsid":"f","mons":[{"public_addrs":{"addrvec":[{"type":"v2","addr":"10.0.0.1:3300"},{"type":"v1","addr":"10.0.0.1:6789"}]}},{"public_addrs":{"addrvec":[{"type":"v2","addr":"10.0.0.2:3300"}]}}]}`
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	if got := m.addrs(); !slices.Equal(got, []string{"10.0.0.1:6789", "10.0.0.2:3300"}) {
		t.Errorf("addrs = %v", got)
	}
}

func TestInputsAreStrict(t *testing.T) {
	if _, err := parsePool(json.RawMessage(`{"name":"p","size":1,"minSize":1,"application":"rbd","sise":3}`)); err == nil {
		t.Error("unknown field accepted")
	}
	if _, err := parsePool(json.RawMessage(`{"name":"p","size":1,"minSize":2,"application":"rbd"}`)); err == nil || !strings.Contains(err.Error(), "min_size") {
		t.Errorf("min_size above size: %v", err)
	}
	if _, err := parseUser(json.RawMessage(`{"name":"u"}`)); err == nil {
		t.Error("user without caps accepted")
	}
}

func TestMissingConfigFileSaysWhatToSet(t *testing.T) {
	dial := func(context.Context, cephspec.Conn) (Cluster, error) {
		t.Fatal("dialled without a configuration")
		return nil, nil
	}
	_, pool, _ := NewClient(dial, WithConfigFile("/nonexistent/ceph.conf")).Drivers()
	r := driver.Run(context.Background(), pool, json.RawMessage(`{"name":"p","size":1,"minSize":1,"application":"rbd"}`))
	if r.OK() || !strings.Contains(r.Error, "/nonexistent/ceph.conf") || !strings.Contains(r.Error, "name monitors or a configFile") {
		t.Errorf("%+v", r)
	}
}
