package kubeinstall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// netnsKeepalived is a real process runner standing in for systemd (no systemd here):
// "restarting" keepalived.service runs the real keepalived (VRRP only, foreground)
// inside a network namespace with the config the driver wrote under root. Like
// Debian's unit (ConditionFileNotEmpty), it starts nothing without a config.
type netnsKeepalived struct {
	t        *testing.T
	ns, root string
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
}

func (s *netnsKeepalived) Active(context.Context, string) (bool, error) {
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

func (s *netnsKeepalived) Running(ctx context.Context, unit string) (bool, error) {
	return s.Active(ctx, unit)
}

func (s *netnsKeepalived) Restart(context.Context, string) error {
	s.kill()
	conf := Paths{Root: s.root}.Join(keepalivedConf)
	if st, err := os.Stat(conf); err != nil || st.Size() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(s.root, "keepalived.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", s.ns, "keepalived", "--dont-fork", "--log-console", "--log-detail", "--vrrp",
		"-f", conf, "-p", filepath.Join(s.root, "keepalived.pid"), "-r", filepath.Join(s.root, "vrrp.pid"))
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: kill -9 takes the VRRP child too, as a power loss would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); log.Close(); close(done) }(s.done)
	return nil
}

// kill sends SIGKILL to keepalived and its children and waits for it.
func (s *netnsKeepalived) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

func (s *netnsKeepalived) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.root, "keepalived.log"))
	return tail(string(b), 15)
}

// vrrpLab is two controllers and a client in network namespaces on one bridge (in a
// namespace of its own, so the host's network is untouched).
type vrrpLab struct {
	t      *testing.T
	prefix string // of every namespace's name
	net    string // "10.213.9": controllers .11 .12, VIP .10, client .50
	nodes  [2]*vrrpNode
	client string
}

type vrrpNode struct {
	name, ns string
	d        *VIPDriver
	svc      *netnsKeepalived
	raw      []byte
	api      *exec.Cmd // the API server stand-in, while it runs
}

func (l *vrrpLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (l *vrrpLab) netns(name string) string {
	ns := l.prefix + name
	l.ip("netns", "add", ns)
	l.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	l.ip("-n", ns, "link", "set", "lo", "up")
	return ns
}

// plug adds a namespace with eth1 on the bridge at address .n.
func (l *vrrpLab) plug(name string, n int) string {
	ns, br := l.netns(name), l.prefix+"br"
	port := "v" + name
	l.ip("-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth1", "netns", ns)
	l.ip("-n", br, "link", "set", port, "master", "br0", "up")
	l.ip("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", l.net, n), "dev", "eth1")
	l.ip("-n", ns, "link", "set", "eth1", "up")
	return ns
}

// holder names the controllers whose eth1 is up and carries the VIP.
func (l *vrrpLab) holder() string {
	var on []string
	for _, n := range l.nodes {
		out, _ := exec.Command("ip", "-n", n.ns, "-o", "-4", "addr", "show", "dev", "eth1", "up").Output()
		if strings.Contains(string(out), " "+l.net+".10/32 ") {
			on = append(on, n.name)
		}
	}
	return strings.Join(on, "+")
}

// waitHolder waits until exactly want holds the VIP and says how long it took.
func (l *vrrpLab) waitHolder(want string, limit time.Duration) time.Duration {
	l.t.Helper()
	start := time.Now()
	for {
		got := l.holder()
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			l.t.Fatalf("VIP held by %q, want %q after %s\nctl-0: %s\nctl-1: %s", got, want, limit,
				l.nodes[0].svc.logTail(), l.nodes[1].svc.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answeringMAC is the MAC the client resolves the VIP to, from a fresh ARP request.
func (l *vrrpLab) answeringMAC() string {
	l.t.Helper()
	vip := l.net + ".10"
	_ = exec.Command("ip", "-n", l.client, "neigh", "flush", "to", vip).Run()
	if out, err := exec.Command("ip", "netns", "exec", l.client, "ping", "-c", "1", "-W", "1", vip).CombinedOutput(); err != nil {
		l.t.Fatalf("client ping %s: %v: %s", vip, err, out)
	}
	out, _ := exec.Command("ip", "-n", l.client, "neigh", "show", "to", vip).Output()
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "lladdr" && i+1 < len(f) {
			return f[i+1]
		}
	}
	l.t.Fatalf("client has no neighbour entry for %s: %s", vip, out)
	return ""
}

func (n *vrrpNode) mac(t *testing.T) string {
	b, err := exec.Command("ip", "netns", "exec", n.ns, "cat", "/sys/class/net/eth1/address").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// startAPI runs an HTTPS server on the API port in the node's namespace: what the
// keepalived check (curl …/readyz) asks.
func (n *vrrpNode) startAPI(t *testing.T, certDir string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", n.ns, "openssl", "s_server", "-quiet", "-www", "-accept", "6443",
		"-cert", filepath.Join(certDir, "cert.pem"), "-key", filepath.Join(certDir, "key.pem"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.api = cmd
	t.Cleanup(n.stopAPI)
}

func (n *vrrpNode) stopAPI() {
	if n.api != nil {
		_ = n.api.Process.Kill()
		_ = n.api.Wait()
		n.api = nil
	}
}

func (n *vrrpNode) run(t *testing.T) []string {
	t.Helper()
	res := driver.Run(context.Background(), n.d, n.raw)
	if !res.OK() {
		t.Fatalf("%s kube.vip: %s\n%s", n.name, res.Error, n.svc.logTail())
	}
	return res.Changes
}

// TestKeepalivedMovesTheVIP runs kube.vip's keepalived mode for real: two controllers
// on a bridge, each running keepalived with the config the driver wrote from the
// planner's inputs. The VIP comes up on controller-0 with no API anywhere (as before
// kubeadm init), moves to controller-1 when controller-0's API dies or controller-0
// dies (keepalived killed -9, its link down), and returns to controller-0 once its API
// answers again (keepalived preempts). Timings are printed, not asserted. The second
// subtest is a host without curl, whose check is a TCP connect with bash.
func TestKeepalivedMovesTheVIP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	for _, bin := range []string{"ip", "keepalived", "curl", "openssl", "ping"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (apt-get install -y keepalived curl openssl iproute2 iputils-ping)", bin)
		}
	}
	t.Run("curl-readyz", func(t *testing.T) { vrrpFailover(t, "c", true) })
	t.Run("bash-tcp", func(t *testing.T) { vrrpFailover(t, "b", false) })
}

// vrrpFailover runs the whole sequence with curl, and the API checks alone without.
func vrrpFailover(t *testing.T, tag string, curl bool) {
	l := &vrrpLab{t: t, prefix: "plka" + strconv.Itoa(os.Getpid()%100000) + tag + "-", net: "10.213.9"}
	br := l.netns("br")
	l.ip("-n", br, "link", "add", "br0", "type", "bridge")
	l.ip("-n", br, "link", "set", "br0", "up")
	l.client = l.plug("cl", 50)
	certDir := t.TempDir()
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", filepath.Join(certDir, "key.pem"), "-out", filepath.Join(certDir, "cert.pem"), "-days", "1", "-subj", "/CN=api").CombinedOutput(); err != nil {
		t.Fatalf("openssl req: %v: %s", err, out)
	}
	for i, name := range []string{"ctl-0", "ctl-1"} {
		root := t.TempDir()
		n := &vrrpNode{name: name, ns: l.plug(strconv.Itoa(i), 11+i), raw: vipInputs(t, l.net, name, kubespec.VIPKeepalived)}
		n.svc = &netnsKeepalived{t: t, ns: n.ns, root: root}
		t.Cleanup(n.svc.kill)
		n.d = NewVIPDriver(filepath.Join(root, "state"), WithRoot(root), WithServices(n.svc))
		if !curl {
			n.d.o.lookPath = func(bin string) (string, error) {
				if bin == "curl" {
					return "", exec.ErrNotFound
				}
				return exec.LookPath(bin)
			}
		}
		l.nodes[i] = n
	}
	ctl0, ctl1 := l.nodes[0], l.nodes[1]
	const limit = 20 * time.Second

	// Bootstrap: no API anywhere; controller-1 even starts first. Controller-0 holds
	// the VIP, as kubeadm init needs.
	ctl1.run(t)
	ctl0.run(t)
	conf, _ := os.ReadFile(Paths{Root: ctl0.svc.root}.Join(keepalivedConf))
	if want := map[bool]string{true: "/readyz", false: "/dev/tcp/127.0.0.1/6443"}[curl]; !strings.Contains(string(conf), want) {
		t.Fatalf("config lacks the %s check:\n%s", want, conf)
	}
	t.Logf("no API anywhere: VIP up on ctl-0 after %s", l.waitHolder("ctl-0", limit))
	if got, want := l.answeringMAC(), ctl0.mac(t); got != want {
		t.Errorf("client reaches the VIP at %s, want ctl-0's %s", got, want)
	}
	for _, n := range l.nodes {
		if cs := n.run(t); len(cs) != 0 {
			t.Errorf("%s: a second run changes %v", n.name, cs)
		}
	}

	// Both APIs answer: controller-0 keeps it.
	ctl0.startAPI(t, certDir)
	ctl1.startAPI(t, certDir)
	time.Sleep(6 * time.Second) // two check intervals past rise
	if got := l.holder(); got != "ctl-0" {
		t.Fatalf("with both APIs up the VIP is on %q\n%s", got, ctl0.svc.logTail())
	}

	// Controller-0's API dies: the VIP moves; it answers again: the VIP returns.
	ctl0.stopAPI()
	t.Logf("ctl-0's API dead: VIP moved to ctl-1 after %s", l.waitHolder("ctl-1", limit))
	ctl0.startAPI(t, certDir)
	t.Logf("ctl-0's API back: VIP returned to ctl-0 after %s (preempt)", l.waitHolder("ctl-0", limit))
	if !curl {
		return
	}

	// Controller-0 dies: keepalived killed -9 and its link down (its VIP goes with
	// the host). Controller-1 takes over; the client reaches it there.
	ctl0.svc.kill()
	l.ip("-n", ctl0.ns, "link", "set", "eth1", "down")
	t.Logf("ctl-0 killed: VIP up on ctl-1 after %s", l.waitHolder("ctl-1", limit))
	if got, want := l.answeringMAC(), ctl1.mac(t); got != want {
		t.Errorf("client reaches the VIP at %s, want ctl-1's %s", got, want)
	}

	// Controller-0 comes back: kube.vip starts keepalived again, which drops the stale
	// VIP, and takes the VIP back once its API answers.
	l.ip("-n", ctl0.ns, "link", "set", "eth1", "up")
	if cs := ctl0.run(t); len(cs) != 1 || cs[0] != "enable and start keepalived.service" {
		t.Errorf("restart after the loss: %v", cs)
	}
	t.Logf("ctl-0 back: VIP returned to ctl-0 after %s", l.waitHolder("ctl-0", limit))
	if got, want := l.answeringMAC(), ctl0.mac(t); got != want {
		t.Errorf("client reaches the VIP at %s, want ctl-0's %s", got, want)
	}
}
