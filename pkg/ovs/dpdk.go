package ovs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/model"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// Bookkeeping in Open_vSwitch external_ids: which other_config keys Plinth set (so a
// key dropped from the manifest is removed, and nobody else's is), and a hash of
// the DPDK settings ovs-vswitchd is known to run with (so a restart interrupted by
// a crash is still done on the next run).
const (
	ownedKeysID = "plinth-other-config"
	appliedID   = "plinth-dpdk-applied"
)

// restartKeys are read by ovs-vswitchd only when DPDK initialises.
var restartKeys = []string{
	"dpdk-init", "dpdk-socket-mem", "dpdk-socket-limit", "dpdk-hugepage-dir",
	"dpdk-lcore-mask", "dpdk-extra", "vhost-sock-dir",
}

// DPDKDriver executes ovs.dpdk steps.
type DPDKDriver struct {
	db   *db
	opts options
}

var (
	_ driver.Driver    = (*DPDKDriver)(nil)
	_ driver.Outputter = (*DPDKDriver)(nil)
)

// Kind implements driver.Driver.
func (d *DPDKDriver) Kind() string { return ovsspec.KindDPDK }

// Diff implements driver.Driver: the other_config settings, then DPDK start-up
// (vswitchd initialises DPDK at run time the first time) or a restart.
func (d *DPDKDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in ovsspec.DPDKInputs
	if err := driver.DecodeInputs(ovsspec.KindDPDK, raw, &in); err != nil {
		return nil, err
	}
	topo, err := readTopology(d.opts.sysRoot)
	if err != nil {
		return nil, err
	}
	want, err := desiredConfig(in, topo)
	if err != nil {
		return nil, err
	}
	s, err := d.db.readRoot(ctx)
	if err != nil {
		return nil, err
	}
	root := s.root
	set, del := configDiff(root.OtherConfig, want, splitKeys(root.ExternalIDs[ownedKeysID]))
	ownedList := strings.Join(slices.Sorted(maps.Keys(want)), ",")
	hash := settingsHash(want)
	running := root.ExternalIDs[appliedID]
	restartChanged := slices.ContainsFunc(restartKeys, func(k string) bool { _, ok := set[k]; return ok || slices.Contains(del, k) })
	adopt := in.Enabled && root.DpdkInitialized && running == "" && !restartChanged
	needInit := in.Enabled && !root.DpdkInitialized
	needRestart := root.DpdkInitialized && running != hash && !adopt
	record := ""
	if !needInit && !needRestart && running != hash {
		record = hash // in effect as soon as the settings are written
	}

	var changes []driver.Change
	if len(set) > 0 || len(del) > 0 || ownedList != root.ExternalIDs[ownedKeysID] || record != "" {
		wait := d.opts.settle
		if needInit {
			wait = d.opts.dpdkWait // vswitchd initialises DPDK before it acknowledges
		}
		changes = append(changes, driver.Change{
			Summary: settingsSummary(root.OtherConfig, set, del, record),
			Apply: func(ctx context.Context) error {
				return d.writeSettings(ctx, s, set, del, ownedList, record, wait)
			},
		})
	}
	switch {
	case needInit:
		changes = append(changes, driver.Change{
			Summary: "initialise DPDK (ovs-vswitchd reads dpdk-init at run time; if that fails: " + d.opts.restart.Desc + ")",
			Apply:   func(ctx context.Context) error { return d.initDPDK(ctx, hash) },
		})
	case needRestart:
		why := "DPDK settings changed since ovs-vswitchd started"
		if restartChanged {
			var ks []string
			for _, k := range restartKeys {
				if _, ok := set[k]; ok || slices.Contains(del, k) {
					ks = append(ks, k)
				}
			}
			why = "DPDK reads " + strings.Join(ks, ", ") + " only at start"
		}
		changes = append(changes, driver.Change{
			Summary: fmt.Sprintf("restart ovs-vswitchd (%s): %s", d.opts.restart.Desc, why),
			Apply:   func(ctx context.Context) error { return d.restart(ctx, in.Enabled, hash) },
		})
	}
	return changes, nil
}

// desiredConfig renders the other_config keys Plinth manages.
func desiredConfig(in ovsspec.DPDKInputs, topo topology) (map[string]string, error) {
	if !in.Enabled {
		return map[string]string{"dpdk-init": "false"}, nil
	}
	w := map[string]string{"dpdk-init": "true"}
	var err error
	if len(in.SocketMemMB) > 0 {
		if w["dpdk-socket-mem"], err = topo.perNode("dpdk-socket-mem", in.SocketMemMB); err != nil {
			return nil, err
		}
	}
	if len(in.SocketLimitMB) > 0 {
		if w["dpdk-socket-limit"], err = topo.perNode("dpdk-socket-limit", in.SocketLimitMB); err != nil {
			return nil, err
		}
	}
	if in.LcoreCPUs != "" {
		cpus, err := topo.cpus("lcoreCPUs", in.LcoreCPUs)
		if err != nil {
			return nil, err
		}
		w["dpdk-lcore-mask"] = cpuMask(cpus)
	}
	if in.PMDCPUs != "" {
		cpus, err := topo.pmdCPUs(in)
		if err != nil {
			return nil, err
		}
		w["pmd-cpu-mask"] = cpuMask(cpus)
	}
	for k, v := range map[string]string{"dpdk-hugepage-dir": in.HugepageDir, "dpdk-extra": in.Extra, "vhost-sock-dir": in.VhostSockDir} {
		if v != "" {
			w[k] = v
		}
	}
	if in.PMDMaxSleepUs > 0 {
		w["pmd-maxsleep"] = strconv.Itoa(in.PMDMaxSleepUs)
	}
	return w, nil
}

// configDiff returns the keys to set and the owned keys no longer wanted.
func configDiff(cur, want map[string]string, owned []string) (map[string]string, []string) {
	set := map[string]string{}
	for k, v := range want {
		if c, ok := cur[k]; !ok || c != v {
			set[k] = v
		}
	}
	var del []string
	for _, k := range owned {
		if _, keep := want[k]; !keep {
			if _, ok := cur[k]; ok {
				del = append(del, k)
			}
		}
	}
	return set, del
}

func settingsSummary(cur, set map[string]string, del []string, record string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		p := k + "=" + set[k]
		if old, ok := cur[k]; ok {
			p += " (was " + old + ")"
		}
		parts = append(parts, p)
	}
	s := "other_config"
	if len(parts) > 0 {
		s += ": set " + strings.Join(parts, ", ")
	}
	if len(del) > 0 {
		s += "; remove " + strings.Join(del, ", ")
	}
	if len(parts) == 0 && len(del) == 0 {
		s += ": record what Plinth manages"
		if record != "" {
			s += " (DPDK settings in effect)"
		}
	}
	return s
}

// writeSettings changes other_config and Plinth's bookkeeping in one transaction.
// Map mutations (delete the keys, then insert them) leave everyone else's keys be.
func (d *DPDKDriver) writeSettings(ctx context.Context, s *dbView, set map[string]string, del []string, ownedList, record string, wait time.Duration) error {
	t, err := d.db.begin(ctx, s)
	if err != nil {
		return err
	}
	oc := func(r *model.OpenvSwitch) any { return &r.OtherConfig }
	ids := func(r *model.OpenvSwitch) any { return &r.ExternalIDs }
	if rm := append(slices.Sorted(maps.Keys(set)), del...); len(rm) > 0 {
		t.mutateRoot(oc, ovsdb.MutateOperationDelete, rm)
	}
	if len(set) > 0 {
		t.mutateRoot(oc, ovsdb.MutateOperationInsert, set)
	}
	newIDs := map[string]string{ownedKeysID: ownedList}
	if record != "" {
		newIDs[appliedID] = record
	}
	t.mutateRoot(ids, ovsdb.MutateOperationDelete, slices.Collect(maps.Keys(newIDs)))
	t.mutateRoot(ids, ovsdb.MutateOperationInsert, newIDs)
	return d.db.commit(ctx, t, "set other_config", wait)
}

// initDPDK waits for ovs-vswitchd to initialise DPDK by itself, restarting it once
// if it does not (a vswitchd that failed to initialise earlier never retries).
func (d *DPDKDriver) initDPDK(ctx context.Context, hash string) error {
	var root *model.OpenvSwitch
	_ = d.db.poll(ctx, min(d.opts.dpdkWait, d.opts.settle), func(s *dbView) bool {
		root = s.root
		return root.DpdkInitialized || strOr(root.DpdkVersion) == "none"
	})
	switch {
	case root != nil && strOr(root.DpdkVersion) == "none":
		return driver.Permanent(fmt.Errorf("ovs: dpdk_initialized=false%s", dpdkSupportHint(root)))
	case root == nil || !root.DpdkInitialized:
		d.opts.log.InfoContext(ctx, "ovs: DPDK did not initialise at run time; restarting ovs-vswitchd", "restart", d.opts.restart.Desc)
		return d.restart(ctx, true, hash)
	}
	return d.recordApplied(ctx, hash)
}

// restart restarts ovs-vswitchd and waits until the new process has read the
// database (a next_cfg round trip) and DPDK is in the wanted state.
func (d *DPDKDriver) restart(ctx context.Context, enabled bool, hash string) error {
	if err := d.opts.restart.Fn(ctx); err != nil {
		return fmt.Errorf("ovs: restart ovs-vswitchd (%s): %w", d.opts.restart.Desc, err)
	}
	d.db.Close()
	if err := d.db.sync(ctx, "wait for the restarted ovs-vswitchd", d.opts.dpdkWait); err != nil {
		return fmt.Errorf("%w%s", err, d.opts.logHint())
	}
	s, err := d.db.readRoot(ctx)
	if err != nil {
		return err
	}
	if s.root.DpdkInitialized != enabled {
		return fmt.Errorf("ovs: after restart dpdk_initialized=%t, want %t%s%s", s.root.DpdkInitialized, enabled, dpdkSupportHint(s.root), d.opts.logHint())
	}
	return d.recordApplied(ctx, hash)
}

func (d *DPDKDriver) recordApplied(ctx context.Context, hash string) error {
	s, err := d.db.readRoot(ctx)
	if err != nil {
		return err
	}
	t, err := d.db.begin(ctx, s)
	if err != nil {
		return err
	}
	ids := func(r *model.OpenvSwitch) any { return &r.ExternalIDs }
	t.mutateRoot(ids, ovsdb.MutateOperationDelete, []string{appliedID})
	t.mutateRoot(ids, ovsdb.MutateOperationInsert, map[string]string{appliedID: hash})
	return d.db.commit(ctx, t, "record the DPDK settings in effect", 0)
}

// Outputs implements driver.Outputter: it verifies DPDK is initialised and that the
// PMD threads, if any exist yet, run on the CPUs of pmd-cpu-mask.
func (d *DPDKDriver) Outputs(ctx context.Context, raw json.RawMessage) (map[string]string, error) {
	var in ovsspec.DPDKInputs
	if err := driver.DecodeInputs(ovsspec.KindDPDK, raw, &in); err != nil {
		return nil, err
	}
	s, err := d.db.readRoot(ctx)
	if err != nil {
		return nil, err
	}
	if s.root.DpdkInitialized != in.Enabled {
		return nil, fmt.Errorf("ovs: dpdk_initialized=%t, want %t%s%s", s.root.DpdkInitialized, in.Enabled, dpdkSupportHint(s.root), d.opts.logHint())
	}
	out := map[string]string{"dpdk_initialized": strconv.FormatBool(s.root.DpdkInitialized)}
	if v := s.root.DpdkVersion; v != nil && *v != "" {
		out["dpdk_version"] = *v
	}
	if in.Enabled {
		cores, err := d.opts.checkPMD(ctx, s.root.OtherConfig["pmd-cpu-mask"], nil)
		if err != nil {
			return nil, err
		}
		if cores != "" {
			out["pmd_cores"] = cores
		}
	}
	return out, nil
}

// settingsHash identifies the DPDK start-up settings.
func settingsHash(want map[string]string) string {
	h := sha256.New()
	for _, k := range restartKeys {
		fmt.Fprintf(h, "%s=%s\n", k, want[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func splitKeys(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func dpdkSupportHint(r *model.OpenvSwitch) string {
	if v := r.DpdkVersion; v == nil || *v == "" || *v == "none" {
		return " (this ovs-vswitchd has no DPDK support: install openvswitch-switch-dpdk and select it with update-alternatives --set ovs-vswitchd /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk)"
	}
	return ""
}
