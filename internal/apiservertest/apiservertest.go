// Package apiservertest runs a real etcd and kube-apiserver on 127.0.0.1 for tests
// that talk to Kubernetes through client-go (or libraries built on it, such as the
// Helm SDK) and need no kubelet or controllers.
//
// The API server authenticates one static admin token and serves a self-signed
// certificate it makes itself, so the harness needs neither root nor kubeadm. It
// uses the Kubernetes binaries `make k8s-bins` caches and etcd from the cache or
// Debian's etcd-server, and skips the test, saying what is missing, without them.
// Tests only: it calls t.Fatal and t.Skip.
package apiservertest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
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

	"k8s.io/client-go/rest"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Cluster is a running API server: its address and an admin kubeconfig.
type Cluster struct {
	// Server is the API server's URL (https://127.0.0.1:PORT).
	Server string
	// Kubeconfig authenticates as a member of system:masters.
	Kubeconfig []byte
	// Config is the same identity as a REST config.
	Config *rest.Config
	// Dir holds the processes' data and logs.
	Dir string
}

// token is the admin's bearer token; the API server listens on loopback only.
const token = "apiservertest-admin"

// Start runs etcd and kube-apiserver for the test's lifetime and waits until the
// API server is ready.
func Start(t testing.TB) *Cluster {
	t.Helper()
	apiserver := K8sBin(t, "kube-apiserver")
	etcd := Etcd(t)
	dir := t.TempDir()
	ports := FreePorts(t, 3)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	write(t, saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	tokens := filepath.Join(dir, "tokens.csv")
	write(t, tokens, []byte(token+",admin,admin,system:masters\n"))

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	start(t, dir, "etcd", etcd, "--name", "t", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "t="+peerURL)
	start(t, dir, "kube-apiserver", apiserver,
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[2]), "--advertise-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", tokens,
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", "10.96.0.0/12", "--authorization-mode", "RBAC",
		"--endpoint-reconciler-type", "none")

	c := &Cluster{Server: "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])), Dir: dir}
	waitReady(t, c.Server)
	c.Config = &rest.Config{Host: c.Server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	c.Kubeconfig = fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: t, context: {cluster: t, user: admin}}]
current-context: t
`, c.Server, token)
	return c
}

// K8sBin finds a Kubernetes binary built by scripts/build-k8s.sh (make k8s-bins)
// at the default Kubernetes version, or skips.
func K8sBin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("PLINTH_K8S_BIN")
	if dir == "" {
		dir = filepath.Join(cacheDir(), "k8s", api.DefaultKubernetesVersion)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("needs %s %s in %s: run `make k8s-bins` (scripts/build-k8s.sh)", name, api.DefaultKubernetesVersion, dir)
	}
	return p
}

// Etcd finds etcd: the one in $PATH (Debian etcd-server, which make deps
// installs), else any version the bundle build cached; or skips.
func Etcd(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	if m, _ := filepath.Glob(filepath.Join(cacheDir(), "etcd", "*", "etcd")); len(m) > 0 {
		return m[len(m)-1]
	}
	t.Skip("needs etcd (Debian etcd-server; make deps installs it)")
	return ""
}

func cacheDir() string {
	if c := os.Getenv("PLINTH_CACHE"); c != "" {
		return c
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "plinth")
}

// FreePorts returns n TCP ports free on 127.0.0.1 at the time of the call.
func FreePorts(t testing.TB, n int) []int {
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

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// start runs a process until the test ends (cleanups run last-in first-out: the
// API server stops before etcd); a failed test logs the tail of its output.
func start(t testing.TB, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test
	if err := cmd.Start(); err != nil {
		log.Close()
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
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 30 {
				lines = lines[len(lines)-30:]
			}
			t.Logf("%s log tail:\n%s", name, strings.Join(lines, "\n"))
		}
	})
}

func waitReady(t testing.TB, server string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(server + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver at %s not ready within 60s", server)
}
