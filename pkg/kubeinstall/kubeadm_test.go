package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// k8sBin finds a Kubernetes binary built by scripts/build-k8s.sh (make k8s-bins), or
// skips: these tests run the real kubeadm and API server.
func k8sBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("PLINTH_K8S_BIN")
	if dir == "" {
		cache := os.Getenv("PLINTH_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "plinth")
		}
		dir = filepath.Join(cache, "k8s", api.DefaultKubernetesVersion)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("needs %s %s in %s: run `make k8s-bins` (scripts/build-k8s.sh)", name, api.DefaultKubernetesVersion, dir)
	}
	return p
}

// nodeConfigs renders every kubeadm configuration of the sample site with secrets
// resolved: "init" for ctl-0 and the join configurations by host.
type nodeConfigs struct {
	init  InitDocs
	joins map[string]JoinConfiguration
	in    kubespec.InitInputs
	jin   map[string]kubespec.JoinInputs
}

func renderConfigs(t *testing.T, steps map[string]plan.Step, sec *secrets, p Paths) nodeConfigs {
	t.Helper()
	nc := nodeConfigs{joins: map[string]JoinConfiguration{}, jin: map[string]kubespec.JoinInputs{}}
	for id, st := range steps {
		raw := func() json.RawMessage { return sec.resolve(t, st) }
		switch st.Kind {
		case kubespec.KindInit:
			if err := json.Unmarshal(raw(), &nc.in); err != nil {
				t.Fatal(err)
			}
			d, err := InitConfig(nc.in, p)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			nc.init = d
		case kubespec.KindJoin, kubespec.KindJoinControlPlane:
			var in kubespec.JoinInputs
			if err := json.Unmarshal(raw(), &in); err != nil {
				t.Fatal(err)
			}
			j, err := JoinConfig(in, p)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			nc.joins[st.Host], nc.jin[st.Host] = j, in
		}
	}
	return nc
}

func writeYAML(t *testing.T, dir, name string, data []byte, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func kubeadmRun(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Every configuration Plinth renders for the sample site (2 controllers, a witness,
// 3 workers) passes `kubeadm config validate`.
func TestKubeadmValidatesEveryRenderedConfig(t *testing.T) {
	kubeadm := k8sBin(t, "kubeadm")
	steps := renderSite(t, siteOpts{net: "10.213.7", witness: true})
	sec := newSecrets()
	sec.setOutputs("ctl-0/kube.init", map[string]string{kubespec.OutputCACertHash: "sha256:" + strings.Repeat("ab", 32)})
	nc := renderConfigs(t, steps, sec, Paths{})
	if len(nc.joins) != 4 {
		t.Fatalf("want joins for ctl-1 and 3 workers, got %d", len(nc.joins))
	}
	dir := t.TempDir()
	b, err := nc.init.YAML()
	files := map[string]string{"ctl-0": writeYAML(t, dir, "ctl-0.yaml", b, err)}
	for host, j := range nc.joins {
		b, err := JoinYAML(j)
		files[host] = writeYAML(t, dir, host+".yaml", b, err)
	}
	if testing.Verbose() {
		b, _ := os.ReadFile(files["ctl-0"])
		c, _ := os.ReadFile(files["compute-1"])
		t.Logf("ctl-0:\n%s\ncompute-1:\n%s", b, c)
	}
	for host, f := range files {
		if out, err := kubeadmRun(t, nil, kubeadm, "config", "validate", "--config", f); err != nil {
			b, _ := os.ReadFile(f)
			t.Errorf("%s: kubeadm config validate: %v\n%s\n--- config:\n%s", host, err, out, b)
		}
	}
}

// kubeadm init --dry-run accepts the first controller's configuration, offline.
func TestKubeadmInitDryRun(t *testing.T) {
	kubeadm := k8sBin(t, "kubeadm")
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare (kubeadm's dry run reads interfaces; unshare -n keeps it off the network)")
	}
	steps := renderSite(t, siteOpts{net: "10.213.7", witness: true})
	sec := newSecrets()
	sec.setOutputs("ctl-0/kube.init", map[string]string{kubespec.OutputCACertHash: "sha256:" + strings.Repeat("ab", 32)})
	root := t.TempDir()
	nc := renderConfigs(t, steps, sec, Paths{Root: root})
	// This machine has no CRI or kubelet: skip every preflight check (kubeadm
	// refuses "all" next to the checks Plinth names).
	nc.init.Init.NodeRegistration.IgnorePreflightErrors = []string{"all"}
	b, err := nc.init.YAML()
	f := writeYAML(t, root, "init.yaml", b, err)
	dry := filepath.Join(root, "dryrun")
	start := time.Now()
	out, err := kubeadmRun(t, []string{"KUBEADM_INIT_DRYRUN_DIR=" + dry},
		"unshare", "-n", kubeadm, "init", "--config", f, "--dry-run")
	if err != nil {
		t.Fatalf("kubeadm init --dry-run: %v\n%s", err, tail(out, 30))
	}
	t.Logf("kubeadm init --dry-run ok in %s", time.Since(start).Round(10*time.Millisecond))
	for _, want := range []string{"controlPlaneEndpoint: 10.213.7.10", fmt.Sprintf("- https://10.213.7.11:%d", 2379)} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
}

// A host profile changes only what its machine forces, and real hosts get none of it.
func TestInitDocsForHostProfile(t *testing.T) {
	in := kubespec.InitInputs{Cluster: kubespec.Cluster{Endpoint: "10.0.0.10:6443", CgroupDriver: "cgroupfs", ProxyMode: "nftables"},
		Node: kubespec.Node{Name: "c0", IP: "10.0.0.11"}, TokenTTL: "1h"}
	d, err := InitConfig(in, Paths{})
	if err != nil {
		t.Fatal(err)
	}
	real := d.ForHost(hostprofile.Profile{})
	if real.Kubelet.FailCgroupV1 != nil || real.Proxy.Conntrack.MaxPerCore != nil || len(real.Init.NodeRegistration.IgnorePreflightErrors) != len(preflightIgnored) {
		t.Fatalf("a real host got profile settings: %+v", real)
	}
	lab := d.ForHost(hostprofile.NspawnLab)
	if lab.Kubelet.FailCgroupV1 == nil || *lab.Kubelet.FailCgroupV1 || lab.Proxy.Conntrack.MaxPerCore == nil || *lab.Proxy.Conntrack.MaxPerCore != 0 {
		t.Fatalf("nspawn-lab kubelet/proxy: %+v %+v", lab.Kubelet, lab.Proxy.Conntrack)
	}
	got := lab.Init.NodeRegistration.IgnorePreflightErrors
	if !slices.Contains(got, "SystemVerification") || !slices.Contains(got, "ExternalEtcdVersion") {
		t.Fatalf("nspawn-lab preflight ignores %v", got)
	}
	if d.Kubelet.FailCgroupV1 != nil {
		t.Fatal("ForHost changed its receiver's kubelet config")
	}
	// Rendering keeps the zero values the profile set on purpose.
	y, err := lab.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"failCgroupV1: false", "imagefs.available: 1%", "maxPerCore: 0", "tcpCloseWaitTimeout: 0s", "tcpEstablishedTimeout: 0s"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("rendered init config lacks %q:\n%s", want, y)
		}
	}
	if y, _ := real.YAML(); strings.Contains(string(y), "failCgroupV1") || strings.Contains(string(y), "conntrack") || strings.Contains(string(y), "evictionHard") {
		t.Errorf("a real host's config names profile fields:\n%s", y)
	}
	j := JoinForHost(JoinConfiguration{}, hostprofile.NspawnLab)
	if !slices.Contains(j.NodeRegistration.IgnorePreflightErrors, "FileContent--proc-sys-net-ipv4-ip_forward") {
		t.Fatalf("join ignores %v", j.NodeRegistration.IgnorePreflightErrors)
	}
}
