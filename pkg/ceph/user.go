package ceph

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"syscall"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// UserDriver runs ceph.user steps: client.<name> with exactly the declared caps. Its
// outputs carry the user's key for the charts; the coordinator seals them.
type UserDriver struct{ c *Client }

// Kind implements driver.Driver.
func (d *UserDriver) Kind() string { return cephspec.KindUser }

// Diff implements driver.Driver.
func (d *UserDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	in, err := parseUser(raw)
	if err != nil {
		return nil, err
	}
	cl, err := d.c.session(ctx, in.Cluster)
	if err != nil {
		return nil, err
	}
	caps, found, err := userCaps(cl, in.Name)
	d.c.forget(in.Cluster, err)
	if err != nil {
		return nil, err
	}
	return d.c.changes(in.Cluster, planUser(in, caps, found)), nil
}

// Outputs implements driver.Outputter: the key, and a keyring file holding it.
func (d *UserDriver) Outputs(ctx context.Context, raw json.RawMessage) (map[string]string, error) {
	in, err := parseUser(raw)
	if err != nil || in.Delete {
		return nil, err
	}
	cl, err := d.c.session(ctx, in.Cluster)
	if err != nil {
		return nil, err
	}
	var k struct {
		Key string `json:"key"`
	}
	err = mon(cl, cmd{"prefix": "auth get-key", "entity": entity(in.Name)}, &k)
	d.c.forget(in.Cluster, err)
	if err != nil {
		return nil, fmt.Errorf("ceph: read the key of %s: %w", entity(in.Name), err)
	}
	if k.Key == "" {
		return nil, fmt.Errorf("ceph: %s has no key", entity(in.Name))
	}
	return map[string]string{
		cephspec.OutputKey:     k.Key,
		cephspec.OutputKeyring: fmt.Sprintf("[%s]\n\tkey = %s\n", entity(in.Name), k.Key),
	}, nil
}

func entity(name string) string { return "client." + name }

// userCaps reads a user's caps; found is false when it does not exist. The key that
// "auth get" also returns is dropped here.
func userCaps(cl Cluster, name string) (map[string]string, bool, error) {
	var ents []struct {
		Caps map[string]string `json:"caps"`
	}
	err := mon(cl, cmd{"prefix": "auth get", "entity": entity(name)}, &ents)
	switch {
	case isErrno(err, syscall.ENOENT):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("ceph: read user %s: %w", entity(name), err)
	case len(ents) == 0:
		return nil, false, nil
	}
	return ents[0].Caps, true, nil
}

// planUser diffs one user against its inputs. Summaries name caps, never keys.
func planUser(in cephspec.UserInputs, caps map[string]string, found bool) []action {
	ent := entity(in.Name)
	switch {
	case in.Delete && !found, !in.Delete && found && maps.Equal(caps, in.Caps):
		return nil
	case in.Delete:
		return []action{{summary: "delete user " + ent, do: func(cl Cluster) error {
			if err := mon(cl, cmd{"prefix": "auth del", "entity": ent}, nil); err != nil && !isErrno(err, syscall.ENOENT) {
				return fmt.Errorf("ceph: delete user %s: %w", ent, err)
			}
			return nil
		}}}
	case !found:
		return []action{{summary: fmt.Sprintf("create user %s (%s)", ent, capsString(in.Caps)), do: func(cl Cluster) error {
			// The reply carries the key; it is not decoded here, Outputs reads it.
			if err := mon(cl, cmd{"prefix": "auth get-or-create", "entity": ent, "caps": capsArgs(in.Caps)}, nil); err != nil {
				return fmt.Errorf("ceph: create user %s: %w", ent, err)
			}
			return nil
		}}}
	}
	return []action{{summary: fmt.Sprintf("user %s: caps %s", ent, capsDiff(caps, in.Caps)), do: func(cl Cluster) error {
		if err := mon(cl, cmd{"prefix": "auth caps", "entity": ent, "caps": capsArgs(in.Caps)}, nil); err != nil {
			return fmt.Errorf("ceph: set caps of %s: %w", ent, err)
		}
		return nil
	}}}
}

func capsDiff(have, want map[string]string) string {
	keys := map[string]bool{}
	for k := range have {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var parts []string
	for k := range keys {
		h, w := have[k], want[k]
		if h != w {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", k, quoteCap(h), quoteCap(w)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func quoteCap(s string) string {
	if s == "" {
		return "(none)"
	}
	return "'" + s + "'"
}
