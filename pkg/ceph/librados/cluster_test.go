//go:build ceph

package librados_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"

	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/ceph/cephtest"
	"github.com/plinth-dev/plinth/pkg/ceph/librados"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// env is one real cluster with the three drivers and an admin session for checks.
type env struct {
	t      *testing.T
	c      *cephtest.Cluster
	conn   cephspec.Conn
	health driver.Driver
	pool   driver.Driver
	user   driver.Driver
	admin  *librados.Session
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := cephtest.New(t, cephtest.Options{})
	client := ceph.NewClient(librados.Dial, ceph.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(client.Close)
	conn := cephspec.Conn{ConfigFile: c.ConfigFile, Keyring: c.Keyring}
	admin, err := librados.DialKey(conn, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	h, p, u := client.Drivers()
	return &env{t: t, c: c, conn: conn, health: h, pool: p, user: u, admin: admin}
}

func (e *env) run(d driver.Driver, in any) driver.Result {
	e.t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		e.t.Fatal(err)
	}
	return driver.Run(context.Background(), d, raw)
}

func (e *env) mustRun(d driver.Driver, in any) driver.Result {
	e.t.Helper()
	r := e.run(d, in)
	if !r.OK() {
		e.t.Fatalf("%s: %s", d.Kind(), r.Error)
	}
	return r
}

func (e *env) check(d driver.Driver, in any) []string {
	e.t.Helper()
	raw, _ := json.Marshal(in)
	drift, err := driver.Check(context.Background(), d, raw)
	if err != nil {
		e.t.Fatal(err)
	}
	return drift
}

// mon runs an admin mon command and decodes its JSON answer into out.
func (e *env) mon(out any, args ...any) {
	e.t.Helper()
	c := map[string]any{"format": "json"}
	for i := 0; i+1 < len(args); i += 2 {
		c[args[i].(string)] = args[i+1]
	}
	b, _ := json.Marshal(c)
	res, err := e.admin.MonCommand(b)
	if err != nil {
		e.t.Fatalf("%v: %v", c["prefix"], err)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			e.t.Fatalf("%v: %v", c["prefix"], err)
		}
	}
}

type pool struct {
	Name          string                       `json:"pool_name"`
	Size          int                          `json:"size"`
	MinSize       int                          `json:"min_size"`
	CrushRule     int                          `json:"crush_rule"`
	AutoscaleMode string                       `json:"pg_autoscale_mode"`
	PGNumTarget   int                          `json:"pg_num_target"`
	QuotaBytes    int64                        `json:"quota_max_bytes"`
	QuotaObjects  int64                        `json:"quota_max_objects"`
	Apps          map[string]map[string]string `json:"application_metadata"`
}

func (e *env) pools() map[string]pool {
	e.t.Helper()
	var ps []pool
	e.mon(&ps, "prefix", "osd pool ls", "detail", "detail")
	out := map[string]pool{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out
}

// openstack is the default pool and user set of an OpenStack site, sized for one
// node, as the planner renders it (see pkg/plan render_ceph).
func openstack(conn cephspec.Conn) ([]cephspec.PoolInputs, []cephspec.UserInputs) {
	var pools []cephspec.PoolInputs
	for _, name := range []string{"kube-rbd", "images", "volumes", "vms", "backups"} {
		pools = append(pools, cephspec.PoolInputs{Cluster: conn, Name: name, Size: 1, MinSize: 1, Application: "rbd"})
	}
	users := []cephspec.UserInputs{
		{Cluster: conn, Name: "kube-rbd", Caps: cephspec.RBDCaps([]string{"kube-rbd"}, nil)},
		{Cluster: conn, Name: "glance", Caps: cephspec.RBDCaps([]string{"images"}, nil)},
		{Cluster: conn, Name: "cinder", Caps: cephspec.RBDCaps([]string{"volumes", "vms", "backups"}, []string{"images"})},
		{Cluster: conn, Name: "nova", Caps: cephspec.RBDCaps([]string{"vms"}, []string{"images"})},
	}
	return pools, users
}

func TestDriversOnARealCluster(t *testing.T) {
	e := newEnv(t)
	pools, users := openstack(e.conn)
	metrics := cephspec.PoolInputs{Cluster: e.conn, Name: "metrics", Size: 1, MinSize: 1, PGNum: 16, Application: "rgw",
		QuotaMaxBytes: 1 << 30, QuotaMaxObjects: 1000, CrushRule: "replicated-osd", FailureDomain: "osd"}
	keys := map[string]string{}

	t.Run("health, pools and users are created as declared", func(t *testing.T) {
		began := time.Now()
		r := e.mustRun(e.health, cephspec.HealthInputs{Cluster: e.conn})
		if len(r.Changes) != 0 || r.Outputs["fsid"] != e.c.FSID || !strings.Contains(r.Outputs["monitors"], e.c.IP) {
			t.Errorf("health: changes %v, outputs %v", r.Changes, r.Outputs)
		}
		for _, p := range append(pools, metrics) {
			r := e.mustRun(e.pool, p)
			if len(r.Changes) == 0 || !strings.HasPrefix(r.Changes[len(r.Changes)-1], "pool "+p.Name) && p.Application == "rbd" {
				t.Errorf("pool %s: changes %v", p.Name, r.Changes)
			}
		}
		for _, u := range users {
			r := e.mustRun(e.user, u)
			keys[u.Name] = r.Outputs["key"]
			if len(r.Outputs["key"]) < 20 || !strings.Contains(r.Outputs["keyring"], "[client."+u.Name+"]") {
				t.Errorf("user %s: outputs without a key", u.Name)
			}
			for _, c := range r.Changes {
				if strings.Contains(c, r.Outputs["key"]) {
					t.Errorf("user %s: key in change summary %q", u.Name, c)
				}
			}
		}
		t.Logf("5 pools + 1 rgw pool + 4 users prepared in %s", time.Since(began).Round(time.Millisecond))

		got := e.pools()
		var rules []struct {
			ID   int    `json:"rule_id"`
			Name string `json:"rule_name"`
		}
		e.mon(&rules, "prefix", "osd crush rule dump")
		for _, p := range pools {
			g := got[p.Name]
			if _, ok := g.Apps["rbd"]; g.Size != 1 || g.MinSize != 1 || !ok || g.AutoscaleMode != "on" {
				t.Errorf("pool %s: %+v", p.Name, g)
			}
			if ok, err := e.admin.ObjectExists(p.Name, "rbd_info"); err != nil || !ok {
				t.Errorf("pool %s not RBD-initialised: %v", p.Name, err)
			}
		}
		m := got["metrics"]
		if _, ok := m.Apps["rgw"]; !ok || m.PGNumTarget != 16 || m.AutoscaleMode != "off" || m.QuotaBytes != 1<<30 || m.QuotaObjects != 1000 {
			t.Errorf("pool metrics: %+v", m)
		}
		ruleID := -1
		for _, r := range rules {
			if r.Name == "replicated-osd" {
				ruleID = r.ID
			}
		}
		if ruleID < 0 || m.CrushRule != ruleID {
			t.Errorf("pool metrics uses rule %d, want replicated-osd (%d)", m.CrushRule, ruleID)
		}
	})

	t.Run("the provisioner key writes an image in its pool and is refused elsewhere", func(t *testing.T) {
		s, err := librados.DialKey(cephspec.Conn{ConfigFile: e.c.ConfigFile, User: "kube-rbd"}, keys["kube-rbd"])
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ioctx, err := s.Conn().OpenIOContext("kube-rbd")
		if err != nil {
			t.Fatal(err)
		}
		defer ioctx.Destroy()
		if err := rbd.CreateImage(ioctx, "pvc-1", 16<<20, rbd.NewRbdImageOptions()); err != nil {
			t.Fatal(err)
		}
		img, err := rbd.OpenImage(ioctx, "pvc-1", rbd.NoSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("plinth"), 1000)
		if _, err := img.WriteAt(data, 4096); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, len(data))
		if _, err := img.ReadAt(back, 4096); err != nil || !bytes.Equal(back, data) {
			t.Errorf("read back: %v", err)
		}
		img.Close()

		other, err := s.Conn().OpenIOContext("images")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy()
		err = rbd.CreateImage(other, "sneaky", 16<<20, rbd.NewRbdImageOptions())
		t.Logf("kube-rbd key on pool images: create image: %v", err)
		if !isPerm(err) {
			t.Errorf("creating an image in pool images with the kube-rbd key: %v, want permission denied", err)
		}
		if err := other.WriteFull("probe", []byte("x")); !isPerm(err) {
			t.Errorf("writing an object to pool images with the kube-rbd key: %v, want permission denied", err)
		}
	})

	t.Run("re-applying changes nothing", func(t *testing.T) {
		for _, p := range append(pools, metrics) {
			if r := e.mustRun(e.pool, p); len(r.Changes) != 0 {
				t.Errorf("pool %s: %v", p.Name, r.Changes)
			}
		}
		for _, u := range users {
			if r := e.mustRun(e.user, u); len(r.Changes) != 0 || r.Outputs["key"] != keys[u.Name] {
				t.Errorf("user %s: changes %v, key changed %v", u.Name, r.Changes, r.Outputs["key"] != keys[u.Name])
			}
		}
	})

	t.Run("drift made by hand is detected and repaired", func(t *testing.T) {
		e.mon(nil, "prefix", "osd pool set", "pool", "volumes", "var", "size", "val", "2")
		e.mon(nil, "prefix", "auth caps", "entity", "client.glance", "caps", []string{"mon", "allow r"})
		if d := e.check(e.pool, pools[2]); len(d) != 1 || !strings.HasPrefix(d[0], "pool volumes: size 2 -> 1") {
			t.Errorf("pool drift: %v", d)
		}
		if d := e.check(e.user, users[1]); len(d) != 1 || !strings.Contains(d[0], "mon 'allow r' -> 'profile rbd'") {
			t.Errorf("user drift: %v", d)
		}
		e.mustRun(e.pool, pools[2])
		e.mustRun(e.user, users[1])
		if g := e.pools()["volumes"]; g.Size != 1 || g.MinSize != 1 {
			t.Errorf("volumes after repair: %+v", g)
		}
		if d := e.check(e.user, users[1]); len(d) != 0 {
			t.Errorf("user still drifted: %v", d)
		}
	})

	t.Run("a size the OSDs cannot hold is refused, naming the cause", func(t *testing.T) {
		r := e.run(e.pool, cephspec.PoolInputs{Cluster: e.conn, Name: "triple", Size: 3, MinSize: 2, Application: "rbd"})
		if r.OK() || !r.Retryable || !strings.Contains(r.Error, "size 3 needs 3 osd buckets with an up OSD under default; the cluster has 1") {
			t.Errorf("result %+v", r)
		}
		if _, ok := e.pools()["triple"]; ok {
			t.Error("pool triple was created")
		}
	})

	t.Run("a pool holding images is not deleted; an empty one is", func(t *testing.T) {
		r := e.run(e.pool, cephspec.PoolInputs{Cluster: e.conn, Name: "kube-rbd", Delete: true})
		if r.OK() || r.Retryable || !strings.Contains(r.Error, `refused: it holds 1 RBD image(s) (pvc-1)`) {
			t.Errorf("delete kube-rbd: %+v", r)
		}
		if _, ok := e.pools()["kube-rbd"]; !ok {
			t.Fatal("pool kube-rbd is gone")
		}
		r = e.mustRun(e.pool, cephspec.PoolInputs{Cluster: e.conn, Name: "backups", Delete: true})
		if _, ok := e.pools()["backups"]; ok || len(r.Changes) != 1 {
			t.Errorf("pool backups not deleted: %+v", r)
		}
		var cfg []struct{ Section, Name, Value string }
		e.mon(&cfg, "prefix", "config dump")
		for _, c := range cfg {
			if c.Name == "mon_allow_pool_delete" {
				t.Errorf("mon_allow_pool_delete left set: %+v", c)
			}
		}
		if r := e.mustRun(e.pool, cephspec.PoolInputs{Cluster: e.conn, Name: "backups", Delete: true}); len(r.Changes) != 0 {
			t.Errorf("deleting again: %v", r.Changes)
		}
	})

	t.Run("an OSD down fails the health step, naming it", func(t *testing.T) {
		e.mon(nil, "prefix", "osd set", "key", "noup")
		e.mon(nil, "prefix", "osd down", "ids", []string{"0"})
		defer e.mon(nil, "prefix", "osd unset", "key", "noup")
		r := e.run(e.health, cephspec.HealthInputs{Cluster: e.conn})
		if r.OK() || !r.Retryable || !strings.Contains(r.Error, "OSD") || !strings.Contains(r.Error, "down") {
			t.Errorf("health with osd.0 down: %+v", r)
		}
		t.Logf("health: %s", r.Error)
	})
}

func isPerm(err error) bool {
	return errors.Is(err, rados.ErrPermissionDenied) || errors.Is(err, syscall.EPERM) ||
		(err != nil && strings.Contains(err.Error(), "Operation not permitted"))
}
