package containerd

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/bundle"
)

// Paths says where containerd keeps its files on this host. Zero fields take the
// defaults of Debian's containerd package.
type Paths struct {
	ConfigPath string // /etc/containerd/config.toml
	// CertsDir holds one <registry>/hosts.toml per mirrored registry (config_path).
	CertsDir string // /etc/containerd/certs.d
	Root     string // /var/lib/containerd
	State    string // /run/containerd
	Address  string // /run/containerd/containerd.sock
	// CNIBinDir and CNIConfDir, when set, override the CRI's /opt/cni/bin and /etc/cni/net.d.
	CNIBinDir  string
	CNIConfDir string
	// RuncBinary, when set, replaces runc on PATH (e.g. a wrapper on a lab machine).
	RuncBinary string
}

func (p Paths) withDefaults() Paths {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&p.ConfigPath, "/etc/containerd/config.toml")
	def(&p.CertsDir, "/etc/containerd/certs.d")
	def(&p.Root, "/var/lib/containerd")
	def(&p.State, "/run/containerd")
	def(&p.Address, "/run/containerd/containerd.sock")
	return p
}

// WithBundleRoot sets where site bundles are unpacked (bundle.DefaultRoot on hosts).
func WithBundleRoot(dir string) Option { return func(o *options) { o.bundleRoot = dir } }

// Option configures the drivers of this package.
type Option func(*options)

type options struct {
	paths        Paths
	bundleRoot   string
	restart      func(ctx context.Context) error
	log          *slog.Logger
	readyTimeout time.Duration
}

func newOptions(opts []Option) options {
	o := options{restart: SystemdRestart, log: slog.Default(), readyTimeout: 60 * time.Second, bundleRoot: bundle.DefaultRoot}
	for _, f := range opts {
		f(&o)
	}
	o.paths = o.paths.withDefaults()
	return o
}

// WithPaths sets where containerd lives; see Paths for the defaults.
func WithPaths(p Paths) Option { return func(o *options) { o.paths = p } }

// WithRestart sets how the daemon is restarted; the default is SystemdRestart. The
// driver waits for the CRI to answer afterwards, so f need not.
func WithRestart(f func(ctx context.Context) error) Option {
	return func(o *options) { o.restart = f }
}

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReadyTimeout bounds the wait for the CRI after a restart; default 60 s.
func WithReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

// SystemdRestart runs `systemctl restart containerd`.
func SystemdRestart(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "systemctl", "restart", "containerd").CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl restart containerd: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
