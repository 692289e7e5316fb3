package ovs

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// DefaultRunDir is where the packaged OVS service keeps db.sock and control sockets.
const DefaultRunDir = ovsspec.DefaultRunDir

// Restarter restarts ovs-vswitchd so that it reads the DPDK settings again. Desc
// names the action in step results ("systemctl restart openvswitch-switch").
type Restarter struct {
	Desc string
	Fn   func(ctx context.Context) error
}

// SystemdRestart is the restart action on a real host.
var SystemdRestart = Restarter{
	Desc: "systemctl restart openvswitch-switch",
	Fn: func(ctx context.Context) error {
		return run(ctx, nil, "systemctl", "restart", "openvswitch-switch")
	},
}

type options struct {
	runDir   string // OVS_RUNDIR: ovs-vswitchd's pidfile and control socket
	endpoint string // ovsdb-server
	logFile  string // ovs-vswitchd's log, for DPDK error hints
	restart  Restarter
	log      *slog.Logger
	sysRoot  string // prefix for /sys (tests)
	settle   time.Duration
	dpdkWait time.Duration
	linkWait time.Duration
}

// Option configures the OVS drivers.
type Option func(*options)

// WithRunDir points the drivers at an OVS run directory: DIR/db.sock, and
// ovs-vswitchd's control socket found through DIR/ovs-vswitchd.pid. Default
// /var/run/openvswitch.
func WithRunDir(dir string) Option {
	return func(o *options) {
		o.runDir = dir
		o.endpoint = "unix:" + filepath.Join(dir, "db.sock")
	}
}

// WithEndpoint overrides the ovsdb-server endpoint (unix:PATH or tcp:IP:PORT).
func WithEndpoint(ep string) Option { return func(o *options) { o.endpoint = ep } }

// WithLogFile names ovs-vswitchd's log, quoted when DPDK fails to initialise.
// Default /var/log/openvswitch/ovs-vswitchd.log.
func WithLogFile(path string) Option { return func(o *options) { o.logFile = path } }

// WithRestart sets how ovs-vswitchd is restarted; default SystemdRestart.
func WithRestart(r Restarter) Option { return func(o *options) { o.restart = r } }

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithSysRoot reads CPU and NUMA topology below root instead of /sys (tests).
func WithSysRoot(root string) Option { return func(o *options) { o.sysRoot = root } }

// WithTimeouts sets how long to wait for ovs-vswitchd to apply a change (settle),
// for DPDK to initialise after a restart (dpdk: zeroing many GB of hugepages takes
// a while) and for a new port's link to come up.
func WithTimeouts(settle, dpdk, link time.Duration) Option {
	return func(o *options) { o.settle, o.dpdkWait, o.linkWait = settle, dpdk, link }
}

func newOptions(opts []Option) options {
	o := options{
		restart: SystemdRestart, log: slog.Default(), logFile: "/var/log/openvswitch/ovs-vswitchd.log",
		settle: 15 * time.Second, dpdkWait: 60 * time.Second, linkWait: 5 * time.Second,
	}
	WithRunDir(DefaultRunDir)(&o)
	for _, fn := range opts {
		fn(&o)
	}
	return o
}
