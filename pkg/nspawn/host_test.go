package nspawn

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/runpid"
	"github.com/plinth-dev/plinth/pkg/nspawn/machinestate"
)

// testLab is a bridge with hosts on it, removed at the end of the test.
type testLab struct {
	t      *testing.T
	prefix string
	dir    string
	subnet string // e.g. 10.253.7
	rootfs string
	runc   string
	hosts  map[string]*Host
	nets   map[string]NetNS
}

func newTestLab(t *testing.T, subnet string) *testLab {
	rootfs := labRootfs(t)
	reapEndedTestLabs(t)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", testLabDirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // after down (cleanups run last first)
	l := &testLab{t: t, prefix: testLabPrefix(os.Getpid()), dir: dir, subnet: subnet,
		rootfs: rootfs, hosts: map[string]*Host{}, nets: map[string]NetNS{}}
	l.runc = filepath.Join(l.dir, "runc-lab")
	if out, err := exec.Command("go", "build", "-o", l.runc, "../../cmd/runc-lab").CombinedOutput(); err != nil {
		t.Fatalf("build runc-lab: %v: %s", err, out)
	}
	ctx := context.Background()
	if err := CreateBridge(ctx, l.prefix+"br", subnet+".1/24"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.down() })
	return l
}

func (l *testLab) boot(name string, ip int) *Host {
	l.t.Helper()
	ctx := context.Background()
	n := NetNS{Name: l.prefix + "-" + name, Bridge: l.prefix + "br", HostLink: l.prefix + name, Addr: fmt.Sprintf("%s.%d/24", l.subnet, ip)}
	if err := CreateNetNS(ctx, n); err != nil {
		l.t.Fatal(err)
	}
	l.nets[name] = n
	begin := time.Now()
	h, err := Boot(ctx, HostConfig{
		Name: l.prefix + "-" + name, Hostname: name, MachineDir: filepath.Join(l.dir, "machines", name), Rootfs: l.rootfs, NetNS: n.Path(),
		Hosts:       []string{l.subnet + ".11 h1", l.subnet + ".12 h2"},
		Nameservers: []string{l.subnet + ".1"},
		CgroupGroup: l.prefix, Profile: LabProfile(), RuncWrapper: l.runc,
	})
	if h != nil {
		l.hosts[name] = h
	}
	if err != nil {
		l.t.Fatalf("boot %s: %v", name, err)
	}
	l.t.Logf("FIGURE host %s boot to running: %.2fs", name, time.Since(begin).Seconds())
	return h
}

// testLabDirPrefix starts a test lab's directory name, then the test process's pid.
const testLabDirPrefix = "plinth-nspawn-test-"

// testLabPrefix names the links and namespaces of pid's test labs.
func testLabPrefix(pid int) string { return fmt.Sprintf("pns%d", pid) }

// reapEndedTestLabs removes what killed test runs left: their booted hosts (mounts,
// cgroups), namespaces, links and directories. Booted hosts outlive their test by
// design (their own session), and a run killed mid-test never reaches down.
func reapEndedTestLabs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), testLabDirPrefix+"*"))
	for _, dir := range dirs {
		pid, ended := runpid.Ended(filepath.Base(dir), testLabDirPrefix)
		if !ended {
			continue
		}
		machines, _ := filepath.Glob(filepath.Join(dir, "machines", "*"))
		for _, md := range machines {
			if h, err := Load(md); err == nil {
				_ = h.PowerLoss()
				if err := h.Remove(ctx); err != nil {
					t.Logf("remove host %s of ended run %d: %v", md, pid, err)
				}
			}
		}
		prefix := testLabPrefix(pid)
		nss, _ := os.ReadDir("/run/netns")
		for _, e := range nss {
			if strings.HasPrefix(e.Name(), prefix+"-") {
				_ = DeleteNetNS(ctx, NetNS{Name: e.Name()})
			}
		}
		ifs, _ := net.Interfaces()
		for _, i := range ifs {
			if rest, ok := strings.CutPrefix(i.Name, prefix); ok && (rest == "" || rest[0] < '0' || rest[0] > '9') {
				_ = DeleteLink(ctx, i.Name)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove %s of ended run %d: %v", dir, pid, err)
			continue
		}
		t.Logf("took down %s, a test lab of run %d, which has ended", dir, pid)
	}
}

func (l *testLab) down() {
	ctx := context.Background()
	for name, h := range l.hosts {
		if err := h.Remove(ctx); err != nil {
			l.t.Errorf("remove %s: %v", name, err)
		}
	}
	for _, n := range l.nets {
		if err := DeleteNetNS(ctx, n); err != nil {
			l.t.Error(err)
		}
	}
	if err := DeleteLink(ctx, l.prefix+"br"); err != nil {
		l.t.Error(err)
	}
}

func run(t *testing.T, h *Host, argv ...string) string {
	t.Helper()
	out, err := h.Exec(context.Background(), nil, argv...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// pidNSProcs are the machine's pids of every process in the pid namespace of pid.
func pidNSProcs(t *testing.T, pid int) []int {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	return pidsInNS(ns)
}

func pidsInNS(ns string) []int { return pidsInNamespace(ns) }

func TestHostsBootNetworkPoweroffPowerLossRemove(t *testing.T) {
	needRoot(t)
	labRootfs(t) // build before the snapshot: the cache is meant to stay
	before, err := machinestate.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLab(t, "10.253.7")
	ctx := context.Background()
	h1 := l.boot("h1", 11)
	h2 := l.boot("h2", 12)

	if got := run(t, h1, "systemctl", "is-system-running"); got != "running" {
		t.Errorf("h1 is %q", got)
	}
	run(t, h1, "ping", "-c1", "-W2", "h2")
	run(t, h2, "ping", "-c1", "-W2", l.subnet+".11")
	for _, h := range []*Host{h1, h2} {
		if got := run(t, h, "systemctl", "is-active", "containerd", "plinth-lab-prep"); got != "active\nactive" {
			t.Errorf("%s: containerd, plinth-lab-prep: %q", h.Name(), got)
		}
		if got := run(t, h, "hostname"); got != h.Config().Hostname {
			t.Errorf("hostname %q, want %s", got, h.Config().Hostname)
		}
	}
	// the lab profile: kubelet's sysctls shown inside, the machine's unchanged
	if got := run(t, h1, "cat", "/proc/sys/vm/overcommit_memory", "/proc/sys/kernel/panic", "/proc/sys/kernel/panic_on_oops"); got != "1\n10\n1" {
		t.Errorf("profile sysctls inside: %q", got)
	}
	run(t, h1, "sh", "-c", "mkdir /sys/fs/cgroup/memory/plinth-test && rmdir /sys/fs/cgroup/memory/plinth-test")
	if got := run(t, h1, "test", "-x", RuncWrapperPath, "-a", "-d", "/var/lib/containerd"); got != "" {
		t.Error(got)
	}

	// every process of a host, including one started with Exec, is in its own cgroups
	run(t, h1, "sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 &")
	run(t, h1, "systemd-run", "--unit=plinth-test-sleep", "sleep", "600")
	leader, _ := h1.Leader()
	for _, dir := range h1.Cgroups() {
		in, err := cgroupPids(dir)
		if err != nil {
			t.Fatal(err)
		}
		set := map[int]bool{}
		for _, p := range in {
			set[p] = true
		}
		procs := pidNSProcs(t, leader)
		if len(procs) < 5 {
			t.Fatalf("h1 has only %d processes", len(procs))
		}
		for _, p := range procs {
			if !set[p] {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
				t.Errorf("h1 process %d (%s) is not in %s", p, strings.TrimSpace(string(comm)), dir)
			}
		}
	}
	for _, h := range []*Host{h1, h2} {
		if mem, err := h.MemoryUsage(); err == nil {
			t.Logf("FIGURE host %s idle memory cgroup usage: %.1f MiB (page cache included); %s", h.Name(), float64(mem)/(1<<20), memStat(h))
		}
	}

	// poweroff and start again: the disk (upper dir and plain dirs) is kept
	run(t, h1, "sh", "-c", "echo kept > /root/marker && echo kept > /var/lib/containerd/marker && sync")
	ns0 := mustNS(t, leader)
	begin := time.Now()
	if err := h1.Poweroff(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE host h1 poweroff: %.2fs", time.Since(begin).Seconds())
	if h1.Running() {
		t.Fatal("h1 still running after poweroff")
	}
	if mps, _ := MountPoints(h1.Config().MachineDir); len(mps) != 0 {
		t.Errorf("mounted after poweroff: %v", mps)
	}
	if len(pidsInNS(ns0)) != 0 {
		t.Error("h1 processes left after poweroff")
	}
	begin = time.Now()
	if err := h1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE host h1 start again to running: %.2fs", time.Since(begin).Seconds())
	if got := run(t, h1, "cat", "/root/marker", "/var/lib/containerd/marker"); got != "kept\nkept" {
		t.Errorf("after restart: %q", got)
	}
	run(t, h1, "ping", "-c1", "-W2", "h2")

	// power loss: everything of h2 dies at once
	leader2, _ := h2.Leader()
	ns2 := mustNS(t, leader2)
	pids, _ := h2.Pids()
	if err := h2.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	if left := pidsInNS(ns2); len(left) != 0 || h2.Running() {
		t.Errorf("after power loss: running=%v, processes %v", h2.Running(), left)
	}
	for _, p := range pids {
		if _, err := procStart(p); err == nil {
			t.Errorf("process %d of h2 survived the power loss", p)
		}
	}
	// and it boots again, as a machine does when power returns
	begin = time.Now()
	if err := h2.Start(ctx); err != nil {
		t.Fatalf("start after power loss: %v", err)
	}
	t.Logf("FIGURE host h2 start after power loss to running: %.2fs", time.Since(begin).Seconds())
	run(t, h2, "true")

	// a later process finds h1 by its record and removes it
	loaded, err := Load(h1.Config().MachineDir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Running() {
		t.Fatal("loaded h1 should be running")
	}
	if got, err := loaded.Exec(ctx, strings.NewReader("from stdin"), "cat"); err != nil || string(got) != "from stdin" {
		t.Errorf("exec through the record: %q %v", got, err)
	}
	leader, _ = loaded.Leader()
	ns1 := mustNS(t, leader)
	begin = time.Now()
	if err := loaded.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE host h1 remove (poweroff, unmount, cgroups, dir): %.2fs", time.Since(begin).Seconds())
	delete(l.hosts, "h1")
	if _, err := os.Stat(h1.Config().MachineDir); !os.IsNotExist(err) {
		t.Errorf("machine dir left: %v", err)
	}
	l.down()
	l.hosts, l.nets = map[string]*Host{}, map[string]NetNS{}

	after, err := machinestate.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	diff := machinestate.Diff(before, after, machinestate.Ignore{
		// other work on this machine: only what is ours counts
		Proc: func(p machinestate.Proc) bool {
			return p.PidNS != ns0 && p.PidNS != ns1 && p.PidNS != ns2 && !strings.Contains(p.Cmdline, l.dir) && !strings.Contains(p.Cmdline, l.prefix)
		},
		// The test's hosts live in its own cgroup group (CgroupGroup: l.prefix).
		Cgroup: func(dir string) bool { return !strings.Contains(dir+"/", "/"+l.prefix+"/") },
		Link:   func(link string) bool { return !strings.HasPrefix(link, l.prefix) },
		Mount:  func(m string) bool { return !strings.Contains(m, l.dir) && !strings.Contains(m, l.prefix) },
		NetNS:  func(ns string) bool { return !strings.HasPrefix(ns, l.prefix) },
		NFT:    func(t string) bool { return !strings.Contains(t, l.prefix) },
	})
	if len(diff) != 0 {
		t.Errorf("the machine changed:\n%s", machinestate.String(diff))
	}
}

func mustNS(t *testing.T, pid int) string {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func ownCgroup(t *testing.T, ctrl string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == ctrl {
			return parts[2]
		}
	}
	return "/"
}

// memStat is the anonymous and page cache memory of a host's memory cgroup.
func memStat(h *Host) string {
	for _, d := range h.Cgroups() {
		if !strings.HasPrefix(d, "/sys/fs/cgroup/memory/") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(d, "memory.stat"))
		vals := map[string]float64{}
		for _, line := range strings.Split(string(b), "\n") {
			var k string
			var v float64
			if _, err := fmt.Sscan(line, &k, &v); err == nil {
				vals[k] = v
			}
		}
		return fmt.Sprintf("rss %.1f MiB, cache %.1f MiB", vals["total_rss"]/(1<<20), vals["total_cache"]/(1<<20))
	}
	return ""
}
