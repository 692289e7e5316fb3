package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

// HugepagesDriver executes host.hugepages steps: it sets nr_hugepages per page size,
// system-wide or per NUMA node, through sysfs. Sysfs is not namespaced: this changes
// the whole host. A reservation dropped from the inputs gets back the count it had
// before Plinth first changed it.
type HugepagesDriver struct {
	state *valueStore
	o     options
}

var _ driver.Driver = (*HugepagesDriver)(nil)

// NewHugepagesDriver returns a driver that records original counts in
// stateDir/host.hugepages.owned.json.
func NewHugepagesDriver(stateDir string, opts ...Option) *HugepagesDriver {
	d := &HugepagesDriver{state: &valueStore{}, o: newOptions(opts)}
	if stateDir != "" {
		d.state.path = filepath.Join(stateDir, "host.hugepages.owned.json")
	}
	return d
}

// Kind implements driver.Driver.
func (d *HugepagesDriver) Kind() string { return hostspec.KindHugepages }

// hugepageKey names a pool in state and messages: "2048kB" or "2048kB/node0".
func hugepageKey(s hostspec.HugepageSpec) string {
	k := strconv.Itoa(s.SizeKB) + "kB"
	if s.Node != nil {
		k += "/node" + strconv.Itoa(*s.Node)
	}
	return k
}

// path is the nr_hugepages file of a pool named by hugepageKey.
func (d *HugepagesDriver) path(key string) string {
	size, node, perNode := cutNode(key)
	if perNode {
		return filepath.Join(d.o.sysfs, "devices/system/node", node, "hugepages", "hugepages-"+size, "nr_hugepages")
	}
	return filepath.Join(d.o.sysfs, "kernel/mm/hugepages", "hugepages-"+size, "nr_hugepages")
}

func cutNode(key string) (size, node string, ok bool) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

func describePool(key string) string {
	size, node, ok := cutNode(key)
	if ok {
		return "hugepages " + size + " on " + node
	}
	return "hugepages " + size
}

// Diff implements driver.Driver.
func (d *HugepagesDriver) Diff(ctx context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	if d.state.path == "" {
		return nil, driver.Permanent(errors.New("host: hugepages driver has no state directory"))
	}
	want, err := parseHugepages(inputs)
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
		key := hugepageKey(s)
		wanted[key] = true
		path := d.path(key)
		cur, err := readValue(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, driver.Permanent(fmt.Errorf("host: %s: this host has no such pool (page size unsupported or no such NUMA node)", describePool(key)))
		case err != nil:
			return nil, fmt.Errorf("host: %s: %w", describePool(key), err)
		}
		n := strconv.Itoa(s.Count)
		if cur == n {
			continue
		}
		steps = append(steps, undoable{
			summary: fmt.Sprintf("%s: %s -> %d pages", describePool(key), cur, s.Count),
			apply: func(context.Context) error {
				if err := d.state.remember(key, cur); err != nil {
					return err
				}
				return setHugepages(path, key, n)
			},
			undo: func(context.Context) error { return setHugepages(path, key, cur) },
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
		path, was := d.path(k), orig[k]
		cur, err := readValue(path)
		if err != nil || cur == was {
			steps = append(steps, undoable{
				summary: describePool(k) + ": forget (no longer declared, at its original count or gone)",
				apply:   func(context.Context) error { return d.state.forget(k) },
			})
			continue
		}
		steps = append(steps, undoable{
			summary: fmt.Sprintf("%s: %s -> %s pages (restored: no longer declared)", describePool(k), cur, was),
			apply: func(context.Context) error {
				if err := setHugepages(path, k, was); err != nil {
					return err
				}
				return d.state.forget(k)
			},
		})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return changes(&d.o, steps, nil), nil
}

// setHugepages writes a pool's count and reads it back: the kernel reserves what it
// can, and fewer pages (fragmented memory) is an error worth retrying later.
func setHugepages(path, key, n string) error {
	if err := writeValue(path, n); err != nil {
		err = fmt.Errorf("host: set %s to %s: %w", describePool(key), n, err)
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
			return driver.Permanent(err)
		}
		return err
	}
	got, err := readValue(path)
	if err != nil {
		return fmt.Errorf("host: %s: read back: %w", describePool(key), err)
	}
	if got != n {
		return fmt.Errorf("host: %s: the kernel reserved %s of %s pages (too little free, unfragmented memory; reserve them at boot on the kernel command line)", describePool(key), got, n)
	}
	return nil
}

// parseHugepages decodes and checks inputs; every error is Permanent.
func parseHugepages(raw json.RawMessage) ([]hostspec.HugepageSpec, error) {
	var in hostspec.HugepagesInputs
	if err := driver.DecodeInputs(hostspec.KindHugepages, raw, &in); err != nil {
		return nil, err
	}
	want, err := checkHugepages(in)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("host: invalid inputs: %w", err))
	}
	return want, nil
}

func checkHugepages(in hostspec.HugepagesInputs) ([]hostspec.HugepageSpec, error) {
	seen := map[string]bool{}
	for _, s := range in.Pages {
		key := hugepageKey(s)
		switch {
		case s.SizeKB <= 0 || s.Count < 0 || (s.Node != nil && *s.Node < 0):
			return nil, fmt.Errorf("%s: size, count and node must not be negative", describePool(key))
		case seen[key]:
			return nil, fmt.Errorf("%s listed twice", describePool(key))
		}
		seen[key] = true
	}
	return in.Pages, nil
}
