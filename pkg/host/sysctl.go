package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"golang.org/x/sys/unix"
)

// SysctlDriver executes host.sysctl steps: it writes kernel parameters through
// /proc/sys. net.* parameters belong to the network namespace of the calling thread,
// all others to the whole host. A parameter dropped from the inputs gets back the
// value it had before Plinth first changed it.
type SysctlDriver struct {
	state *valueStore
	o     options
}

var _ driver.Driver = (*SysctlDriver)(nil)

// NewSysctlDriver returns a driver that records original values in
// stateDir/host.sysctl.owned.json.
func NewSysctlDriver(stateDir string, opts ...Option) *SysctlDriver {
	d := &SysctlDriver{state: &valueStore{}, o: newOptions(opts)}
	if stateDir != "" {
		d.state.path = filepath.Join(stateDir, "host.sysctl.owned.json")
	}
	return d
}

// Kind implements driver.Driver.
func (d *SysctlDriver) Kind() string { return hostspec.KindSysctl }

// Diff implements driver.Driver: one change per parameter to set, then one per
// parameter to restore.
func (d *SysctlDriver) Diff(ctx context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	if d.state.path == "" {
		return nil, driver.Permanent(errors.New("host: sysctl driver has no state directory"))
	}
	want, err := parseSysctls(inputs)
	if err != nil {
		return nil, err
	}
	orig, err := d.state.load()
	if err != nil {
		return nil, err
	}
	var steps []undoable
	wanted := map[string]bool{}
	for _, s := range want {
		wanted[s.Key] = true
		path := filepath.Join(d.o.procSys, sysctlRel(s.Key))
		cur, err := readValue(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && s.Optional:
			continue
		case errors.Is(err, fs.ErrNotExist):
			return nil, driver.Permanent(fmt.Errorf("host: sysctl %s: this kernel has no such parameter (a module not loaded?)", s.Key))
		case err != nil:
			return nil, fmt.Errorf("host: sysctl %s: %w", s.Key, err)
		}
		if cur == normValue(s.Value) {
			continue
		}
		steps = append(steps, undoable{
			summary: fmt.Sprintf("sysctl %s: %s -> %s", s.Key, cur, normValue(s.Value)),
			apply: func(context.Context) error {
				if err := d.state.remember(s.Key, cur); err != nil {
					return err
				}
				return writeSysctl(path, s.Key, s.Value)
			},
			undo: func(context.Context) error { return writeSysctl(path, s.Key, cur) },
		})
	}
	keys := make([]string, 0, len(orig))
	for k := range orig {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if wanted[k] {
			continue
		}
		path, was := filepath.Join(d.o.procSys, sysctlRel(k)), orig[k]
		cur, err := readValue(path)
		if err != nil || cur == was {
			steps = append(steps, undoable{
				summary: fmt.Sprintf("sysctl %s: forget (no longer declared, at its original value or gone)", k),
				apply:   func(context.Context) error { return d.state.forget(k) },
			})
			continue
		}
		steps = append(steps, undoable{
			summary: fmt.Sprintf("sysctl %s: %s -> %s (restored: no longer declared)", k, cur, was),
			apply: func(context.Context) error {
				if err := writeSysctl(path, k, was); err != nil {
					return err
				}
				return d.state.forget(k)
			},
			undo: func(context.Context) error {
				if err := d.state.remember(k, was); err != nil {
					return err
				}
				return writeSysctl(path, k, cur)
			},
		})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return changes(&d.o, steps, nil), nil
}

func writeSysctl(path, key, value string) error {
	if err := writeValue(path, value); err != nil {
		err = fmt.Errorf("host: set sysctl %s to %q: %w", key, value, err)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return driver.Permanent(err)
		}
		return err
	}
	return nil
}

// parseSysctls decodes and checks inputs; every error is Permanent.
func parseSysctls(raw json.RawMessage) ([]hostspec.SysctlSpec, error) {
	var in hostspec.SysctlInputs
	if err := driver.DecodeInputs(hostspec.KindSysctl, raw, &in); err != nil {
		return nil, err
	}
	want, err := checkSysctls(in)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("host: invalid inputs: %w", err))
	}
	return want, nil
}

func checkSysctls(in hostspec.SysctlInputs) ([]hostspec.SysctlSpec, error) {
	seen := map[string]bool{}
	for _, s := range in.Sysctls {
		switch {
		case !validSysctlKey(s.Key):
			return nil, fmt.Errorf("sysctl %q: not a parameter name (dotted, below /proc/sys)", s.Key)
		case seen[s.Key]:
			return nil, fmt.Errorf("sysctl %s listed twice", s.Key)
		case normValue(s.Value) == "" || strings.ContainsAny(s.Value, "\n\r"):
			return nil, fmt.Errorf("sysctl %s: value must be one non-empty line", s.Key)
		}
		seen[s.Key] = true
	}
	slices.SortFunc(in.Sysctls, func(a, b hostspec.SysctlSpec) int { return cmp.Compare(a.Key, b.Key) })
	return in.Sysctls, nil
}

// sysctlRel converts a dotted key to its path below /proc/sys: dots separate
// directories and a '/' stands for a dot inside one (eth0/100 is eth0.100).
func sysctlRel(key string) string {
	parts := strings.Split(key, ".")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "/", ".")
	}
	return filepath.Join(parts...)
}

// validSysctlKey rejects anything that could leave /proc/sys.
func validSysctlKey(key string) bool {
	parts := strings.Split(key, ".")
	if len(parts) < 2 || len(key) > 256 {
		return false
	}
	for _, p := range parts {
		p = strings.ReplaceAll(p, "/", ".")
		if p == "" || p == "." || p == ".." || strings.ContainsFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:@+", r))
		}) {
			return false
		}
	}
	return true
}
