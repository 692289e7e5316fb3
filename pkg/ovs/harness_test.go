package ovs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/runpid"
)

// ovsEnv is a real ovsdb-server and ovs-vswitchd (plain or DPDK build) in a
// network namespace, with every OVS path under a temp dir (OVS_RUNDIR & co).
type ovsEnv struct {
	t      testing.TB
	dir    string
	ns     string
	dpdk   bool
	db, vs *exec.Cmd
	vsBin  string
}

const dpdkVswitchd = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"

// needOVS skips the test unless it runs as root with the OVS tools installed.
func needOVS(t testing.TB, dpdk bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: starts ovsdb-server and ovs-vswitchd in a network namespace")
	}
	tools := []string{"ip", "ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-appctl"}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: scripts/install-deps.sh installs openvswitch-switch", tool)
		}
	}
	if _, err := os.Stat("/usr/lib/openvswitch-switch/ovs-vswitchd"); err != nil {
		t.Skip("needs ovs-vswitchd: scripts/install-deps.sh installs openvswitch-switch")
	}
	if !dpdk {
		return
	}
	if _, err := os.Stat(dpdkVswitchd); err != nil {
		t.Skip("needs the DPDK ovs-vswitchd: scripts/install-deps.sh installs openvswitch-switch-dpdk")
	}
	for _, pmd := range []string{"librte_net_null.so.23", "librte_net_af_packet.so.23", "librte_mempool_ring.so.23"} {
		if m, _ := filepath.Glob("/usr/lib/*/dpdk/pmds-*/" + pmd); len(m) == 0 {
			t.Skipf("needs DPDK's %s: scripts/install-deps.sh installs it", pmd)
		}
	}
	if _, err := os.Stat("/proc/sys/vm/nr_hugepages"); err != nil {
		t.Skip("needs 2 MiB hugepages (/proc/sys/vm/nr_hugepages)")
	}
}

// startOVS starts the daemons; Cleanup stops them and undoes everything.
func startOVS(t testing.TB, dpdk bool) *ovsEnv {
	t.Helper()
	needOVS(t, dpdk)
	dir, err := os.MkdirTemp("", "plovs") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	e := &ovsEnv{t: t, dir: dir, ns: fmt.Sprintf("plovs%d", rand.IntN(1e6)), dpdk: dpdk}
	t.Cleanup(e.stop)
	e.ip("netns", "add", e.ns)
	e.ip("-n", e.ns, "link", "set", "lo", "up")
	e.must("ovsdb-tool", "create", filepath.Join(dir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	e.db = e.daemon("ovsdb-server", filepath.Join(dir, "conf.db"), "--remote=punix:"+filepath.Join(dir, "db.sock"),
		"--pidfile", "--log-file", "--no-chdir")
	e.waitFile("db.sock")
	e.must("ovs-vsctl", "--no-wait", "init")
	// The daemon's program name names its pidfile and control socket; run the DPDK
	// build as "ovs-vswitchd" (as Debian's alternatives do) so defaults apply.
	e.vsBin = "/usr/lib/openvswitch-switch/ovs-vswitchd"
	if dpdk {
		e.vsBin = filepath.Join(dir, "bin", "ovs-vswitchd")
		if err := os.MkdirAll(filepath.Dir(e.vsBin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dpdkVswitchd, e.vsBin); err != nil {
			t.Fatal(err)
		}
	}
	e.startVswitchd()
	return e
}

// env is the environment every OVS command of the harness runs with.
func (e *ovsEnv) env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+e.dir, "OVS_LOGDIR="+e.dir, "OVS_DBDIR="+e.dir)
}

func (e *ovsEnv) daemon(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", e.ns, bin}, args...)...)
	cmd.Env = e.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", bin, err)
	}
	return cmd
}

func (e *ovsEnv) startVswitchd() {
	_ = os.Remove(filepath.Join(e.dir, "ovs-vswitchd.pid"))
	e.vs = e.daemon(e.vsBin, "unix:"+filepath.Join(e.dir, "db.sock"), "--pidfile", "--log-file", "--no-chdir")
	e.waitFile("ovs-vswitchd.pid")
}

// stopVswitchd asks ovs-vswitchd to exit and waits for it.
func (e *ovsEnv) stopVswitchd() {
	if e.vs == nil {
		return
	}
	_, _ = e.run("ovs-appctl", "-t", "ovs-vswitchd", "exit")
	done := make(chan struct{})
	go func() { _ = e.vs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = e.vs.Process.Kill()
		<-done
	}
	e.vs = nil
}

// restarter is what the harness gives the driver instead of systemctl.
func (e *ovsEnv) restarter() Restarter {
	return Restarter{Desc: "test harness restart", Fn: func(context.Context) error {
		e.stopVswitchd()
		e.startVswitchd()
		return nil
	}}
}

func (e *ovsEnv) options(extra ...Option) []Option {
	return append([]Option{WithRunDir(e.dir), WithLogFile(filepath.Join(e.dir, "ovs-vswitchd.log")),
		WithRestart(e.restarter()), WithTimeouts(15*time.Second, 30*time.Second, 5*time.Second)}, extra...)
}

func (e *ovsEnv) stop() {
	e.stopVswitchd()
	if e.db != nil {
		_, _ = e.run("ovs-appctl", "-t", "ovsdb-server", "exit")
		_ = e.db.Wait()
	}
	_ = exec.Command("ip", "netns", "del", e.ns).Run()
	if os.Getenv("PLINTH_KEEP_OVS") == "" {
		_ = os.RemoveAll(e.dir)
	}
}

func (e *ovsEnv) waitFile(name string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(e.dir, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(e.dir, strings.TrimSuffix(name, ".pid")+".log"))
			e.t.Fatalf("%s did not appear in %s\n%s", name, e.dir, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *ovsEnv) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = e.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (e *ovsEnv) must(name string, args ...string) string {
	e.t.Helper()
	out, err := e.run(name, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *ovsEnv) vsctl(args ...string) string {
	e.t.Helper()
	return strings.TrimSpace(e.must("ovs-vsctl", append([]string{"--timeout=10"}, args...)...))
}

func (e *ovsEnv) ip(args ...string) {
	e.t.Helper()
	e.must("ip", args...)
}

// peerNS creates namespace name with a veth to the OVS namespace: inside, "eth0"
// with addr; in the OVS namespace, link ovsEnd (up).
func (e *ovsEnv) peerNS(name, ovsEnd, addr string) string {
	e.t.Helper()
	ns := e.ns + name
	e.ip("netns", "add", ns)
	e.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	e.ip("-n", e.ns, "link", "add", ovsEnd, "type", "veth", "peer", "name", "eth0", "netns", ns)
	e.ip("-n", e.ns, "link", "set", ovsEnd, "up")
	e.ip("-n", ns, "addr", "add", addr, "dev", "eth0")
	e.ip("-n", ns, "link", "set", "eth0", "up")
	e.ip("-n", ns, "link", "set", "lo", "up")
	return ns
}

// ping reports whether ns reaches addr within a few tries.
func ping(ns, addr string) error {
	out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-c", "2", "-i", "0.2", "-W", "1", addr).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from %s: %v: %s", addr, ns, err, out)
	}
	return nil
}

// hugepageLedger holds a file per reservation a test process made, named for its
// pid: a killed run cannot give its pages back, so the next one does. It is in /run,
// which a reboot clears along with the reservations.
const hugepageLedger = "/run/plinth-test-hugepages"

// returnEndedRunsHugepages lowers nr_hugepages by the pages that runs which have
// ended reserved and left behind.
func returnEndedRunsHugepages(t testing.TB) {
	t.Helper()
	const nr = "/proc/sys/vm/nr_hugepages"
	if err := os.MkdirAll(hugepageLedger, 0o755); err != nil {
		t.Fatalf("hugepage ledger: %v", err)
	}
	entries, err := os.ReadDir(hugepageLedger)
	if err != nil {
		t.Fatalf("hugepage ledger: %v", err)
	}
	for _, en := range entries {
		pid, ended := runpid.Ended(en.Name(), "")
		if !ended {
			continue
		}
		p := filepath.Join(hugepageLedger, en.Name())
		b, err := os.ReadFile(p)
		n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil || n <= 0 {
			_ = os.Remove(p)
			continue
		}
		cur, err := os.ReadFile(nr)
		if err != nil {
			t.Fatal(err)
		}
		have, _ := strconv.Atoi(strings.TrimSpace(string(cur)))
		if err := os.WriteFile(nr, []byte(strconv.Itoa(max(have-n, 0))), 0o644); err != nil {
			t.Fatalf("give back %d hugepages of ended run %d: %v", n, pid, err)
		}
		t.Logf("gave back %d hugepages that run %d reserved and left behind", n, pid)
		_ = os.Remove(p)
	}
}

// hugepages reserves n more 2 MiB pages and mounts hugetlbfs under the env's dir;
// Cleanup unmounts, restores nr_hugepages exactly and removes DPDK's /var/run/dpdk
// runtime dir if it did not exist before.
func (e *ovsEnv) hugepages(n int) string {
	e.t.Helper()
	const nr = "/proc/sys/vm/nr_hugepages"
	returnEndedRunsHugepages(e.t)
	b, err := os.ReadFile(nr)
	if err != nil {
		e.t.Fatal(err)
	}
	prev, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	ledger, err := os.CreateTemp(hugepageLedger, fmt.Sprintf("%d-*", os.Getpid()))
	if err == nil {
		_, err = fmt.Fprint(ledger, n)
		ledger.Close()
	}
	if err != nil {
		e.t.Fatalf("hugepage ledger: %v", err)
	}
	_, statErr := os.Stat("/var/run/dpdk")
	hadDPDKDir := statErr == nil
	mnt := filepath.Join(e.dir, "hugepages")
	e.t.Cleanup(func() {
		// Runs before stop (Cleanup is LIFO): stop vswitchd first so pages are free.
		e.stopVswitchd()
		_ = syscall.Unmount(mnt, 0)
		if err := os.WriteFile(nr, []byte(strconv.Itoa(prev)), 0o644); err != nil {
			e.t.Errorf("restore nr_hugepages=%d: %v", prev, err)
		} else {
			_ = os.Remove(ledger.Name())
		}
		if !hadDPDKDir {
			_ = os.RemoveAll("/var/run/dpdk")
		}
	})
	if err := os.WriteFile(nr, []byte(strconv.Itoa(prev+n)), 0o644); err != nil {
		e.t.Fatalf("reserve hugepages: %v", err)
	}
	b, _ = os.ReadFile(nr)
	if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got < prev+n {
		e.t.Skipf("the kernel gave %d of %d hugepages (memory fragmented?)", got-prev, n)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := syscall.Mount("nodev", mnt, "hugetlbfs", 0, "pagesize=2M"); err != nil {
		e.t.Fatalf("mount hugetlbfs: %v", err)
	}
	return mnt
}
