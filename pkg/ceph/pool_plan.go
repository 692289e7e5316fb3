package ceph

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// action is one change to a cluster, before it is bound to a session.
type action struct {
	summary string
	do      func(cl Cluster) error
}

// planPool diffs one pool against its inputs. cur is nil when the pool does not
// exist; rbdReady says whether it was RBD initialised. It returns the actions in the
// order they must run and, when pg_num is still moving towards its target, a note.
func planPool(in cephspec.PoolInputs, cur *poolState, topo topology, rbdReady bool) (acts []action, progress string) {
	if a, ok := capacity(in, cur, topo); !ok {
		return []action{a}, ""
	}
	if in.CrushRule != "" {
		if _, ok := topo.rule(in.CrushRule); !ok {
			acts = append(acts, createRule(in))
		}
	}
	var state poolState
	curRule := ""
	if cur == nil {
		acts = append(acts, createPool(in))
		state, curRule = created(in), in.CrushRule
	} else {
		state, curRule = *cur, topo.ruleName(cur.CrushRule)
	}
	acts = append(acts, replication(in, state)...)
	switch {
	case in.PGNum > 0 && state.AutoscaleMode != "off":
		acts = append(acts, poolSet(in.Name, "pg_autoscale_mode", "off", fmt.Sprintf("pool %s: pg autoscale %s -> off (pgNum %d is fixed)", in.Name, state.AutoscaleMode, in.PGNum)))
	case in.PGNum == 0 && state.AutoscaleMode != "on":
		acts = append(acts, poolSet(in.Name, "pg_autoscale_mode", "on", fmt.Sprintf("pool %s: pg autoscale %s -> on", in.Name, orNone(state.AutoscaleMode))))
	}
	// pg_num changes are asynchronous: the target is what was asked, pg_num follows.
	if in.PGNum > 0 && cur != nil && cur.PGNumTarget != in.PGNum {
		acts = append(acts, poolSet(in.Name, "pg_num", strconv.Itoa(in.PGNum),
			fmt.Sprintf("pool %s: pg_num %d -> %d (Ceph moves there gradually)", in.Name, cur.PGNumTarget, in.PGNum)))
	} else if cur != nil && cur.PGNum != cur.PGNumTarget {
		progress = fmt.Sprintf("pool %s: pg_num %d, moving to %d", in.Name, cur.PGNum, cur.PGNumTarget)
	}
	if in.CrushRule != "" && curRule != in.CrushRule {
		acts = append(acts, poolSet(in.Name, "crush_rule", in.CrushRule, fmt.Sprintf("pool %s: crush_rule %s -> %s", in.Name, curRule, in.CrushRule)))
	}
	_, enabled := state.Applications[in.Application]
	rbdInit := in.Application == "rbd" && !rbdReady
	// rbd_pool_init enables the rbd application on a pool that has none (one osdmap
	// commit less); a pool another application holds gets the mon command, whose
	// refusal says why.
	initEnables := rbdInit && len(state.Applications) == 0
	if !enabled && !initEnables {
		acts = append(acts, enableApp(in.Name, in.Application))
	}
	if rbdInit {
		summary := fmt.Sprintf("pool %s: initialise for RBD", in.Name)
		if initEnables {
			summary = fmt.Sprintf("pool %s: enable application rbd and initialise for RBD", in.Name)
		}
		acts = append(acts, action{
			summary: summary,
			do: func(cl Cluster) error {
				if err := cl.RBDPoolInit(in.Name); err != nil {
					return fmt.Errorf("ceph: rbd pool init %q: %w", in.Name, err)
				}
				return nil
			},
		})
	}
	acts = append(acts, quotas(in, state)...)
	return acts, progress
}

// capacity checks that CRUSH can place size replicas in distinct failure domains
// with an up OSD; when it cannot, the returned action explains and waits.
func capacity(in cephspec.PoolInputs, cur *poolState, topo topology) (action, bool) {
	root, class, typ := "default", in.DeviceClass, in.FailureDomain
	r, ok := topo.rule(in.CrushRule)
	switch {
	case ok:
		root, class, typ = r.domain()
	case in.CrushRule != "": // Plinth creates it from failureDomain/deviceClass
	case cur != nil:
		for _, rr := range topo.rules {
			if rr.ID == cur.CrushRule {
				root, class, typ = rr.domain()
			}
		}
	case len(topo.rules) > 0: // a new pool gets the default (first) rule
		root, class, typ = topo.rules[0].domain()
	}
	if typ == "" {
		return action{}, true
	}
	n := topo.tree.domains(root, class, typ)
	if n >= in.Size {
		return action{}, true
	}
	where := root
	if class != "" {
		where += " class " + class
	}
	msg := fmt.Sprintf("pool %s: size %d needs %d %s buckets with an up OSD under %s; the cluster has %d", in.Name, in.Size, in.Size, typ, where, n)
	return action{summary: msg, do: func(Cluster) error {
		return errors.New("too few OSDs for this size: add OSDs or hosts, or lower the pool's size (Plinth does not deploy OSDs)")
	}}, false
}

// created is the state Ceph gives a pool that createPool made.
func created(in cephspec.PoolInputs) poolState {
	mode := "on"
	if in.PGNum > 0 {
		mode = "off"
	}
	return poolState{Name: in.Name, Size: in.Size, MinSize: in.Size - in.Size/2, AutoscaleMode: mode, PGNum: in.PGNum, PGNumTarget: in.PGNum}
}

func createPool(in cephspec.PoolInputs) action {
	c := cmd{"prefix": "osd pool create", "pool": in.Name, "pool_type": "replicated", "size": in.Size, "autoscale_mode": "on"}
	desc := fmt.Sprintf("size %d, min_size %d, pg autoscale on", in.Size, in.MinSize)
	if in.PGNum > 0 {
		c["pg_num"], c["pgp_num"], c["autoscale_mode"] = in.PGNum, in.PGNum, "off"
		desc = fmt.Sprintf("size %d, min_size %d, pg_num %d", in.Size, in.MinSize, in.PGNum)
	}
	if in.CrushRule != "" {
		c["rule"] = in.CrushRule
		desc += ", rule " + in.CrushRule
	}
	desc += ", application " + in.Application
	if in.Size == 1 {
		desc += "; one copy of the data: a single-node site has no redundancy"
	}
	return action{
		summary: fmt.Sprintf("create pool %s (%s)", in.Name, desc),
		do: func(cl Cluster) error {
			if in.Size == 1 {
				if err := allowSizeOne(cl); err != nil {
					return err
				}
			}
			if err := mon(cl, c, nil); err != nil && !isErrno(err, syscall.EEXIST) {
				return fmt.Errorf("ceph: create pool %q: %w", in.Name, err)
			}
			return nil
		},
	}
}

// allowSizeOne lets the monitors accept size 1, which they refuse by default.
func allowSizeOne(cl Cluster) error {
	if err := mon(cl, cmd{"prefix": "config set", "who": "mon", "name": "mon_allow_pool_size_one", "value": "true"}, nil); err != nil {
		return fmt.Errorf("ceph: allow pool size 1: %w", err)
	}
	return nil
}

func createRule(in cephspec.PoolInputs) action {
	c := cmd{"prefix": "osd crush rule create-replicated", "name": in.CrushRule, "root": "default", "type": in.FailureDomain}
	desc := "failure domain " + in.FailureDomain
	if in.DeviceClass != "" {
		c["class"] = in.DeviceClass
		desc += ", class " + in.DeviceClass
	}
	return action{
		summary: fmt.Sprintf("create CRUSH rule %s (root default, %s)", in.CrushRule, desc),
		do: func(cl Cluster) error {
			if in.FailureDomain == "" {
				return fmt.Errorf("ceph: pool %q: CRUSH rule %q does not exist; create it or name another", in.Name, in.CrushRule)
			}
			if err := mon(cl, c, nil); err != nil {
				return fmt.Errorf("ceph: create CRUSH rule %q: %w", in.CrushRule, err)
			}
			return nil
		},
	}
}

// replication sets size and min_size in an order Ceph accepts (min_size <= size at
// every point).
func replication(in cephspec.PoolInputs, cur poolState) []action {
	var size, minSize []action
	if cur.Size != in.Size {
		note := ""
		if in.Size == 1 {
			note = " (one copy of the data: a single-node site has no redundancy)"
		}
		size = append(size, action{
			summary: fmt.Sprintf("pool %s: size %d -> %d%s", in.Name, cur.Size, in.Size, note),
			do: func(cl Cluster) error {
				c := cmd{"prefix": "osd pool set", "pool": in.Name, "var": "size", "val": strconv.Itoa(in.Size)}
				if in.Size == 1 {
					if err := allowSizeOne(cl); err != nil {
						return err
					}
					c["yes_i_really_mean_it"] = true
				}
				if err := mon(cl, c, nil); err != nil {
					return fmt.Errorf("ceph: pool %q: set size %d: %w", in.Name, in.Size, err)
				}
				return nil
			},
		})
	}
	if cur.MinSize != in.MinSize {
		minSize = append(minSize, poolSet(in.Name, "min_size", strconv.Itoa(in.MinSize), fmt.Sprintf("pool %s: min_size %d -> %d", in.Name, cur.MinSize, in.MinSize)))
	}
	if in.MinSize > cur.Size {
		return append(size, minSize...)
	}
	return append(minSize, size...)
}

func quotas(in cephspec.PoolInputs, cur poolState) []action {
	var acts []action
	for _, q := range []struct {
		field      string
		have, want int64
	}{{"max_bytes", cur.QuotaMaxBytes, in.QuotaMaxBytes}, {"max_objects", cur.QuotaMaxObjects, in.QuotaMaxObjects}} {
		if q.have == q.want {
			continue
		}
		c := cmd{"prefix": "osd pool set-quota", "pool": in.Name, "field": q.field, "val": strconv.FormatInt(q.want, 10)}
		field := q.field
		acts = append(acts, action{
			summary: fmt.Sprintf("pool %s: quota %s %s -> %s", in.Name, q.field, quota(q.have), quota(q.want)),
			do: func(cl Cluster) error {
				if err := mon(cl, c, nil); err != nil {
					return fmt.Errorf("ceph: pool %q: set quota %s: %w", in.Name, field, err)
				}
				return nil
			},
		})
	}
	return acts
}

func quota(n int64) string {
	if n == 0 {
		return "none"
	}
	return strconv.FormatInt(n, 10)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func poolSet(pool, key, val, summary string) action {
	return action{summary: summary, do: func(cl Cluster) error {
		if err := mon(cl, cmd{"prefix": "osd pool set", "pool": pool, "var": key, "val": val}, nil); err != nil {
			return fmt.Errorf("ceph: pool %q: set %s %s: %w", pool, key, val, err)
		}
		return nil
	}}
}

func enableApp(pool, app string) action {
	return action{summary: fmt.Sprintf("pool %s: enable application %s", pool, app), do: func(cl Cluster) error {
		if err := mon(cl, cmd{"prefix": "osd pool application enable", "pool": pool, "app": app}, nil); err != nil {
			return fmt.Errorf("ceph: pool %q: enable application %s: %w", pool, app, err)
		}
		return nil
	}}
}

// planDelete removes a pool the manifest marked for deletion, after checking that it
// holds no RBD images (the trash included). mon_allow_pool_delete is turned on only
// for the call and put back as it was.
func planDelete(name string, cur *poolState) []action {
	if cur == nil {
		return nil
	}
	return []action{{
		summary: fmt.Sprintf("delete pool %s (marked for deletion)", name),
		do: func(cl Cluster) error {
			images, err := cl.RBDImages(name)
			if err != nil {
				return fmt.Errorf("ceph: delete pool %q: list RBD images: %w", name, err)
			}
			if len(images) > 0 {
				return driver.Permanent(fmt.Errorf("ceph: delete pool %q: refused: it holds %d RBD image(s) (%s); remove them, then retry the step",
					name, len(images), clipList(images, 5)))
			}
			return deletePool(cl, name)
		},
	}}
}

func deletePool(cl Cluster, name string) (err error) {
	const who, flag = "mon", "mon_allow_pool_delete"
	old, wasSet, err := configValue(cl, who, flag)
	if err != nil {
		return fmt.Errorf("ceph: delete pool %q: %w", name, err)
	}
	if !wasSet || old != "true" {
		if err := mon(cl, cmd{"prefix": "config set", "who": who, "name": flag, "value": "true"}, nil); err != nil {
			return fmt.Errorf("ceph: delete pool %q: set %s: %w", name, flag, err)
		}
		defer func() {
			restore := cmd{"prefix": "config rm", "who": who, "name": flag}
			if wasSet {
				restore = cmd{"prefix": "config set", "who": who, "name": flag, "value": old}
			}
			if rerr := mon(cl, restore, nil); rerr != nil {
				err = errors.Join(err, fmt.Errorf("ceph: restore %s: %w", flag, rerr))
			}
		}()
	}
	del := cmd{"prefix": "osd pool delete", "pool": name, "pool2": name, "yes_i_really_really_mean_it": true}
	// The monitors see the flag a moment after the config change commits.
	for attempt := 0; ; attempt++ {
		err = mon(cl, del, nil)
		if err == nil || isErrno(err, syscall.ENOENT) {
			return nil
		}
		if !isErrno(err, syscall.EPERM) || attempt >= 20 {
			return fmt.Errorf("ceph: delete pool %q: %w", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clipList(s []string, n int) string {
	out := ""
	for i, v := range s {
		if i == n {
			return out + fmt.Sprintf(", and %d more", len(s)-n)
		}
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}
