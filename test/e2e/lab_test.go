package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/nspawn/machinestate"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// labManifest renders the lab site for subnet 10.N.0.0/24 (management) and
// 10.N+1.0.0/24 (data); addr overrides a host's data address octet.
func labManifest(n int, mtu int, addr map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: lab
spec:
  controllers: [controller-0, controller-1]
  witness: witness
  policy: {drift: repair, driftCheckSeconds: 2, retryBaseSeconds: 1, retryMaxSeconds: 5}
  networks:
  - {name: mgmt, role: mgmt, cidr: 10.%d.0.0/24}
  - {name: data, role: data, cidr: 10.%d.0.0/24, mtu: %d}
`, n, n+1, mtu)
	for _, h := range lab.DefaultSpec("").Hosts {
		octet := h.Octet
		if o, ok := addr[h.Name]; ok {
			octet = o
		}
		fmt.Fprintf(&b, `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: %s}
spec:
  roles: [%s]
  managementAddress: 10.%d.0.%d
  interfaces:
  - {name: data0, networks: [data], addresses: [10.%d.0.%d/24]}
  routes:
  - {to: 10.%d.0.0/24, via: 10.%d.0.254}
`, h.Name, map[bool]string{true: "worker", false: "controller"}[h.Role == "worker"], n, h.Octet, n+1, octet, n+2, n+1)
	}
	return b.String()
}

type labEnv struct {
	t   *testing.T
	ctx context.Context
	l   *lab.Lab
	n   int
	cl  *client.Client
	dir string
	// before is the machine before the lab came up.
	before *machinestate.Snapshot
}

func (e *labEnv) apply(yaml string) {
	e.t.Helper()
	f := filepath.Join(e.dir, fmt.Sprintf("site-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if out, err := e.l.CLI(e.ctx, "apply", "-f", f); err != nil {
		e.t.Fatalf("apply: %v %s", err, out)
	}
}

func (e *labEnv) steps() map[string]plan.Record {
	e.t.Helper()
	var steps []plan.Record
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/steps", nil, &steps); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]plan.Record{}
	for _, s := range steps {
		out[s.Host] = s
	}
	return out
}

func (e *labEnv) host(name string) state.HostRecord {
	e.t.Helper()
	var h state.HostRecord
	var d struct {
		Host state.HostRecord `json:"host"`
	}
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/hosts/"+name, nil, &d); err != nil {
		e.t.Fatal(err)
	}
	h = d.Host
	return h
}

func cond(h state.HostRecord, typ string) api.Condition {
	if c := plan.Find(h.Host.Status.Conditions, typ); c != nil {
		return *c
	}
	return api.Condition{}
}

// link reads data0 inside a host's namespace with `ip -j`.
func (e *labEnv) link(host string) (mtu int, addrs []string) {
	e.t.Helper()
	out, err := exec.CommandContext(e.ctx, "ip", "-n", e.l.Host(host).NS, "-j", "addr", "show", "data0").Output()
	if err != nil {
		e.t.Fatal(err)
	}
	var ls []struct {
		MTU      int `json:"mtu"`
		AddrInfo []struct {
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
			Family    string `json:"family"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &ls); err != nil || len(ls) != 1 {
		e.t.Fatalf("ip -j addr: %v %s", err, out)
	}
	for _, a := range ls[0].AddrInfo {
		if a.Family == "inet" {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.Prefixlen))
		}
	}
	return ls[0].MTU, addrs
}

func (e *labEnv) waitReady(timeout time.Duration) {
	e.t.Helper()
	if err := e.l.WaitSiteReady(e.ctx, nil, timeout); err != nil {
		e.t.Fatal(err)
	}
}

// bootedLab skips unless this machine can boot lab hosts, and returns a lab that
// installs from the site bundle; ctx bounds the whole test.
func bootedLab(t *testing.T, timeout time.Duration) (*lab.Lab, context.Context) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the lab needs root: it boots hosts with systemd-nspawn and creates network namespaces, veth pairs and a bridge")
	}
	for _, tool := range []string{"ip", "nft", "systemd-nspawn", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the lab needs %s (make deps installs it)", tool)
		}
	}
	bundleFile := siteBundle(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	l := newLab(t)
	dir, err := lab.UnpackBundle(ctx, bundleFile, bundleCache)
	if err != nil {
		t.Fatal(err)
	}
	pruneBundles(t, dir)
	l.BundleDir = dir
	return l, ctx
}

func startLab(t *testing.T) *labEnv { return startLabFor(t, 12*time.Minute) }

// startLabFor is startLab with the whole test's time bound (the lab's context).
func startLabFor(t *testing.T, timeout time.Duration) *labEnv {
	t.Helper()
	l, ctx := bootedLab(t, timeout)
	before, err := machinestate.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 10.n.0.0/24 and the next two /24s; never the demo's 10.211 (make demo may run).
	n := 100 + 3*rand.IntN(37)
	spec := lab.DefaultSpec("")
	spec.Subnet = fmt.Sprintf("10.%d.0.0/24", n)
	e := &labEnv{t: t, ctx: ctx, l: l, n: n, dir: t.TempDir(), before: before}
	start := time.Now()
	if err := l.Up(ctx, spec, testLog{t}); err != nil {
		t.Fatal(err)
	}
	cl, err := l.Client()
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	e.apply(labManifest(n, 9000, nil))
	e.waitReady(90 * time.Second)
	t.Logf("lab of %d booted hosts (3 coordinators, an agent on each) installed and Ready %s after start", len(spec.Hosts), time.Since(start).Round(100*time.Millisecond))
	return e
}

func TestLab(t *testing.T) {
	e := startLab(t)

	t.Run("every host runs systemd with Plinth's units active", func(t *testing.T) { testUnitsActive(t, e) })
	t.Run("re-running the install script changes nothing", func(t *testing.T) { testInstallRerun(t, e) })
	t.Run("host.network converged for real", func(t *testing.T) {
		for _, h := range e.l.Hosts() {
			mtu, addrs := e.link(h.Name)
			want := fmt.Sprintf("10.%d.0.%d/24", e.n+1, lab.DefaultSpec("").Hosts[indexOf(h.Name)].Octet)
			if mtu != 9000 || strings.Join(addrs, ",") != want {
				t.Errorf("%s data0: mtu %d addrs %v, want 9000 %s", h.Name, mtu, addrs, want)
			}
		}
		var evs []state.Event
		if _, err := e.cl.Do(e.ctx, "GET", "/v1/events", nil, &evs); err != nil {
			t.Fatal(err)
		}
		var ok, siteReady int
		for _, ev := range evs {
			if ev.Reason == "StepSucceeded" {
				ok++
			}
			if ev.Object == "site/lab" && ev.Reason == "ReadyTrue" {
				siteReady++
			}
		}
		if ok < 4 || siteReady == 0 {
			t.Errorf("events: %d StepSucceeded, %d site ReadyTrue", ok, siteReady)
		}
	})

	t.Run("changing one address re-runs only that host's step", func(t *testing.T) {
		before := e.steps()
		e.apply(labManifest(e.n, 9000, map[string]int{"compute-0": 31}))
		e.waitReady(60 * time.Second)
		after := e.steps()
		for host, b := range before {
			a := after[host]
			changed := a.InputsHash != b.InputsHash || !a.FinishedAt.Equal(b.FinishedAt)
			if changed != (host == "compute-0") {
				t.Errorf("%s: re-ran=%v", host, changed)
			}
		}
		if _, addrs := e.link("compute-0"); strings.Join(addrs, ",") != fmt.Sprintf("10.%d.0.31/24", e.n+1) {
			t.Errorf("compute-0 addresses %v: the old owned address should be gone", addrs)
		}
	})

	t.Run("drift is detected and repaired", func(t *testing.T) {
		if _, err := e.l.Exec(e.ctx, e.l.Host("controller-1"), "ip", "link", "set", "data0", "mtu", "1400"); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, "drift repaired", func() error {
			if mtu, _ := e.link("controller-1"); mtu != 9000 {
				return fmt.Errorf("mtu %d", mtu)
			}
			var evs []state.Event
			if _, err := e.cl.Do(e.ctx, "GET", "/v1/events", nil, &evs); err != nil {
				return err
			}
			for _, ev := range evs {
				if ev.Reason == "Drifted" && strings.Contains(ev.Object, "controller-1") {
					return nil
				}
			}
			return fmt.Errorf("no Drifted event")
		})
		e.waitReady(30 * time.Second)
	})

	t.Run("killed agent is unreachable, resumes and applies once", func(t *testing.T) {
		h := e.l.Host("compute-0")
		if err := e.l.KillAgent(e.ctx, h); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		poll.Until(t, 20*time.Second, "compute-0 Reachable=False", func() error {
			if c := cond(e.host("compute-0"), api.ConditionReachable); c.Status != api.ConditionFalse {
				return fmt.Errorf("Reachable=%s", c.Status)
			}
			return nil
		})
		t.Logf("dead agent detected in %s", time.Since(killed).Round(100*time.Millisecond))
		if r := cond(e.host("compute-0"), api.ConditionReady); r.Status != api.ConditionFalse || !strings.Contains(r.Message, "unreachable") {
			t.Errorf("Ready should explain the host is unreachable: %+v", r)
		}
		// New intent while the agent is down; it must be applied after restart.
		e.apply(labManifest(e.n, 9000, map[string]int{"compute-0": 41}))
		if err := e.l.StartAgent(e.ctx, h); err != nil {
			t.Fatal(err)
		}
		e.waitReady(60 * time.Second)
		if _, addrs := e.link("compute-0"); strings.Join(addrs, ",") != fmt.Sprintf("10.%d.0.41/24", e.n+1) {
			t.Errorf("after restart compute-0 has %v", addrs)
		}
	})

	t.Run("killing the leader while steps run", func(t *testing.T) {
		leader, err := e.l.Leader(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.apply(labManifest(e.n, 8000, map[string]int{"compute-0": 41}))
		c := e.l.Coordinator(leader)
		if err := c.Kill(e.ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed leader %s right after apply", leader)
		e.waitReady(90 * time.Second)
		for _, h := range e.l.Hosts() {
			if mtu, _ := e.link(h.Name); mtu != 8000 && h.Name != "witness" {
				t.Errorf("%s mtu %d, want 8000", h.Name, mtu)
			}
		}
		if err := e.l.StartCoordinator(c); err != nil {
			t.Fatal(err)
		}
		if err := e.l.WaitReady(e.ctx, c, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("partitioned host is unreachable until healed", func(t *testing.T) {
		h := e.l.Host("controller-1")
		if err := e.l.Partition(e.ctx, h); err != nil {
			t.Fatal(err)
		}
		cut := time.Now()
		poll.Until(t, 30*time.Second, "controller-1 unreachable", func() error {
			if c := cond(e.host("controller-1"), api.ConditionReachable); c.Status != api.ConditionFalse {
				return fmt.Errorf("Reachable=%s", c.Status)
			}
			return nil
		})
		t.Logf("partition detected in %s", time.Since(cut).Round(100*time.Millisecond))
		if err := e.l.Heal(e.ctx, h); err != nil {
			t.Fatal(err)
		}
		e.waitReady(60 * time.Second)
	})

	t.Run("OVS bridges on every data host", func(t *testing.T) { testLabOVS(t, e) })
	t.Run("host networking: bridge, macvlan, pools, rules, sysctls, rollback guard", func(t *testing.T) { testLabNetwork(t, e) })
	t.Run("Ceph pools, users and sealed keys on controller-0's cluster", func(t *testing.T) { testLabCeph(t, e) })
	t.Run("agent restarted in the middle of a step", func(t *testing.T) { testAgentRestartMidStep(t, e) })
	t.Run("install script: bad input gives a clear error and installs nothing", func(t *testing.T) { testInstallBadInput(t, e) })
	t.Run("package upgrade keeps identity and state; purge leaves nothing", func(t *testing.T) { testUpgradeAndPurge(t, e) })
	t.Run("teardown leaves the machine as it was", func(t *testing.T) { testTeardown(t, e) })
}

// testTeardown takes the lab down and compares the machine with before it came up:
// processes, mounts, cgroups, links, namespaces, nftables and the sysctls kubelet
// and CNI plugins touch.
func testTeardown(t *testing.T, e *labEnv) {
	began := time.Now()
	e.l.Down(e.ctx)
	t.Logf("lab down in %s", time.Since(began).Round(100*time.Millisecond))
	after, err := machinestate.Take(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir, prefix := e.l.Dir, e.l.Prefix()
	diff := machinestate.Diff(e.before, after, machinestate.Ignore{
		// Only what is the lab's: processes of its hosts and anything naming its
		// directory; other work on the machine comes and goes.
		Proc: func(p machinestate.Proc) bool {
			return p.PidNS == selfPidNS() && !strings.Contains(p.Cmdline, dir) && !strings.Contains(p.Cmdline, "systemd-nspawn")
		},
		Cgroup: func(c string) bool { return !strings.Contains(c+"/", "/"+prefix+"/") },
		Mount:  func(m string) bool { return !strings.Contains(m, dir) && !strings.Contains(m, prefix) },
		Link:   func(l string) bool { return !strings.HasPrefix(l, prefix) },
		NetNS:  func(ns string) bool { return !strings.HasPrefix(ns, prefix) },
		NFT:    func(t string) bool { return !strings.Contains(t, prefix) },
	})
	if len(diff) != 0 {
		t.Errorf("the machine is not as it was before the lab:\n%s", machinestate.String(diff))
	}
}

func selfPidNS() string {
	l, _ := os.Readlink("/proc/self/ns/pid")
	return l
}

// labOVS is the OVS part of the lab site: userspace bridges on every data host.
const labOVS = `  ovs:
    bridges:
    - name: br-data
      ports:
      - {name: data0p, mtu: 8000}
      - {name: vlan100, type: internal, vlan: 100}
    - name: br-int
`

// testLabOVS applies the lab site with OVS and checks the bridges exist in every
// host's own ovs-vswitchd, then that a deleted port comes back (drift repair).
func testLabOVS(t *testing.T, e *labEnv) {
	e.apply(strings.Replace(labManifest(e.n, 8000, map[string]int{"compute-0": 41}), "  networks:\n", labOVS+"  networks:\n", 1))
	e.waitReady(90 * time.Second)
	// Each data host's own ovs-vswitchd: the openvswitch-switch package's units.
	vsctl := func(h *lab.Host, args ...string) (string, error) {
		out, err := e.l.Exec(e.ctx, h, "ovs-vsctl", args...)
		return strings.TrimSpace(out), err
	}
	for _, h := range e.l.Hosts() {
		if out, err := vsctl(h, "list-ports", "br-data"); err != nil || out != "data0p\nvlan100" {
			t.Errorf("%s br-data ports: %q %v", h.Name, out, err)
		}
		if out, _ := vsctl(h, "get", "port", "vlan100", "tag"); out != "100" {
			t.Errorf("%s vlan100 tag %q", h.Name, out)
		}
	}
	h := e.l.Host("compute-0")
	if _, err := vsctl(h, "del-port", "br-data", "vlan100"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "vlan100 restored on compute-0", func() error {
		if out, _ := vsctl(h, "list-ports", "br-data"); out != "data0p\nvlan100" {
			return fmt.Errorf("ports %q", out)
		}
		return nil
	})
	e.waitReady(30 * time.Second)
}

func indexOf(name string) int {
	for i, h := range lab.DefaultSpec("").Hosts {
		if h.Name == name {
			return i
		}
	}
	return -1
}

// labCeph is the Ceph part of the lab site: the OpenStack defaults on controller-0's
// one-OSD cluster, with one override.
const labCeph = `  ceph:
    host: controller-0
    osdHosts: 1
    pools:
    - {name: kube-rbd, quota: {maxBytes: 10Gi}}
`

// testLabCeph applies the site with Ceph against the one-node cluster the lab runs
// on controller-0 with the Debian packages' units, and checks the pools and users on
// the cluster and that keys reach the coordinators only sealed.
func testLabCeph(t *testing.T, e *labEnv) {
	h := e.l.Host(lab.CephHost)
	e.apply(strings.Replace(labManifest(e.n, 8000, map[string]int{"compute-0": 41}), "  networks:\n", labCeph+"  networks:\n", 1))
	e.waitReady(90 * time.Second)

	ceph := func(args ...string) []byte {
		t.Helper()
		out, err := e.l.Exec(e.ctx, h, "ceph", append([]string{"-f", "json"}, args...)...)
		if err != nil {
			t.Fatalf("ceph %v: %v", args, err)
		}
		return []byte(out)
	}
	var pools []struct {
		Name       string                     `json:"pool_name"`
		Size       int                        `json:"size"`
		QuotaBytes int64                      `json:"quota_max_bytes"`
		Apps       map[string]json.RawMessage `json:"application_metadata"`
	}
	if err := json.Unmarshal(ceph("osd", "pool", "ls", "detail"), &pools); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, p := range pools {
		found[p.Name] = true
		if _, rbd := p.Apps["rbd"]; p.Name != "device_health_metrics" && (p.Size != 1 || !rbd) {
			t.Errorf("pool %s: size %d, applications %v", p.Name, p.Size, p.Apps)
		}
		if p.Name == "kube-rbd" && p.QuotaBytes != 10<<30 {
			t.Errorf("kube-rbd quota %d", p.QuotaBytes)
		}
	}
	for _, name := range []string{"kube-rbd", "images", "volumes", "vms", "backups"} {
		if !found[name] {
			t.Errorf("pool %s missing", name)
		}
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(ceph("auth", "get-key", "client.cinder"), &key); err != nil || len(key.Key) < 20 {
		t.Fatalf("client.cinder key: %v", err)
	}
	var steps []plan.Record
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/steps", nil, &steps); err != nil {
		t.Fatal(err)
	}
	var evs []state.Event
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/events", nil, &evs); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.ID == "controller-0/ceph.user/cinder" && (s.LastResult == nil || s.LastResult.Outputs["key"] != "sealed") {
			t.Errorf("cinder step outputs: %+v", s.LastResult)
		}
	}
	for what, v := range map[string]any{"steps": steps, "events": evs} {
		if b, _ := json.Marshal(v); strings.Contains(string(b), key.Key) {
			t.Errorf("client.cinder's key appears in the %s", what)
		}
	}
}
