package ovs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// fakeSys writes a /sys CPU topology: node -> cpulist.
func fakeSys(t *testing.T, online string, nodes map[int]string) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		p = filepath.Join(root, "sys/devices/system", p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu/online", online)
	for n, cpus := range nodes {
		write("node/node"+string(rune('0'+n))+"/cpulist", cpus)
	}
	return root
}

func TestDesiredConfig(t *testing.T) {
	twoNodes := fakeSys(t, "0-7", map[int]string{0: "0-3", 1: "4-7"})
	topo, err := readTopology(twoNodes)
	if err != nil {
		t.Fatal(err)
	}
	in := ovsspec.DPDKInputs{Enabled: true, SocketMemMB: []int{1024, 1024}, SocketLimitMB: []int{0, 4096},
		LcoreCPUs: "0", PMDCPUs: "2,3,6,7", PMDPerNUMA: 1, PMDMaxSleepUs: 50, Extra: "-a 0000:03:00.0"}
	want := map[string]string{
		"dpdk-init": "true", "dpdk-socket-mem": "1024,1024", "dpdk-socket-limit": "0,4096", "dpdk-lcore-mask": "0x1",
		"pmd-cpu-mask": "0x44", "pmd-maxsleep": "50", "dpdk-extra": "-a 0000:03:00.0",
	}
	got, err := desiredConfig(in, topo)
	if err != nil || !mapsEqual(got, want) {
		t.Fatalf("desiredConfig = %v, %v; want %v", got, err, want)
	}

	bad := []struct {
		name string
		in   ovsspec.DPDKInputs
		msg  string
	}{
		{"one socket-mem value on two nodes", ovsspec.DPDKInputs{Enabled: true, SocketMemMB: []int{2048}},
			"dpdk-socket-mem has 1 value(s) (2048) but this host has 2 NUMA node(s): give one value per node"},
		{"offline CPU", ovsspec.DPDKInputs{Enabled: true, PMDCPUs: "8"}, "pmdCPUs 8: CPU 8 is not online on this host (online: 0-7)"},
		{"node with memory but no PMD", ovsspec.DPDKInputs{Enabled: true, SocketMemMB: []int{1024, 1024}, PMDCPUs: "2-3"},
			"NUMA node 1 has dpdk-socket-mem but none of pmdCPUs 2-3 is on it (node 1 has CPUs 4-7)"},
	}
	for _, tt := range bad {
		_, err := desiredConfig(tt.in, topo)
		if err == nil || !strings.Contains(err.Error(), tt.msg) || !driver.IsPermanent(err) {
			t.Errorf("%s: %v, want permanent %q", tt.name, err, tt.msg)
		}
	}
	if got, _ := desiredConfig(ovsspec.DPDKInputs{}, topo); !mapsEqual(got, map[string]string{"dpdk-init": "false"}) {
		t.Errorf("disabled: %v", got)
	}
}

// TestDiffRefusesSizingBugFirst: the per-NUMA check needs no OVS at all.
func TestDiffRefusesSizingBugFirst(t *testing.T) {
	root := fakeSys(t, "0-3", map[int]string{0: "0-1", 1: "2-3"})
	dp, _ := New(WithEndpoint("unix:/nonexistent/db.sock"), WithSysRoot(root))
	res := driver.Run(context.Background(), dp, mustJSON(t, ovsspec.DPDKInputs{Enabled: true, SocketMemMB: []int{1024}}))
	if res.OK() || res.Retryable || !strings.Contains(res.Error, "this host has 2 NUMA node(s)") {
		t.Fatalf("%+v", res)
	}
}

func TestConfigDiff(t *testing.T) {
	cur := map[string]string{"dpdk-init": "true", "pmd-maxsleep": "10", "theirs": "x", "dpdk-extra": "-v"}
	set, del := configDiff(cur, map[string]string{"dpdk-init": "true", "pmd-cpu-mask": "0x2"}, []string{"pmd-maxsleep", "dpdk-init", "gone"})
	if !mapsEqual(set, map[string]string{"pmd-cpu-mask": "0x2"}) || !slices.Equal(del, []string{"pmd-maxsleep"}) {
		t.Errorf("set %v del %v: only owned keys go, others' stay", set, del)
	}
}

func TestParsePMDRxqShow(t *testing.T) {
	out := `Displaying last 60 seconds pmd usage %
pmd thread numa_id 0 core_id 1:
  isolated : false
  port: n0                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  port: n0                queue-id:  1 (enabled)   pmd usage: NOT AVAIL
  port: px                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  overhead: NOT AVAIL
pmd thread numa_id 1 core_id 9:
  isolated : false
`
	ts, err := parsePMDRxqShow([]byte(out))
	if err != nil || len(ts) != 2 || ts[0].Core != 1 || !slices.Equal(ts[0].Ports, []string{"n0", "px"}) || ts[1].NUMA != 1 || ts[1].Core != 9 {
		t.Fatalf("%+v %v", ts, err)
	}
}

func TestCPUMasks(t *testing.T) {
	for _, c := range []struct {
		cpus []int
		mask string
		list string
	}{{[]int{0}, "0x1", "0"}, {[]int{1, 2, 3, 8}, "0x10e", "1-3,8"}, {[]int{64, 65}, "0x30000000000000000", "64-65"}} {
		if got := cpuMask(c.cpus); got != c.mask {
			t.Errorf("cpuMask(%v) = %s, want %s", c.cpus, got, c.mask)
		}
		if got, ok := maskCPUs(c.mask); !ok || !slices.Equal(got, c.cpus) {
			t.Errorf("maskCPUs(%s) = %v", c.mask, got)
		}
		if got := cpuList(c.cpus); got != c.list {
			t.Errorf("cpuList(%v) = %s", c.cpus, got)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
