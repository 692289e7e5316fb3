package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestCNIConfig(t *testing.T) {
	for _, tc := range []struct {
		subnet string
		mtu    int
	}{{"10.244.1.0/24", 1450}, {"192.168.64.0/26", 8950}} {
		_, sn, _ := net.ParseCIDR(tc.subnet)
		var c struct {
			CNIVersion string `json:"cniVersion"`
			Plugins    []struct {
				Type    string `json:"type"`
				MTU     int    `json:"mtu"`
				IPMasq  *bool  `json:"ipMasq"`
				Gateway bool   `json:"isDefaultGateway"`
				IPAM    struct {
					Type   string                `json:"type"`
					Ranges [][]map[string]string `json:"ranges"`
				} `json:"ipam"`
			} `json:"plugins"`
		}
		if err := json.Unmarshal(cniConfig(sn, tc.mtu), &c); err != nil {
			t.Fatalf("%s: not JSON: %v", tc.subnet, err)
		}
		if len(c.Plugins) != 2 || c.Plugins[0].Type != "bridge" || c.Plugins[1].Type != "portmap" {
			t.Fatalf("%s: plugins %+v, want bridge then portmap", tc.subnet, c.Plugins)
		}
		b := c.Plugins[0]
		if b.MTU != tc.mtu || b.IPMasq == nil || *b.IPMasq || !b.Gateway || b.IPAM.Type != "host-local" ||
			len(b.IPAM.Ranges) != 1 || b.IPAM.Ranges[0][0]["subnet"] != tc.subnet {
			t.Errorf("%s: bridge %+v", tc.subnet, b)
		}
	}
}

// TestFlanneldRealAPIServer runs the built flanneld in a network namespace against a
// real etcd and kube-apiserver (the cached Kubernetes binaries): it must take its
// subnet from its Node's podCIDR, create flannel.1 (VXLAN) over the namespace's
// interface, route the other node's subnet through it, write subnet.env and the CNI
// config, annotate its Node and mark its network available, then stop on SIGTERM;
// a second run changes nothing.
func TestFlanneldRealAPIServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth and VXLAN links")
	}
	cache := os.Getenv("PLINTH_CACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache", "plinth")
	}
	apiserver := filepath.Join(cache, "k8s", "v1.37.2", "kube-apiserver")
	if _, err := os.Stat(apiserver); err != nil {
		t.Skipf("needs the cached Kubernetes binaries (make k8s-bins): %v", err)
	}
	etcd := filepath.Join(cache, "etcd", "v3.7.0", "etcd")
	if _, err := os.Stat(etcd); err != nil {
		if etcd, err = exec.LookPath("etcd"); err != nil {
			t.Skip("needs etcd (make bundle caches it; or Debian etcd-server)")
		}
	}
	for _, c := range []string{"ip", "go"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("needs %s", c)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "flanneld")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The node's namespace, on a veth pair whose root end carries the API server.
	// A killed run leaves its namespace and veth (and their /24 route) behind: take
	// those of ended runs down, and use a /24 of our own beside any that remain.
	reapEndedRuns(t)
	suffix := strconv.Itoa(os.Getpid())
	ns, host, peer := "flt"+suffix, "flh"+suffix, "flp"+suffix
	subnet := fmt.Sprintf("10.77.%d.", mrand.IntN(250))
	hostIP, nodeIP, otherIP := subnet+"254", subnet+"1", subnet+"2"
	sh(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	sh(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	sh(t, "ip", "link", "set", peer, "netns", ns)
	sh(t, "ip", "addr", "add", hostIP+"/24", "dev", host)
	sh(t, "ip", "link", "set", host, "up")
	sh(t, "ip", "-n", ns, "addr", "add", nodeIP+"/24", "dev", peer)
	sh(t, "ip", "-n", ns, "link", "set", peer, "up")
	sh(t, "ip", "-n", ns, "link", "set", "lo", "up")

	ports := freePorts(t, 3)
	saKey := filepath.Join(dir, "sa.key")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	token := "flanneld-test-token"
	writeFile(t, filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"))
	start(t, dir, "etcd", etcd, "--name", "t", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--initial-cluster", fmt.Sprintf("t=http://127.0.0.1:%d", ports[1]))
	start(t, dir, "kube-apiserver", apiserver,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		"--bind-address", hostIP, "--secure-port", strconv.Itoa(ports[2]), "--advertise-address", hostIP,
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", "10.96.0.0/12", "--authorization-mode", "RBAC",
		"--endpoint-reconciler-type", "none")
	server := "https://" + net.JoinHostPort(hostIP, strconv.Itoa(ports[2]))
	waitReady(t, server)
	kc := filepath.Join(dir, "kubeconfig")
	writeFile(t, kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: t, user: {token: %q}}]
contexts: [{name: t, context: {cluster: t, user: t}}]
current-context: t
`, server, token))
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// n1 is ours; n2 is a remote node that already runs flannel (its annotations).
	// n1 carries an annotation kubelet sets on every node: flannel v0.28.10's lease
	// code writes into the Node's annotation map without creating it.
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Annotations: map[string]string{
			annotationPrefix + "/backend-type":        "vxlan",
			annotationPrefix + "/backend-data":        `{"VNI":1,"VtepMAC":"6a:1b:2c:3d:4e:5f"}`,
			annotationPrefix + "/public-ip":           otherIP,
			annotationPrefix + "/kube-subnet-manager": "true",
		}}, Spec: corev1.NodeSpec{PodCIDR: "10.244.2.0/24", PodCIDRs: []string{"10.244.2.0/24"}}},
	} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}
	netConf := filepath.Join(dir, "net-conf.json")
	writeFile(t, netConf, []byte(`{"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan"}}`))
	subnetFile, cniFile := filepath.Join(dir, "run", "subnet.env"), filepath.Join(dir, "net.d", "10-flannel.conflist")

	runOnce := func(round int) {
		log := filepath.Join(dir, fmt.Sprintf("flanneld-%d.log", round))
		lf, err := os.Create(log)
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		cmd := exec.Command("ip", "netns", "exec", ns, bin, "-kubeconfig", kc, "-net-conf", netConf,
			"-subnet-file", subnetFile, "-cni-conf", cniFile, "-iface", nodeIP)
		cmd.Env = append(os.Environ(), "NODE_NAME=n1")
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = diesWithTest()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var waitErr error
		done := make(chan struct{})
		go func() { waitErr = cmd.Wait(); close(done) }()
		defer func() {
			_ = cmd.Process.Kill()
			<-done
			if t.Failed() {
				b, _ := os.ReadFile(log)
				t.Logf("flanneld run %d log:\n%s", round, b)
			}
		}()

		eventually(t, done, "flanneld ready", func() (bool, string) {
			b, _ := os.ReadFile(log)
			return strings.Contains(string(b), "flanneld: ready"), ""
		})
		want := "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=false\n"
		eventually(t, done, "subnet.env", func() (bool, string) {
			b, _ := os.ReadFile(subnetFile)
			return string(b) == want, string(b)
		})
		eventually(t, done, "route to n2's subnet via flannel.1", func() (bool, string) {
			out, _ := exec.Command("ip", "-n", ns, "route", "show", "10.244.2.0/24").CombinedOutput()
			return strings.Contains(string(out), "dev flannel.1"), string(out)
		})
		out, err := exec.Command("ip", "-n", ns, "-d", "link", "show", "flannel.1").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "vxlan id 1 local "+nodeIP) || !strings.Contains(string(out), "mtu 1450") {
			t.Errorf("flannel.1: %v\n%s", err, out)
		}
		out, _ = exec.Command("ip", "-n", ns, "neigh", "show", "dev", "flannel.1").CombinedOutput()
		if !strings.Contains(string(out), "10.244.2.0 lladdr 6a:1b:2c:3d:4e:5f") {
			t.Errorf("no ARP entry for n2's VTEP: %s", out)
		}
		out, _ = exec.Command("ip", "netns", "exec", ns, "bridge", "fdb", "show", "dev", "flannel.1").CombinedOutput()
		if !strings.Contains(string(out), "6a:1b:2c:3d:4e:5f dst "+otherIP) {
			t.Errorf("no FDB entry for n2's VTEP: %s", out)
		}
		if b, err := os.ReadFile(cniFile); err != nil || !strings.Contains(string(b), `"subnet": "10.244.1.0/24"`) {
			t.Errorf("CNI config: %v\n%s", err, b)
		}
		eventually(t, done, "n1's network available", func() (bool, string) {
			n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeNetworkUnavailable {
					return c.Status == corev1.ConditionFalse && n.Annotations[annotationPrefix+"/public-ip"] == nodeIP, fmt.Sprint(c, n.Annotations)
				}
			}
			return false, fmt.Sprint(n.Status.Conditions)
		})

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			if waitErr != nil {
				t.Errorf("flanneld after SIGTERM: %v", waitErr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("flanneld still running 30 s after SIGTERM")
		}
	}
	runOnce(1)
	st1, err := os.Stat(cniFile)
	if err != nil {
		t.Fatal(err)
	}
	// The second run must write subnet.env again but leave the CNI config alone.
	if err := os.Remove(subnetFile); err != nil {
		t.Fatal(err)
	}
	runOnce(2)
	if st2, err := os.Stat(cniFile); err != nil || !st2.ModTime().Equal(st1.ModTime()) {
		t.Errorf("second run rewrote the unchanged CNI config (%v)", err)
	}
}

// diesWithTest makes a child die with the test process, even a killed one.
func diesWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// reapEndedRuns deletes the veths (flh<pid>) and namespaces (flt<pid>) of test runs
// whose process has ended.
func reapEndedRuns(t *testing.T) {
	t.Helper()
	ended := func(name, prefix string) bool {
		pid, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		return strings.HasPrefix(name, prefix) && err == nil && pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if ended(i.Name, "flh") {
			t.Logf("deleting %s, left by an ended run", i.Name)
			_ = exec.Command("ip", "link", "del", i.Name).Run()
		}
	}
	nss, _ := os.ReadDir("/run/netns")
	for _, e := range nss {
		if ended(e.Name(), "flt") {
			t.Logf("deleting namespace %s, left by an ended run", e.Name())
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}

func sh(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v %s", name, args, err, out)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// start runs a control-plane process for the test's lifetime, its log in dir.
func start(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = diesWithTest()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log tail:\n%s", name, b)
		}
	})
}

func waitReady(t *testing.T, server string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := hc.Get(server + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatal("kube-apiserver not ready within 60 s")
}

// eventually polls cond until it holds, failing if flanneld exits first or after 60 s.
func eventually(t *testing.T, exited <-chan struct{}, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s: flanneld exited; last: %s", what, last)
		default:
		}
	}
	t.Fatalf("%s: not within 60 s; last: %s", what, last)
}
