package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// procServices stands in for systemd in tests: "restarting" plinth-etcd runs the real
// etcd binary with the config file the driver wrote under root.
type procServices struct {
	t    *testing.T
	bin  string
	root string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *procServices) Active(context.Context, string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false, nil
	}
	select {
	case <-s.done:
		return false, nil
	default:
		return true, nil
	}
}

func (s *procServices) Running(ctx context.Context, unit string) (bool, error) {
	return s.Active(ctx, unit)
}

func (s *procServices) Restart(ctx context.Context, unit string) error {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(s.root, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "--config-file", Paths{Root: s.root}.Join(etcdConfig))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); log.Close(); close(done) }(s.done)
	return nil
}

func (s *procServices) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// etcdMember is one member under test: its driver, root and inputs.
type etcdMember struct {
	name   string
	d      *EtcdDriver
	svc    *procServices
	inputs json.RawMessage
}

func etcdBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("needs etcd (Debian etcd-server; make deps installs it)")
	}
	return bin
}

// etcdMembers renders the sample site on loopback and makes a driver per etcd host.
func etcdMembers(t *testing.T, o siteOpts, sec *secrets, roots map[string]*etcdMember) []*etcdMember {
	t.Helper()
	bin := etcdBinary(t)
	steps := renderSite(t, o)
	var out []*etcdMember
	for _, host := range []string{"ctl-0", "ctl-1", "wit-0"} {
		st, ok := steps[plan.StepID(host, kubespec.KindEtcd, "")]
		if !ok {
			continue
		}
		m := roots[host]
		if m == nil {
			root := t.TempDir()
			svc := &procServices{t: t, bin: bin, root: root}
			t.Cleanup(svc.stop)
			m = &etcdMember{name: host, svc: svc, d: NewEtcdDriver(root, WithRoot(root),
				WithServices(svc), WithHealthWait(30*time.Second))}
			roots[host] = m
		}
		m.inputs = sec.resolve(t, st)
		out = append(out, m)
	}
	return out
}

func runAll(t *testing.T, ms []*etcdMember) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	res := make([]driver.Result, len(ms))
	for i, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = driver.Run(ctx, m.d, m.inputs) }()
	}
	wg.Wait()
	for i, r := range res {
		if !r.OK() {
			b, _ := os.ReadFile(filepath.Join(ms[i].svc.root, "etcd.log"))
			t.Fatalf("%s: %s\netcd log tail: %s", ms[i].name, r.Error, tail(string(b), 10))
		}
	}
}

// writable proves the cluster commits a write through member m.
func writable(t *testing.T, m *etcdMember, key string) error {
	t.Helper()
	var in kubespec.EtcdInputs
	if err := json.Unmarshal(m.inputs, &in); err != nil {
		t.Fatal(err)
	}
	ca, err := certs.ParseCA(in.CA)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := m.d.client(ca)
	if err != nil {
		t.Fatal(err)
	}
	// A write during a leader election may fail; the cluster must take one soon after.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = cl.put(ctx, clientURL(in.Member), key, "v")
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func loopbackSite(t *testing.T, witness bool) siteOpts {
	p := freePorts(t, 2)
	return siteOpts{net: "127.77.0", etcdPorts: [2]int{p[0], p[1]}, witness: witness}
}

// The 3-member etcd Plinth renders comes up with its certificates and stays writable
// when any one member is lost; re-running a member changes nothing.
func TestEtcdThreeMembersSurviveOneLoss(t *testing.T) {
	o := loopbackSite(t, true)
	sec := newSecrets()
	ms := etcdMembers(t, o, sec, map[string]*etcdMember{})
	if len(ms) != 3 {
		t.Fatalf("want 3 etcd members (2 controllers + witness), got %d", len(ms))
	}
	start := time.Now()
	runAll(t, ms)
	t.Logf("3 members up and healthy in %s", time.Since(start).Round(10*time.Millisecond))
	if err := writable(t, ms[0], "a"); err != nil {
		t.Fatal(err)
	}
	if cs, err := ms[0].d.Diff(context.Background(), ms[0].inputs); err != nil || len(cs) != 0 {
		t.Fatalf("re-run should change nothing: %v %v", driver.Summaries(cs), err)
	}
	for _, lost := range []int{2, 1} {
		ms[lost].svc.stop()
		if err := writable(t, ms[0], fmt.Sprintf("after-loss-%d", lost)); err != nil {
			t.Fatalf("lost %s: cluster not writable: %v", ms[lost].name, err)
		}
		t.Logf("lost %s: still writable", ms[lost].name)
		runAll(t, []*etcdMember{ms[lost]}) // the step restarts it
	}
}

// A site without a witness runs 2 members (and says it is not fault tolerant); adding
// the witness later is a member add by its kube.etcd step, without restarting the
// others. A member that lost its data is refused with the recovery to follow.
func TestEtcdWitnessJoinsByMemberAdd(t *testing.T) {
	o := loopbackSite(t, false)
	sec := newSecrets()
	roots := map[string]*etcdMember{}
	two := etcdMembers(t, o, sec, roots)
	if len(two) != 2 || !strings.Contains(string(two[0].inputs), "NOT fault tolerant") {
		t.Fatalf("without a witness: %d members, note %s", len(two), two[0].inputs)
	}
	runAll(t, two)
	pid := two[0].svc.cmd.Process.Pid

	o.witness = true
	three := etcdMembers(t, o, sec, roots)
	for _, m := range three[:2] {
		cs, err := m.d.Diff(context.Background(), m.inputs)
		if err != nil || len(cs) != 0 {
			t.Fatalf("%s: a new member must not touch running ones: %v %v", m.name, driver.Summaries(cs), err)
		}
	}
	w := three[2]
	cs, err := w.d.Diff(context.Background(), w.inputs)
	if err != nil || !strings.Contains(driver.Summaries(cs), "add member wit-0") {
		t.Fatalf("witness should add itself: %v %v", driver.Summaries(cs), err)
	}
	runAll(t, []*etcdMember{w})
	if two[0].svc.cmd.Process.Pid != pid {
		t.Fatal("ctl-0's etcd was restarted")
	}
	three[1].svc.stop()
	if err := writable(t, three[0], "with-witness"); err != nil {
		t.Fatalf("3 members, ctl-1 lost: %v", err)
	}

	// ctl-1 loses its data: refused, with the fenced recovery named.
	var in kubespec.EtcdInputs
	_ = json.Unmarshal(three[1].inputs, &in)
	if err := os.RemoveAll(Paths{Root: three[1].svc.root}.Join(in.DataDir)); err != nil {
		t.Fatal(err)
	}
	_, err = three[1].d.Diff(context.Background(), three[1].inputs)
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "fenced recovery") {
		t.Fatalf("lost data must be refused permanently: %v", err)
	}
}

// The unit Plinth writes passes systemd's own checks.
func TestEtcdUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("needs systemd-analyze (make deps)")
	}
	in := kubespec.EtcdInputs{Member: kubespec.EtcdMember{Name: "ctl-0"}, Binary: etcdBinary(t)}
	f := filepath.Join(t.TempDir(), etcdUnitName)
	if err := os.WriteFile(f, RenderEtcdUnit(in, Paths{}), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", f).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
