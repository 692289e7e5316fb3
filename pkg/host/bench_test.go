package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/vishvananda/netlink"
)

// BenchmarkNetwork50 configures 50 veth links (MTU, up, one address, one route each)
// with driver.Run (diff, apply, verify) and with one equivalent `ip -batch` script,
// then creates bridges the same two ways (benchBridges). Both start from the same
// reset state; only the configuring is timed.
func BenchmarkNetwork50(b *testing.B) {
	const links = 50
	if _, err := exec.LookPath("ip"); err != nil {
		b.Skip("needs iproute2's ip")
	}
	n := newNS(b)
	var in hostspec.NetworkInputs
	var apply, reset strings.Builder
	n.run(b, func() {
		for i := range links {
			p, q := fmt.Sprintf("p%d", i), fmt.Sprintf("q%d", i)
			addVeth(b, p, q, "")
			if err := netlink.LinkSetUp(link(b, q)); err != nil {
				b.Fatal(err)
			}
			addr, dst, gw := fmt.Sprintf("10.100.%d.1/24", i), fmt.Sprintf("10.200.%d.0/24", i), fmt.Sprintf("10.100.%d.2", i)
			in.Links = append(in.Links, hostspec.LinkSpec{Name: p, Up: true, MTU: 9000, Addresses: []string{addr}})
			in.Routes = append(in.Routes, hostspec.RouteSpec{Dst: dst, Gateway: gw})
			fmt.Fprintf(&apply, "link set %s mtu 9000 up\naddr add %s dev %s\nroute add %s via %s\n", p, addr, p, dst, gw)
			fmt.Fprintf(&reset, "link set %s down mtu 1500\naddr flush dev %s\n", p, p) // routes go with them
		}
	})
	dir := b.TempDir()
	applyFile, resetFile := filepath.Join(dir, "apply.batch"), filepath.Join(dir, "reset.batch")
	for f, s := range map[string]string{applyFile: apply.String(), resetFile: reset.String()} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ipBatch := func(b *testing.B, file string) {
		if out, err := exec.Command("ip", "-n", n.name, "-batch", file).CombinedOutput(); err != nil {
			b.Fatalf("ip -batch %s: %v: %s", filepath.Base(file), err, out)
		}
	}
	raw := mustJSON(b, in)

	b.Run("driver", func(b *testing.B) {
		stateDir := b.TempDir()
		d := NewNetworkDriver(stateDir)
		n.run(b, func() {
			for range b.N {
				b.StopTimer()
				ipBatch(b, resetFile)
				os.Remove(filepath.Join(stateDir, ownedFile))
				b.StartTimer()
				res := driver.Run(context.Background(), d, raw)
				if !res.OK() || len(res.Changes) != 4*links {
					b.Fatalf("run: %s, %d changes", res.Error, len(res.Changes))
				}
			}
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*links), "ns/link")
	})
	b.Run("ip-batch", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			ipBatch(b, resetFile)
			b.StartTimer()
			ipBatch(b, applyFile)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*links), "ns/link")
	})
	benchBridges(b, n)
}

// benchBridges creates bridges, each with a veth port and an address, with
// driver.Run and with one equivalent `ip -batch` script. Both start from no bridges
// and down ports; only the configuring is timed. Only ten: the kernel takes ~40 ms to
// delete a bridge, and the reset between runs would dominate the benchmark.
func benchBridges(b *testing.B, n *testNS) {
	const bridges = 10
	var in hostspec.NetworkInputs
	var apply, reset strings.Builder
	n.run(b, func() {
		for i := range bridges {
			p, q, br := fmt.Sprintf("r%d", i), fmt.Sprintf("s%d", i), fmt.Sprintf("br%d", i)
			addVeth(b, p, q, "")
			if err := netlink.LinkSetUp(link(b, q)); err != nil {
				b.Fatal(err)
			}
			addr := fmt.Sprintf("10.150.%d.1/24", i)
			in.Links = append(in.Links, hostspec.LinkSpec{Name: p, Up: true, Master: br},
				hostspec.LinkSpec{Name: br, Kind: hostspec.LinkBridge, Up: true, Addresses: []string{addr}})
			fmt.Fprintf(&apply, "link add %s type bridge\nlink set %s master %s up\nlink set %s up\naddr add %s dev %s\n", br, p, br, br, addr, br)
			fmt.Fprintf(&reset, "link del %s\nlink set %s down\n", br, p)
		}
	})
	dir := b.TempDir()
	applyFile, resetFile := filepath.Join(dir, "bridges.batch"), filepath.Join(dir, "unbridge.batch")
	for f, s := range map[string]string{applyFile: apply.String(), resetFile: reset.String()} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ipBatch := func(b *testing.B, file string) {
		if out, err := exec.Command("ip", "-n", n.name, "-batch", file).CombinedOutput(); err != nil {
			b.Fatalf("ip -batch %s: %v: %s", filepath.Base(file), err, out)
		}
	}
	raw := mustJSON(b, in)
	b.Run("driver-bridges", func(b *testing.B) {
		stateDir := b.TempDir()
		d := NewNetworkDriver(stateDir)
		n.run(b, func() {
			for i := range b.N {
				b.StopTimer()
				if i > 0 {
					ipBatch(b, resetFile)
				}
				os.Remove(filepath.Join(stateDir, ownedFile))
				b.StartTimer()
				res := driver.Run(context.Background(), d, raw)
				if !res.OK() || len(res.Changes) != 5*bridges {
					b.Fatalf("run: %s, %d changes", res.Error, len(res.Changes))
				}
			}
			b.StopTimer()
			ipBatch(b, resetFile)
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bridges), "ns/bridge")
	})
	b.Run("ip-batch-bridges", func(b *testing.B) {
		for i := range b.N {
			b.StopTimer()
			if i > 0 {
				ipBatch(b, resetFile)
			}
			b.StartTimer()
			ipBatch(b, applyFile)
		}
		b.StopTimer()
		ipBatch(b, resetFile)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bridges), "ns/bridge")
	})
}
