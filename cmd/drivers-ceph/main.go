// Command plinth-drivers-ceph runs the agent's Ceph step drivers (ceph.health,
// ceph.pool, ceph.user) for one operation and exits, as plinth-drivers does for
// every other kind. It is a program of its own because it alone links librados and
// librbd: their C++ start-up would otherwise cost every step run and drift pass on
// every host, and most hosts run no Ceph step.
//
//	plinth-drivers-ceph [flags] hello|run|check   < request.json > reply.json
package main

import (
	"cmp"

	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/ceph/librados"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/driverprog"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { driverprog.Exit(driverexec.CephBinary, version, drivers) }

// drivers is the one place plinth-drivers-ceph constructs a step kind's driver. The
// Ceph driver links librados only when built with -tags ceph,pacific (make build);
// otherwise its steps fail saying so.
func drivers(o driverprog.Options) map[string]driver.Driver {
	opts := []ceph.Option{ceph.WithConfigFile(cmp.Or(o.CephConf, ceph.SystemConfigFile)), ceph.WithLogger(o.Log)}
	health, pool, user := ceph.NewClient(librados.Dial, opts...).Drivers()
	return map[string]driver.Driver{
		cephspec.KindHealth: health,
		cephspec.KindPool:   pool,
		cephspec.KindUser:   user,
	}
}
