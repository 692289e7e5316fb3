package containerd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// pendingFile marks, in the driver's state directory, that files were rewritten and
// the daemon has not been restarted since: a crash between the two must not leave
// containerd running with the old config while the files look in sync.
const pendingFile = "containerd.restart-pending"

// ConfigDriver executes containerd.config steps.
type ConfigDriver struct {
	stateDir     string
	paths        Paths
	restart      func(ctx context.Context) error
	log          *slog.Logger
	readyTimeout time.Duration
	// ping checks that the CRI answers; a field so unit tests need no daemon.
	ping func(ctx context.Context) error
}

var _ driver.Driver = (*ConfigDriver)(nil)

// NewConfigDriver returns a driver that keeps its restart marker in stateDir.
func NewConfigDriver(stateDir string, opts ...Option) *ConfigDriver {
	o := newOptions(opts)
	d := &ConfigDriver{stateDir: stateDir, paths: o.paths, restart: o.restart, log: o.log, readyTimeout: o.readyTimeout}
	d.ping = func(ctx context.Context) error { return pingCRI(ctx, d.paths.Address) }
	return d
}

// Kind implements driver.Driver.
func (d *ConfigDriver) Kind() string { return containerdspec.KindConfig }

// Diff implements driver.Driver. Changes come in this order: config.toml, hosts.toml
// writes, hosts.toml removals, then one restart if anything changed, a restart is
// still pending, or the CRI does not answer.
func (d *ConfigDriver) Diff(ctx context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	if d.stateDir == "" {
		return nil, driver.Permanent(errors.New("containerd: config driver has no state directory"))
	}
	in, err := parseConfig(inputs)
	if err != nil {
		return nil, err
	}
	var changes []driver.Change
	add := func(c *driver.Change, err error) error {
		if c != nil {
			changes = append(changes, *c)
		}
		return err
	}
	if err := add(d.fileChange(d.paths.ConfigPath, renderConfig(d.paths, in), "")); err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for _, m := range in.Mirrors {
		wanted[m.Registry] = true
		p := filepath.Join(d.paths.CertsDir, m.Registry, "hosts.toml")
		if err := add(d.fileChange(p, renderHosts(m), "mirrors "+strings.Join(m.Endpoints, ", "))); err != nil {
			return nil, err
		}
	}
	stale, err := d.staleHosts(wanted)
	if err != nil {
		return nil, err
	}
	changes = append(changes, stale...)

	pending, err := d.pending()
	if err != nil {
		return nil, err
	}
	switch {
	case len(changes) > 0:
		changes = append(changes, d.restartChange("config changed"))
	case pending:
		changes = append(changes, d.restartChange("config changed earlier, restart still pending"))
	default:
		if err := d.ping(ctx); err != nil {
			changes = append(changes, d.restartChange(fmt.Sprintf("not answering: %v", err)))
		}
	}
	return changes, nil
}

// parseConfig decodes and checks inputs; bad inputs are Permanent.
func parseConfig(raw json.RawMessage) (containerdspec.ConfigInputs, error) {
	var in containerdspec.ConfigInputs
	if err := driver.DecodeInputs(containerdspec.KindConfig, raw, &in); err != nil {
		return in, err
	}
	bad := func(format string, args ...any) (containerdspec.ConfigInputs, error) {
		return in, driver.Permanent(fmt.Errorf("containerd: inputs: "+format, args...))
	}
	switch {
	case in.SandboxImage == "":
		return bad("sandboxImage is required")
	case in.Snapshotter == "":
		return bad("snapshotter is required")
	case in.CgroupDriver != "systemd" && in.CgroupDriver != "cgroupfs":
		return bad("cgroupDriver %q is not systemd or cgroupfs", in.CgroupDriver)
	}
	for i, m := range in.Mirrors {
		// The registry becomes a directory name: nothing that leaves certs.d.
		if m.Registry == "" || m.Registry == "." || m.Registry == ".." || strings.ContainsAny(m.Registry, `/\`) {
			return bad("mirror %q is not a registry host", m.Registry)
		}
		if slices.IndexFunc(in.Mirrors[:i], func(o containerdspec.Mirror) bool { return o.Registry == m.Registry }) >= 0 {
			return bad("mirror %q is listed twice", m.Registry)
		}
		if len(m.Endpoints) == 0 {
			return bad("mirror %q has no endpoints", m.Registry)
		}
	}
	return in, nil
}

// fileChange returns a change that writes want to path, or nil if it holds want.
func (d *ConfigDriver) fileChange(path string, want []byte, note string) (*driver.Change, error) {
	have, exists, err := readFile(path)
	if err != nil || bytes.Equal(have, want) {
		return nil, err
	}
	verb := "update"
	if !exists {
		verb = "create"
	}
	summary := verb + " " + path
	if note != "" {
		summary += " (" + note + ")"
	}
	return &driver.Change{Summary: summary, Apply: func(ctx context.Context) error {
		if err := d.setPending(); err != nil {
			return err
		}
		return writeFile(path, want, 0o644)
	}}, nil
}

// staleHosts returns removals of hosts.toml files we wrote for registries no
// longer mirrored. Files written by anyone else stay.
func (d *ConfigDriver) staleHosts(wanted map[string]bool) ([]driver.Change, error) {
	entries, err := os.ReadDir(d.paths.CertsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("containerd: read %s: %w", d.paths.CertsDir, err)
	}
	var out []driver.Change
	for _, e := range entries {
		if !e.IsDir() || wanted[e.Name()] {
			continue
		}
		p := filepath.Join(d.paths.CertsDir, e.Name(), "hosts.toml")
		ours, err := writtenByUs(p)
		if err != nil {
			return nil, err
		}
		if ours {
			out = append(out, driver.Change{Summary: "remove " + p + " (no mirrors declared)", Apply: func(ctx context.Context) error {
				if err := d.setPending(); err != nil {
					return err
				}
				return removeOwned(p)
			}})
		}
	}
	return out, nil
}

func (d *ConfigDriver) restartChange(reason string) driver.Change {
	return driver.Change{Summary: "restart containerd (" + reason + ")", Apply: func(ctx context.Context) error {
		d.log.Info("containerd: restarting", "reason", reason)
		if err := d.restart(ctx); err != nil {
			return fmt.Errorf("containerd: restart: %w", err)
		}
		if err := waitReady(ctx, d.ping, d.readyTimeout); err != nil {
			return fmt.Errorf("containerd: restarted, but: %w", err)
		}
		return d.clearPending()
	}}
}

func (d *ConfigDriver) pendingPath() string { return filepath.Join(d.stateDir, pendingFile) }

func (d *ConfigDriver) pending() (bool, error) {
	_, err := os.Stat(d.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("containerd: check restart marker: %w", err)
	}
	return true, nil
}

func (d *ConfigDriver) setPending() error {
	if err := os.MkdirAll(d.stateDir, 0o700); err != nil {
		return fmt.Errorf("containerd: create %s: %w", d.stateDir, err)
	}
	return writeFile(d.pendingPath(), nil, 0o600)
}

func (d *ConfigDriver) clearPending() error {
	if err := os.Remove(d.pendingPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("containerd: clear restart marker: %w", err)
	}
	return nil
}
