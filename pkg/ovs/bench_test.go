package ovs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// BenchmarkHostConfig applies a full DPDK host configuration (DPDK and PMD settings,
// two bridges, four ports of which two form a bond) with the driver and with the
// equivalent ovs-vsctl calls, against the same DPDK ovs-vswitchd, from the same
// starting state, and reports both and their ratio. Both wait for ovs-vswitchd to
// apply each change. DPDK is initialised once up front: no restarts are timed.
//
//	go test -run '^$' -bench HostConfig -benchtime 10x ./pkg/ovs/
func BenchmarkHostConfig(b *testing.B) {
	e := startOVS(b, true)
	huge := e.hugepages(300)
	dp, br := New(e.options()...)
	dpdkIn := ovsspec.DPDKInputs{Enabled: true, SocketMemMB: []int{256}, SocketLimitMB: []int{512}, HugepageDir: huge,
		LcoreCPUs: "0", PMDCPUs: "1", PMDMaxSleepUs: 10000, Extra: "--in-memory --no-pci --no-telemetry"}
	null := func(n int) string { return fmt.Sprintf("net_null%d,no-rx=1", n) }
	bridges := ovsspec.BridgesInputs{Bridges: []ovsspec.Bridge{
		{Name: "br-phy", Datapath: "netdev", Ports: []ovsspec.Port{
			dpdkPort("p0", null(0)), dpdkPort("p1", null(1)),
			{Name: "bond0", BondMode: "balance-slb", Interfaces: []ovsspec.Interface{dpdkIface("p2", null(2)), dpdkIface("p3", null(3))}},
		}},
		{Name: "br-int", Datapath: "netdev", Ports: []ovsspec.Port{{Name: "int0", Interfaces: []ovsspec.Interface{{Name: "int0", Type: ovsspec.TypeInternal}}}}},
	}}
	runOK(b, dp, dpdkIn) // DPDK up once, and a first round to warm up (mempools)
	runOK(b, br, bridges)
	keys := []string{"pmd-cpu-mask", "pmd-maxsleep"}
	reset := func() {
		e.vsctl("--if-exists", "del-br", "br-phy", "--", "--if-exists", "del-br", "br-int",
			"--", "remove", "Open_vSwitch", ".", "other_config", keys[0], keys[1],
			"--", "remove", "Open_vSwitch", ".", "external_ids", ownedKeysID)
	}
	vsctl := [][]string{
		{"set", "Open_vSwitch", ".", "other_config:dpdk-init=true", "other_config:dpdk-socket-mem=256",
			"other_config:dpdk-socket-limit=512", "other_config:dpdk-hugepage-dir=" + huge, "other_config:dpdk-lcore-mask=0x1",
			"other_config:pmd-cpu-mask=0x2", "other_config:pmd-maxsleep=10000", "other_config:dpdk-extra=--in-memory --no-pci --no-telemetry"},
		{"add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev"},
		{"add-port", "br-phy", "p0", "--", "set", "Interface", "p0", "type=dpdk", "options:dpdk-devargs=" + null(0)},
		{"add-port", "br-phy", "p1", "--", "set", "Interface", "p1", "type=dpdk", "options:dpdk-devargs=" + null(1)},
		{"add-bond", "br-phy", "bond0", "p2", "p3", "bond_mode=balance-slb",
			"--", "set", "Interface", "p2", "type=dpdk", "options:dpdk-devargs=" + null(2),
			"--", "set", "Interface", "p3", "type=dpdk", "options:dpdk-devargs=" + null(3)},
		{"add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev"},
		{"add-port", "br-int", "int0", "--", "set", "Interface", "int0", "type=internal"},
	}
	ctx := context.Background()
	reset()
	// The same changes as one ovs-vsctl transaction: what ovs-vswitchd itself needs
	// to apply them in one reconfiguration, the floor for any client.
	var oneTxn []string
	for i, args := range vsctl {
		if i > 0 {
			oneTxn = append(oneTxn, "--")
		}
		oneTxn = append(oneTxn, args...)
	}
	var tDriver, tVsctl, tOne time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		reset()
		b.StartTimer()
		start := time.Now()
		for _, step := range []struct {
			d  driver.Driver
			in any
		}{{dp, dpdkIn}, {br, bridges}} {
			if res := driver.Run(ctx, step.d, mustJSON(b, step.in)); !res.OK() {
				b.Fatalf("%s: %s", step.d.Kind(), res.Error)
			}
		}
		tDriver += time.Since(start)

		b.StopTimer()
		reset()
		b.StartTimer()
		start = time.Now()
		for _, args := range vsctl {
			e.vsctl(args...)
		}
		tVsctl += time.Since(start)

		b.StopTimer()
		reset()
		b.StartTimer()
		start = time.Now()
		e.vsctl(oneTxn...)
		tOne += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(tDriver.Milliseconds())/n, "driver-ms/op")
	b.ReportMetric(float64(tVsctl.Milliseconds())/n, "vsctl-ms/op")
	b.ReportMetric(float64(tOne.Milliseconds())/n, "vsctl-one-txn-ms/op")
	b.ReportMetric(tDriver.Seconds()/tVsctl.Seconds(), "driver/vsctl")
	b.Logf("driver %.1f ms, ovs-vsctl %.1f ms per host configuration: ratio %.2f; the same as one ovs-vsctl transaction %.1f ms (driver/one %.2f)",
		float64(tDriver.Microseconds())/n/1000, float64(tVsctl.Microseconds())/n/1000, tDriver.Seconds()/tVsctl.Seconds(),
		float64(tOne.Microseconds())/n/1000, tDriver.Seconds()/tOne.Seconds())
}
