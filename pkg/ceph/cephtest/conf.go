package cephtest

import (
	"fmt"
	"strings"
)

// unusedMgrModules are the manager modules a test cluster does not load: loading
// them costs ~15 s of CPU on two cores. The always-on modules (pg_autoscaler,
// rbd_support, devicehealth...) stay, or the cluster reports HEALTH_ERR.
var unusedMgrModules = []string{"alerts", "influx", "insights", "iostat", "localpool", "mirroring", "nfs",
	"osd_perf_query", "osd_support", "prometheus", "restful", "selftest", "snap_schedule", "stats",
	"telegraf", "test_orchestrator", "zabbix", "diskprediction_local", "dashboard", "cephadm", "rook", "k8sevents"}

// config renders ceph.conf. Pool deletion and size-1 pools are left at Ceph's
// defaults (refused) on purpose: the driver must turn them on itself.
func (c *Cluster) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, `[global]
fsid = %s
mon host = %s
public addr = %s
cluster addr = %s
ms bind port min = %d
ms bind port max = %d
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = %s/run
log file = %s/log/$name.log
pid file = %s/run/$name.pid
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
osd crush chooseleaf type = 0
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.05
mgr initial modules =
mgr disabled modules = %s

[client]
keyring = %s

[mon]
mon data = %s/mon

[mgr]
mgr data = %s/mgr

[osd]
osd data = %s/osd
osd objectstore = %s
bluestore block create = true
bluestore block size = 10737418240
bluestore fsck on mkfs = false
memstore device bytes = 2147483648
`, c.FSID, c.monHost(), c.IP, c.IP, c.Port+10, c.Port+99, c.Dir, c.Dir, c.Dir,
		strings.Join(unusedMgrModules, " "), c.Keyring, c.Dir, c.Dir, c.Dir, c.store)
	return b.String()
}

func (c *Cluster) monHost() string {
	return fmt.Sprintf("[v2:%s:%d,v1:%s:%d]", c.IP, c.Port, c.IP, c.Port+1)
}
