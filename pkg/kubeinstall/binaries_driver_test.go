package kubeinstall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// writeTestBundle lays out a small bundle version under root's bundle directory:
// real files whose sums the manifest records.
func writeTestBundle(t *testing.T, root, version string, files map[string]string) (manifestSum string) {
	t.Helper()
	dir := filepath.Join(root, bundle.VersionDir(bundle.DefaultRoot, version))
	m := bundle.Manifest{Version: version, PlinthVersion: "test", KubernetesVersion: "v1.37.2"}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		kind := bundle.KindBinary
		if strings.HasPrefix(rel, bundle.CNIDir+"/") {
			kind = bundle.KindCNI
		}
		m.Components = append(m.Components, bundle.Component{Name: filepath.Base(rel), Kind: kind, Version: "v1.37.2",
			Path: rel, SHA256: sha256Hex([]byte(content)), Size: int64(len(content))})
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha256Hex(raw)
}

func TestBinariesDriverInstallsFromBundleAndIsIdempotent(t *testing.T) {
	h := newFakeHost(t)
	sum := writeTestBundle(t, h.root, "1.0", map[string]string{
		"bin/kubelet": "kubelet-1", "bin/kubeadm": "kubeadm-1", "bin/kubectl": "kubectl-1", "cni/bridge": "bridge-1",
	})
	state := t.TempDir()
	d := NewBinariesDriver(state, bundle.DefaultRoot, h.opts...)
	in := kubespec.BinariesInputs{Bundle: "1.0", SHA256: sum, Binaries: []string{"kubeadm", "kubectl", "kubelet"}, CNIPlugins: true, Kubelet: true}
	raw, _ := json.Marshal(in)
	// The runner double makes the link `systemctl enable` makes.
	wants := h.p.Join("/etc/systemd/system/multi-user.target.wants/kubelet.service")
	h.run.effects["systemctl enable kubelet.service"] = func() error {
		if err := os.MkdirAll(filepath.Dir(wants), 0o755); err != nil {
			return err
		}
		return os.Symlink("/etc/systemd/system/kubelet.service", wants)
	}
	if res := driver.Run(context.Background(), d, raw); !res.OK() {
		t.Fatalf("first run: %+v", res)
	}
	for p, want := range map[string]string{"/usr/local/bin/kubelet": "kubelet-1", "/opt/cni/bin/bridge": "bridge-1"} {
		got, err := os.ReadFile(h.p.Join(p))
		if err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	if !sameFile(h.p.Join("/etc/systemd/system/kubelet.service"), kubeletUnitFile) {
		t.Fatal("kubelet unit not written")
	}
	cmds := strings.Join(h.run.take(), "\n")
	if !strings.Contains(cmds, "systemctl enable kubelet.service") {
		t.Fatalf("kubelet not enabled: %s", cmds)
	}
	// A new process (each drift pass is one) finds the installed files' sums in the
	// driver's state instead of reading the files again, once the files are old
	// enough for their version to say they are unchanged (pkg/filememo), and asks
	// systemctl nothing.
	time.Sleep(2100 * time.Millisecond)
	for pass, wantHashed := range []int64{4, 0} {
		d = NewBinariesDriver(state, bundle.DefaultRoot, h.opts...)
		if cs, err := d.Diff(context.Background(), raw); err != nil || len(cs) != 0 {
			t.Fatalf("diff %d: %v %v", pass, driver.Summaries(cs), err)
		}
		if n := d.hashed.Load(); n != wantHashed {
			t.Fatalf("drift check %d of unchanged files hashed %d of them, want %d", pass, n, wantHashed)
		}
		if cmds := h.run.take(); len(cmds) != 0 {
			t.Fatalf("drift check %d ran %q", pass, cmds)
		}
	}
	// kubelet disabled behind the driver's back is enabled again.
	if err := os.Remove(wants); err != nil {
		t.Fatal(err)
	}
	if cs, err := d.Diff(context.Background(), raw); err != nil || driver.Summaries(cs) != "enable kubelet.service" {
		t.Fatalf("diff with kubelet disabled: %v %v", driver.Summaries(cs), err)
	}
	if res := driver.Run(context.Background(), d, raw); !res.OK() {
		t.Fatalf("enable again: %+v", res)
	}
	// A file changed behind the driver's back is read again, and found.
	if err := os.WriteFile(h.p.Join("/usr/local/bin/kubectl"), []byte("kubectl-X"), 0o755); err != nil {
		t.Fatal(err)
	}
	d = NewBinariesDriver(state, bundle.DefaultRoot, h.opts...)
	if cs, err := d.Diff(context.Background(), raw); err != nil || len(cs) != 1 || !strings.HasPrefix(cs[0].Summary, "replace kubectl") || d.hashed.Load() != 1 {
		t.Fatalf("diff after kubectl changed: %v %v (hashed %d)", driver.Summaries(cs), err, d.hashed.Load())
	}
	if res := driver.Run(context.Background(), d, raw); !res.OK() {
		t.Fatalf("repair: %+v", res)
	}

	// A new bundle version replaces what changed, and only that.
	sum2 := writeTestBundle(t, h.root, "1.1", map[string]string{
		"bin/kubelet": "kubelet-2", "bin/kubeadm": "kubeadm-1", "bin/kubectl": "kubectl-1", "cni/bridge": "bridge-1",
	})
	in.Bundle, in.SHA256 = "1.1", sum2
	raw, _ = json.Marshal(in)
	cs, err := d.Diff(context.Background(), raw)
	if err != nil || len(cs) != 1 || !strings.HasPrefix(cs[0].Summary, "replace kubelet") {
		t.Fatalf("upgrade diff: %v %v", driver.Summaries(cs), err)
	}
	if res := driver.Run(context.Background(), d, raw); !res.OK() {
		t.Fatalf("upgrade: %+v", res)
	}
	if got, _ := os.ReadFile(h.p.Join("/usr/local/bin/kubelet")); string(got) != "kubelet-2" {
		t.Fatalf("kubelet after upgrade: %q", got)
	}
}

func TestBinariesDriverRefusesBadBundles(t *testing.T) {
	h := newFakeHost(t)
	sum := writeTestBundle(t, h.root, "1.0", map[string]string{"bin/etcd": "etcd-1"})
	d := NewBinariesDriver(t.TempDir(), bundle.DefaultRoot, h.opts...)
	run := func(in kubespec.BinariesInputs) driver.Result {
		raw, _ := json.Marshal(in)
		return driver.Run(context.Background(), d, raw)
	}
	for name, tc := range map[string]struct {
		in   kubespec.BinariesInputs
		want string
	}{
		"absent version":   {kubespec.BinariesInputs{Bundle: "2.0", Binaries: []string{"etcd"}}, "bundle 2.0 is not on this host"},
		"pin mismatch":     {kubespec.BinariesInputs{Bundle: "1.0", SHA256: strings.Repeat("0", 64), Binaries: []string{"etcd"}}, "the site pins"},
		"unknown binary":   {kubespec.BinariesInputs{Bundle: "1.0", SHA256: sum, Binaries: []string{"etcdctl"}}, `no binary component "etcdctl"`},
		"escaping version": {kubespec.BinariesInputs{Bundle: "../etc", Binaries: []string{"etcd"}}, "not valid"},
	} {
		res := run(tc.in)
		if res.OK() || res.Retryable || !strings.Contains(res.Error, tc.want) {
			t.Errorf("%s: %+v; want a permanent error with %q", name, res, tc.want)
		}
	}
	// A bundle file damaged after unpacking never replaces the installed binary.
	if err := os.WriteFile(filepath.Join(h.root, "/opt/plinth/bundle/1.0/bin/etcd"), []byte("etcd-X"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(kubespec.BinariesInputs{Bundle: "1.0", SHA256: sum, Binaries: []string{"etcd"}})
	if res.OK() || !strings.Contains(res.Error, "the bundle is damaged") {
		t.Fatalf("damaged file: %+v", res)
	}
	if _, err := os.Stat(h.p.Join("/usr/local/bin/etcd")); !os.IsNotExist(err) {
		t.Fatalf("damaged file installed: %v", err)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
