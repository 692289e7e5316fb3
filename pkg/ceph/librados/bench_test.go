//go:build ceph

package librados_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/ceph/cephtest"
	"github.com/plinth-dev/plinth/pkg/ceph/librados"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// BenchmarkOpenStackPools prepares the default OpenStack set (5 pools, 4 users) on a
// fresh single-node cluster, through the drivers (observe, apply, verify, read the
// keys) and through the equivalent ceph/rbd CLI script (apply only), in the same run,
// and prints the ratio. Each iteration starts from no pools and no users.
//
//	go test -tags ceph,pacific -run '^$' -bench OpenStackPools -benchtime 3x ./pkg/ceph/librados/
func BenchmarkOpenStackPools(b *testing.B) {
	c := cephtest.New(b, cephtest.Options{})
	conn := cephspec.Conn{ConfigFile: c.ConfigFile, Keyring: c.Keyring}
	admin, err := librados.DialKey(conn, "")
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	pools, users := openstack(conn)
	reset := func() {
		monCmd(b, admin, "prefix", "config set", "who", "mon", "name", "mon_allow_pool_delete", "value", "true")
		for _, p := range pools {
			monCmd(b, admin, "prefix", "osd pool delete", "pool", p.Name, "pool2", p.Name, "yes_i_really_really_mean_it", true)
		}
		for _, u := range users {
			monCmd(b, admin, "prefix", "auth del", "entity", "client."+u.Name)
		}
		monCmd(b, admin, "prefix", "config rm", "who", "mon", "name", "mon_allow_pool_delete")
		monCmd(b, admin, "prefix", "config rm", "who", "mon", "name", "mon_allow_pool_size_one")
	}
	perOp := map[string]time.Duration{}

	b.Run("driver", func(b *testing.B) {
		client := ceph.NewClient(librados.Dial, ceph.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		defer client.Close()
		health, pool, user := client.Drivers()
		ctx := context.Background()
		runStep := func(d driver.Driver, in any) {
			raw, _ := json.Marshal(in)
			if r := driver.Run(ctx, d, raw); !r.OK() {
				b.Fatalf("%s: %s", d.Kind(), r.Error)
			}
		}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			reset()
			b.StartTimer()
			runStep(health, cephspec.HealthInputs{Cluster: conn})
			for _, p := range pools {
				runStep(pool, p)
			}
			for _, u := range users {
				runStep(user, u)
			}
		}
		perOp["driver"] = b.Elapsed() / time.Duration(b.N)
	})

	b.Run("cli", func(b *testing.B) {
		script := cliScript(pools, users)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			reset()
			b.StartTimer()
			for _, argv := range script {
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = append(os.Environ(), "CEPH_CONF="+c.ConfigFile)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
				}
			}
		}
		perOp["cli"] = b.Elapsed() / time.Duration(b.N)
	})

	if d, c := perOp["driver"], perOp["cli"]; d > 0 && c > 0 {
		// Printed, not logged: a parent benchmark's log is not shown.
		fmt.Printf("OpenStack pool set (5 pools + 4 users): driver %s, ceph CLI %s: the CLI takes %.1fx as long\n",
			d.Round(time.Millisecond), c.Round(time.Millisecond), float64(c)/float64(d))
	}
}

// cliScript is what an operator's shell script would run for the same result.
func cliScript(pools []cephspec.PoolInputs, users []cephspec.UserInputs) [][]string {
	s := [][]string{
		{"ceph", "status"},
		{"ceph", "config", "set", "mon", "mon_allow_pool_size_one", "true"},
	}
	for _, p := range pools {
		s = append(s,
			[]string{"ceph", "osd", "pool", "create", p.Name, "--size", fmt.Sprint(p.Size), "--autoscale-mode", "on"},
			[]string{"ceph", "osd", "pool", "set", p.Name, "min_size", fmt.Sprint(p.MinSize)},
			[]string{"ceph", "osd", "pool", "application", "enable", p.Name, p.Application},
			[]string{"rbd", "pool", "init", p.Name},
		)
	}
	for _, u := range users {
		argv := []string{"ceph", "auth", "get-or-create", "client." + u.Name}
		for _, k := range []string{"mgr", "mon", "osd"} {
			if v, ok := u.Caps[k]; ok {
				argv = append(argv, k, v)
			}
		}
		s = append(s, argv)
	}
	return s
}

func monCmd(tb testing.TB, s *librados.Session, args ...any) {
	tb.Helper()
	c := map[string]any{}
	for i := 0; i+1 < len(args); i += 2 {
		c[args[i].(string)] = args[i+1]
	}
	raw, _ := json.Marshal(c)
	if _, err := s.MonCommand(raw); err != nil && !strings.Contains(err.Error(), "no such file") && !strings.Contains(err.Error(), "does not exist") {
		tb.Fatalf("%v: %v", c["prefix"], err)
	}
}
