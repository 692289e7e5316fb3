package kubeinstall

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// fakeRunner records commands and plays their effect on the host and the cluster.
type fakeRunner struct {
	mu      sync.Mutex
	cmds    []string
	effects map[string]func() error // by "name arg0 arg1"
}

func (r *fakeRunner) Run(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := strings.Join(append([]string{name}, args...), " ")
	r.cmds = append(r.cmds, line)
	for prefix, f := range r.effects {
		if strings.HasPrefix(line, prefix) {
			return nil, f()
		}
	}
	return nil, nil
}

func (r *fakeRunner) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.cmds
	r.cmds = nil
	return out
}

// clientsetAPI is API over a client-go clientset, for tests: over client-go's fake
// clientset in the drivers' unit tests, over a real one to check what restAPI does.
type clientsetAPI struct{ cs kubernetes.Interface }

func (a clientsetAPI) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return a.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (a clientsetAPI) NodeExists(ctx context.Context, name string) (bool, error) {
	_, err := a.Node(ctx, name)
	return found(err)
}

func (a clientsetAPI) Nodes(ctx context.Context) ([]corev1.Node, error) {
	l, err := a.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (a clientsetAPI) PatchNode(ctx context.Context, name string, patch []byte) error {
	_, err := a.cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

func (a clientsetAPI) UpdateNode(ctx context.Context, n *corev1.Node) error {
	_, err := a.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

func (a clientsetAPI) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	return a.cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
}

func (a clientsetAPI) Secrets(ctx context.Context, sel string) ([]corev1.Secret, error) {
	l, err := a.cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (a clientsetAPI) DeleteSecret(ctx context.Context, name string) error {
	return a.cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{})
}

// host is a fake host: a root directory, a fake cluster and a fake kubeadm.
type fakeHost struct {
	t    *testing.T
	root string
	p    Paths
	cs   *fake.Clientset
	run  *fakeRunner
	opts []Option
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{t: t, root: t.TempDir(), cs: fake.NewClientset(), run: &fakeRunner{effects: map[string]func() error{}}}
	h.p = Paths{Root: h.root}
	h.opts = []Option{WithRoot(h.root), WithRunner(h.run),
		WithClients(func([]byte) (API, error) { return clientsetAPI{h.cs}, nil })}
	return h
}

func (h *fakeHost) write(path string, data string) {
	h.t.Helper()
	if err := writeFile(h.p.Join(path), []byte(data), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) node(name string) {
	_, _ = h.cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
}

func (h *fakeHost) secret(name string, data map[string]string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}, StringData: nil, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	if strings.HasPrefix(name, "bootstrap-token-") {
		s.Type = corev1.SecretTypeBootstrapToken
	}
	_, _ = h.cs.CoreV1().Secrets("kube-system").Create(context.Background(), s, metav1.CreateOptions{})
}

// stepInputs renders the sample site and resolves one step's inputs.
func stepInputs(t *testing.T, sec *secrets, id string) json.RawMessage {
	t.Helper()
	sec.setOutputs("ctl-0/kube.init", map[string]string{kubespec.OutputCACertHash: "sha256:" + strings.Repeat("cd", 32), kubespec.OutputAdminConf: "kubeconfig"})
	st, ok := renderSite(t, siteOpts{net: "10.213.7", witness: true})[id]
	if !ok {
		t.Fatalf("no step %s", id)
	}
	return sec.resolve(t, st)
}

func summaries(cs []driver.Change) string { return driver.Summaries(cs) }

func TestInitDriverInitsOnceAndKeepsJoinCredentials(t *testing.T) {
	h := newFakeHost(t)
	sec := newSecrets()
	raw := stepInputs(t, sec, "ctl-0/kube.init")
	var in kubespec.InitInputs
	_ = json.Unmarshal(raw, &in)
	ca, _ := certs.NewCA("kubernetes", time.Now())
	h.run.effects["kubeadm init --config"] = func() error {
		h.write(adminConf, "admin kubeconfig")
		h.write(apiServerManifest, "pod")
		h.write(pkiDir+"/ca.crt", ca)
		h.node("ctl-0")
		h.secret(tokenSecret(tokenID(in.Token)), map[string]string{"token-id": tokenID(in.Token), "description": TokenDescription})
		h.secret("kubeadm-certs", nil)
		return nil
	}
	d := NewInitDriver(filepath.Join(h.root, "state"), h.opts...)
	ctx := context.Background()

	res := driver.Run(ctx, d, raw)
	if !res.OK() {
		t.Fatal(res.Error)
	}
	if cmds := h.run.take(); len(cmds) != 1 || cmds[0] != "kubeadm init --config "+h.p.Join(initConfigFile)+" --upload-certs" {
		t.Fatalf("commands %v", cmds)
	}
	if !strings.HasPrefix(res.Outputs[kubespec.OutputCACertHash], "sha256:") || res.Outputs[kubespec.OutputAdminConf] != "admin kubeconfig" {
		t.Fatalf("outputs %v", res.Outputs)
	}
	if st, _ := os.Stat(h.p.Join(initConfigFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("init config holds the token: mode %v", st.Mode())
	}
	if !strings.Contains(strings.Join(res.Changes, "; "), "etcd has 3 members") {
		t.Errorf("the fault-tolerance note belongs in the result: %v", res.Changes)
	}
	if res := driver.Run(ctx, d, raw); !res.OK() || len(res.Changes) != 0 || len(h.run.take()) != 0 {
		t.Fatalf("re-run: %+v", res)
	}

	// The token expired and the uploaded certificates are gone while ctl-1 and the
	// workers have yet to join: both come back. A rotated-out token is deleted.
	_ = h.cs.CoreV1().Secrets("kube-system").Delete(ctx, tokenSecret(tokenID(in.Token)), metav1.DeleteOptions{})
	_ = h.cs.CoreV1().Secrets("kube-system").Delete(ctx, "kubeadm-certs", metav1.DeleteOptions{})
	h.secret(tokenSecret("old000"), map[string]string{"token-id": "old000", "description": TokenDescription})
	h.secret(tokenSecret("other0"), map[string]string{"token-id": "other0", "description": "someone else's"})
	cs, err := d.Diff(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	got := summaries(cs)
	for _, want := range []string{"create bootstrap token " + tokenID(in.Token), "compute-0, compute-1, compute-2",
		"upload control-plane certificates", "for ctl-1", "delete bootstrap token old000"} {
		if !strings.Contains(got, want) {
			t.Errorf("changes lack %q: %s", want, got)
		}
	}
	if strings.Contains(got, "other0") {
		t.Error("someone else's token must stay")
	}
	for _, c := range cs {
		if err := c.Apply(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cmds := strings.Join(h.run.take(), "\n")
	if !strings.Contains(cmds, "kubeadm init phase bootstrap-token") || !strings.Contains(cmds, "kubeadm init phase upload-certs --upload-certs") {
		t.Fatalf("commands: %s", cmds)
	}

	// Everyone joined: no credentials needed; a certificate near expiry is reported.
	for _, n := range []string{"ctl-1", "compute-0", "compute-1", "compute-2"} {
		h.node(n)
	}
	key, _ := certs.ParseCA(ca)
	leaf, _, _ := key.Issue(certs.Request{CommonName: "kube-apiserver", Server: true}, time.Now().Add(-355*24*time.Hour))
	h.write(pkiDir+"/apiserver.crt", string(leaf))
	cs, err = d.Diff(ctx, raw)
	if err != nil || len(cs) != 1 || cs[0].Apply != nil || !strings.Contains(cs[0].Summary, "expire in 9 days") {
		t.Fatalf("expiry: %s %v", summaries(cs), err)
	}
	if res := driver.Run(ctx, d, raw); res.OK() || !strings.Contains(res.Error, "kubeadm certs renew") {
		t.Fatalf("an expiring control plane must fail the step: %+v", res)
	}
}

func TestInitDriverCleansUpOnlyItsOwnFailedInit(t *testing.T) {
	h := newFakeHost(t)
	sec := newSecrets()
	raw := stepInputs(t, sec, "ctl-0/kube.init")
	d := NewInitDriver(filepath.Join(h.root, "state"), h.opts...)
	ctx := context.Background()

	// Someone else's kubeadm state: refused.
	h.write(apiServerManifest, "pod")
	if _, err := d.Diff(ctx, raw); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "Plinth did not create") {
		t.Fatalf("foreign state: %v", err)
	}
	_ = os.Remove(h.p.Join(apiServerManifest))

	// Plinth's init fails half way; the retry resets first and keeps kube-vip's manifest.
	h.write(vipManifest, "kube-vip")
	h.run.effects["kubeadm init --config"] = func() error {
		h.write(apiServerManifest, "pod")
		return errors.New("timed out waiting for the control plane")
	}
	h.run.effects["kubeadm reset"] = func() error { return os.RemoveAll(h.p.Join(manifestsDir)) }
	if res := driver.Run(ctx, d, raw); res.OK() || !res.Retryable {
		t.Fatalf("failed init: %+v", res)
	}
	cs, err := d.Diff(ctx, raw)
	if err != nil || len(cs) != 2 || !strings.HasPrefix(cs[0].Summary, "clean up after a failed kube.init") {
		t.Fatalf("retry plan: %s %v", summaries(cs), err)
	}
	h.run.take()
	if err := cs[0].Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if cmds := h.run.take(); len(cmds) != 1 || !strings.HasPrefix(cmds[0], "kubeadm reset --force --cri-socket unix:///run/containerd/containerd.sock") {
		t.Fatalf("reset: %v", cmds)
	}
	if b, _ := os.ReadFile(h.p.Join(vipManifest)); string(b) != "kube-vip" || exists(h.p.Join(apiServerManifest)) {
		t.Fatal("reset must remove kubeadm's files and keep kube-vip's")
	}
}

// kubeadm init killed after it wrote every file and the API came up, before it
// returned: the attempt marker says its last phases may be missing, so the retry resets
// and runs init again instead of taking the half-initialised control plane as done.
func TestInitDriverRedoesAnInitThatNeverReturned(t *testing.T) {
	h := newFakeHost(t)
	sec := newSecrets()
	raw := stepInputs(t, sec, "ctl-0/kube.init")
	var in kubespec.InitInputs
	_ = json.Unmarshal(raw, &in)
	ca, _ := certs.NewCA("kubernetes", time.Now())
	d := NewInitDriver(filepath.Join(h.root, "state"), h.opts...)
	ctx := context.Background()
	h.run.effects["kubeadm init --config"] = func() error {
		h.write(apiServerManifest, "pod")
		h.write(adminConf, "admin")
		h.node("ctl-0")
		return errors.New("signal: killed")
	}
	if res := driver.Run(ctx, d, raw); res.OK() {
		t.Fatalf("killed init: %+v", res)
	}
	h.run.take()
	cs, err := d.Diff(ctx, raw)
	if err != nil || len(cs) != 2 || !strings.HasPrefix(cs[0].Summary, "clean up after a failed kube.init") ||
		!strings.HasPrefix(cs[1].Summary, "kubeadm init") {
		t.Fatalf("retry plan: %s %v", summaries(cs), err)
	}
	h.run.effects["kubeadm init --config"] = func() error {
		h.write(apiServerManifest, "pod")
		h.write(adminConf, "admin")
		h.write(pkiDir+"/ca.crt", ca)
		h.secret(tokenSecret(tokenID(in.Token)), map[string]string{"token-id": tokenID(in.Token), "description": TokenDescription})
		h.secret("kubeadm-certs", nil)
		return nil
	}
	h.run.effects["kubeadm reset"] = func() error { return os.RemoveAll(h.p.Join(manifestsDir)) }
	if res := driver.Run(ctx, d, raw); !res.OK() {
		t.Fatalf("retry: %+v", res)
	}
	if cmds := h.run.take(); len(cmds) < 2 || !strings.HasPrefix(cmds[0], "kubeadm reset") || !strings.HasPrefix(cmds[1], "kubeadm init --config") {
		t.Fatalf("retry commands: %v", cmds)
	}
	if d.o.attempted(d.Kind()) {
		t.Fatal("a successful init must clear its attempt marker")
	}
}

func TestJoinDriverNeverRejoinsAMember(t *testing.T) {
	h := newFakeHost(t)
	sec := newSecrets()
	raw := stepInputs(t, sec, "compute-1/kube.join")
	h.run.effects["kubeadm join"] = func() error {
		h.write(kubeletConf, "kubelet kubeconfig")
		h.write(kubeletConfigFile, "kubelet config")
		h.node("compute-1")
		return nil
	}
	d := NewJoinDriver(filepath.Join(h.root, "state"), h.opts...)
	ctx := context.Background()
	res := driver.Run(ctx, d, raw)
	if !res.OK() {
		t.Fatal(res.Error)
	}
	got := strings.Join(res.Changes, "; ")
	for _, want := range []string{"reserve CPUs 0-1 for the vswitch", "kubeadm join compute-1 as worker via 10.213.7.10:6443"} {
		if !strings.Contains(got, want) {
			t.Errorf("changes lack %q: %s", want, got)
		}
	}
	patch, _ := os.ReadFile(h.p.Join(patchesDir + "/kubeletconfiguration+merge.yaml"))
	if !strings.Contains(string(patch), `reservedSystemCPUs: "0-1"`) || !strings.Contains(string(patch), "cpuManagerPolicy: static") {
		t.Errorf("kubelet patch: %s", patch)
	}
	if cmds := h.run.take(); len(cmds) != 1 || cmds[0] != "kubeadm join --config "+h.p.Join(joinConfigFile) {
		t.Fatalf("commands %v", cmds)
	}
	if res := driver.Run(ctx, d, raw); !res.OK() || len(res.Changes) != 0 || len(h.run.take()) != 0 {
		t.Fatalf("a member must not be joined again: %+v", res)
	}
	// The wrong driver for the inputs is refused.
	if _, err := NewJoinControlPlaneDriver(t.TempDir(), h.opts...).Diff(ctx, raw); !driver.IsPermanent(err) {
		t.Fatalf("control-plane driver on worker inputs: %v", err)
	}
}

func TestVIPManifest(t *testing.T) {
	h := newFakeHost(t)
	d := NewVIPDriver(t.TempDir(), h.opts...)
	raw := vipInputs(t, "10.213.7", "ctl-0", kubespec.VIPKubeVIP)
	res := driver.Run(context.Background(), d, raw)
	if !res.OK() {
		t.Fatal(res.Error)
	}
	b, _ := os.ReadFile(h.p.Join(vipManifest))
	for _, want := range []string{"value: 10.213.7.10", "value: eth1", "path: /etc/kubernetes/super-admin.conf", "image: registry.local:5000/k8s/kube-vip:"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("manifest lacks %q:\n%s", want, b)
		}
	}
	raw1 := vipInputs(t, "10.213.7", "ctl-1", kubespec.VIPKubeVIP)
	if m, _ := VIPManifest(mustVIP(t, raw1)); !strings.Contains(string(m), "path: /etc/kubernetes/admin.conf") {
		t.Errorf("ctl-1 uses admin.conf:\n%s", m)
	}
}

func mustVIP(t *testing.T, raw json.RawMessage) kubespec.VIPInputs {
	var in kubespec.VIPInputs
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	return in
}
