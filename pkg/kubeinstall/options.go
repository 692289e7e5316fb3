package kubeinstall

import (
	"log/slog"
	"os/exec"
	"time"

	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// Option configures the drivers.
type Option func(*options)

type options struct {
	paths    Paths
	stateDir string
	log      *slog.Logger
	run      Runner
	services Services
	now      func() time.Time
	// renewBefore is how long before expiry a certificate is renewed (Plinth's own)
	// or reported (kubeadm's).
	renewBefore time.Duration
	// healthWait bounds how long Apply waits for a started etcd member to be healthy.
	healthWait time.Duration
	clients    ClientFunc
	lookPath   func(string) (string, error)
	// profile is what this kind of machine forces on kubelet, kube-proxy, kubeadm.
	profile hostprofile.Profile
}

// DefaultRenewBefore is how early certificate expiry is acted on or reported.
const DefaultRenewBefore = kubespec.CertWarnBefore

func newOptions(stateDir string, opts []Option) *options {
	o := &options{
		stateDir: stateDir, log: slog.Default(), run: ExecRunner{},
		now: time.Now, renewBefore: DefaultRenewBefore, healthWait: 60 * time.Second, clients: NewClient, lookPath: exec.LookPath,
	}
	for _, f := range opts {
		f(o)
	}
	if o.services == nil {
		o.services = Systemd{Run: o.run}
	}
	o.clients = reuseClients(o.clients)
	return o
}

// WithHostProfile applies what this kind of machine forces (pkg/hostprofile) to the
// kubeadm configuration the drivers render; real hosts have none.
func WithHostProfile(p hostprofile.Profile) Option { return func(o *options) { o.profile = p } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRoot places every host path under root (tests).
func WithRoot(root string) Option { return func(o *options) { o.paths = Paths{Root: root} } }

// WithRunner replaces how commands (kubeadm, systemctl) run; such a runner finds
// its own binaries.
func WithRunner(r Runner) Option {
	return func(o *options) { o.run, o.lookPath = r, nil }
}

// WithServices replaces the service manager (systemd by default).
func WithServices(s Services) Option { return func(o *options) { o.services = s } }

// WithClock sets the clock certificate checks use.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithHealthWait bounds how long a started etcd member may take to become healthy.
func WithHealthWait(d time.Duration) Option { return func(o *options) { o.healthWait = d } }
