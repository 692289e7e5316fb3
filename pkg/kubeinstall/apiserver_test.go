package kubeinstall

import (
	"context"
	"fmt"
	"math/rand/v2"
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

	"crypto/tls"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// apiCluster is a real control plane for tests: etcd, kube-apiserver and
// kube-controller-manager (bootstrap signer and token cleaner only), with
// certificates and kubeconfigs made by kubeadm's own phases from Plinth's rendered
// configuration. It listens on the VIP, an address on a veth pair it creates.
type apiCluster struct {
	t       *testing.T
	root    string // Paths.Root of the rendered configuration
	paths   Paths
	net     string // "10.213.N"
	port    int
	kubeadm string
	config  string // rendered init configuration (secrets resolved)
	nc      nodeConfigs
	sec     *secrets
	opts    siteOpts
	super   []byte               // super-admin.conf
	admin   kubernetes.Interface // client-go's clientset, to set up and inspect
	api     API                  // Plinth's own client, as the drivers build it
}

func (c *apiCluster) vip() string { return c.net + ".10" }

func startAPICluster(t *testing.T) *apiCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the API server listens on a VIP on a veth pair this test creates")
	}
	kubeadm, apiserver, kcm := k8sBin(t, "kubeadm"), k8sBin(t, "kube-apiserver"), k8sBin(t, "kube-controller-manager")
	etcd := etcdBinary(t)
	c := &apiCluster{t: t, root: t.TempDir(), kubeadm: kubeadm, sec: newSecrets()}
	c.paths = Paths{Root: c.root}
	c.net = fmt.Sprintf("10.213.%d", 100+rand.IntN(150))
	ports := freePorts(t, 4)
	c.port = ports[0]
	c.addVeth()

	c.opts = siteOpts{net: c.net, apiPort: c.port, witness: true, labels: "{rack: r1}"}
	steps := renderSite(t, c.opts)
	// Joins pin the CA hash kube.init reports; a placeholder until the CA exists.
	c.sec.setOutputs("ctl-0/kube.init", map[string]string{kubespec.OutputCACertHash: "sha256:" + strings.Repeat("00", 32)})
	c.nc = renderConfigs(t, steps, c.sec, c.paths)
	b, err := c.nc.init.YAML()
	c.config = writeYAML(t, c.root, "init.yaml", b, err)

	// The external etcd files the configuration names, issued from Plinth's etcd CA.
	ca, err := certs.ParseCA(c.sec.get(t, "generated/etcd-ca/sample"))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(certs.Request{CommonName: "kube-apiserver-etcd-client", Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for f, data := range map[string][]byte{"ca.crt": ca.CertPEM, "apiserver-etcd-client.crt": cert, "apiserver-etcd-client.key": key} {
		if err := writeFile(c.paths.etcdFile(f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kdir := c.paths.Join("/etc/kubernetes")
	c.kubeadmOK("init", "phase", "certs", "all", "--config", c.config)
	for _, kc := range []string{"super-admin", "admin"} {
		c.kubeadmOK("init", "phase", "kubeconfig", kc, "--config", c.config, "--kubeconfig-dir", kdir)
	}
	c.super, err = os.ReadFile(filepath.Join(kdir, "super-admin.conf"))
	if err != nil {
		t.Fatal(err)
	}

	pki := c.paths.Join(pkiDir)
	etcdDir := t.TempDir()
	c.start("etcd", etcd, "--name", "t", "--data-dir", etcdDir,
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		"--initial-cluster", fmt.Sprintf("t=http://127.0.0.1:%d", ports[2]))
	c.start("kube-apiserver", apiserver,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		"--bind-address", c.vip(), "--secure-port", strconv.Itoa(c.port), "--advertise-address", c.net+".11",
		"--client-ca-file", pki+"/ca.crt", "--tls-cert-file", pki+"/apiserver.crt", "--tls-private-key-file", pki+"/apiserver.key",
		"--service-account-key-file", pki+"/sa.pub", "--service-account-signing-key-file", pki+"/sa.key",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", "10.96.0.0/12", "--authorization-mode", "Node,RBAC",
		"--enable-bootstrap-token-auth", "--endpoint-reconciler-type", "none")
	c.waitReady()
	// controller-manager.conf points at the node's own address; the API listens on
	// the VIP only, which super-admin.conf uses.
	c.start("kube-controller-manager", kcm, "--kubeconfig", filepath.Join(kdir, "super-admin.conf"),
		"--controllers", "bootstrapsigner,tokencleaner", "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[3]))
	if c.api, err = NewClient(c.super); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.super)
	if err != nil {
		t.Fatal(err)
	}
	if c.admin, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// addVeth creates a veth pair carrying the VIP and the first controller's address.
func (c *apiCluster) addVeth() {
	t := c.t
	a, b := fmt.Sprintf("pk%da", rand.IntN(1e6)), ""
	b = a[:len(a)-1] + "b"
	run := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2; make deps)")
	}
	run("link", "add", a, "type", "veth", "peer", "name", b)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	run("addr", "add", c.vip()+"/24", "dev", a)
	run("addr", "add", c.net+".11/32", "dev", a)
	run("link", "set", a, "up")
	run("link", "set", b, "up")
}

func (c *apiCluster) start(name, bin string, args ...string) {
	c.t.Helper()
	log, err := os.Create(filepath.Join(c.root, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	// Cleanups run last-in first-out: the API server stops before etcd.
	c.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if c.t.Failed() {
			b, _ := os.ReadFile(filepath.Join(c.root, name+".log"))
			c.t.Logf("%s log tail: %s", name, tail(string(b), 40))
		}
	})
}

func (c *apiCluster) waitReady() {
	c.t.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://" + net.JoinHostPort(c.vip(), strconv.Itoa(c.port)) + "/readyz"
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatal("kube-apiserver not ready within 60s")
}

func (c *apiCluster) kubeadmOK(args ...string) string {
	c.t.Helper()
	out, err := kubeadmRun(c.t, nil, append([]string{c.kubeadm}, args...)...)
	if err != nil {
		c.t.Fatalf("kubeadm %v: %v\n%s", args, err, tail(out, 20))
	}
	return out
}

func (c *apiCluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	c.t.Cleanup(cancel)
	return ctx
}
