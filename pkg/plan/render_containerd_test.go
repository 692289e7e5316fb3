package plan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
)

func containerdSite(k *api.KubernetesSpec) *api.Site {
	s := &api.Site{Metadata: api.ObjectMeta{Name: "lab"}}
	s.Spec.Kubernetes = k
	return s
}

func containerdHosts(names ...string) []api.Host {
	var hs []api.Host
	for _, n := range names {
		hs = append(hs, api.Host{Metadata: api.ObjectMeta{Name: n}})
	}
	return hs
}

func stepsByID(steps []Step) map[string]Step {
	m := map[string]Step{}
	for _, s := range steps {
		m[s.ID] = s
	}
	return m
}

func TestRenderContainerdNeedsKubernetes(t *testing.T) {
	steps, err := Render(containerdSite(nil), containerdHosts("c1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Kind == containerdspec.KindConfig || s.Kind == containerdspec.KindImport {
			t.Fatalf("site without kubernetes rendered %s", s.ID)
		}
	}
}

func TestRenderContainerdEveryHostInOrder(t *testing.T) {
	steps, err := Render(containerdSite(&api.KubernetesSpec{}), containerdHosts("w1", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	byID := stepsByID(steps)
	for _, h := range []string{"c1", "w1"} {
		cfg, ok := byID[h+"/containerd.config"]
		if !ok {
			t.Fatalf("%s: no containerd.config step", h)
		}
		if !slices.Equal(cfg.Deps, []string{h + "/host.network"}) {
			t.Errorf("%s config deps = %v", h, cfg.Deps)
		}
		imp := byID[h+"/images.import"]
		if !slices.Equal(imp.Deps, []string{h + "/containerd.config", h + "/host.network"}) {
			t.Errorf("%s import deps = %v", h, imp.Deps)
		}
	}
	// Defaults: the pause image kubeadm expects, systemd cgroups, overlayfs.
	var in containerdspec.ConfigInputs
	if err := json.Unmarshal(byID["c1/containerd.config"].Inputs, &in); err != nil {
		t.Fatal(err)
	}
	want := containerdspec.ConfigInputs{SandboxImage: "registry.k8s.io/pause:3.10.2", CgroupDriver: "systemd", Snapshotter: "overlayfs"}
	if in.SandboxImage != want.SandboxImage || in.CgroupDriver != want.CgroupDriver || in.Snapshotter != want.Snapshotter || in.Mirrors != nil {
		t.Fatalf("default inputs = %+v, want %+v", in, want)
	}
}

func TestRenderContainerdInputs(t *testing.T) {
	k := &api.KubernetesSpec{ImageRepository: "registry.local/k8s", Containerd: &api.ContainerdSpec{
		CgroupDriver: "cgroupfs",
		Mirrors: map[string]api.RegistryMirror{
			"registry.k8s.io": {Endpoints: []string{"https://m1.local", "http://m2.local:5000"}},
			"docker.io":       {Endpoints: []string{"https://m3.local"}, SkipVerify: true},
		},
		ImageArchives: []api.ImageArchive{{Path: "/srv/images/pause.tar"}, {Path: "/srv/images/k8s.tar", Digest: "sha256:" + sixtyFour}},
	}}
	steps, err := Render(containerdSite(k), containerdHosts("c1"))
	if err != nil {
		t.Fatal(err)
	}
	byID := stepsByID(steps)
	var cfg containerdspec.ConfigInputs
	if err := json.Unmarshal(byID["c1/containerd.config"].Inputs, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.SandboxImage != "registry.local/k8s/pause:3.10.2" || cfg.CgroupDriver != "cgroupfs" {
		t.Errorf("config inputs = %+v", cfg)
	}
	if len(cfg.Mirrors) != 2 || cfg.Mirrors[0].Registry != "docker.io" || !cfg.Mirrors[0].SkipVerify ||
		!slices.Equal(cfg.Mirrors[1].Endpoints, []string{"https://m1.local", "http://m2.local:5000"}) {
		t.Errorf("mirrors not sorted by registry with endpoints in order: %+v", cfg.Mirrors)
	}
	var imp containerdspec.ImportInputs
	if err := json.Unmarshal(byID["c1/images.import"].Inputs, &imp); err != nil {
		t.Fatal(err)
	}
	if imp.Snapshotter != "overlayfs" || len(imp.Archives) != 2 || imp.Archives[1].Digest != "sha256:"+sixtyFour {
		t.Errorf("import inputs = %+v", imp)
	}

	// The import hash covers archive paths and digests; the config hash does not.
	k.Containerd.ImageArchives[1].Digest = "sha256:" + sixtyFour[1:] + "0"
	again, err := Render(containerdSite(k), containerdHosts("c1"))
	if err != nil {
		t.Fatal(err)
	}
	byID2 := stepsByID(again)
	if byID2["c1/images.import"].InputsHash == byID["c1/images.import"].InputsHash {
		t.Error("changed archive digest kept the images.import hash")
	}
	if byID2["c1/containerd.config"].InputsHash != byID["c1/containerd.config"].InputsHash {
		t.Error("changed archive digest changed the containerd.config hash")
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Each host imports only the bundle images it runs: controllers all, other nodes all
// but the control plane's, the witness none.
func TestRenderContainerdImagesPerRole(t *testing.T) {
	s, hs := kubeSite(true, &api.KubernetesSpec{ControlPlaneVIP: "10.50.0.10", Bundle: &api.BundleRef{Version: "1.2.3", SHA256: strings.Repeat("a", 64)}})
	steps, err := Render(s, hs)
	if err != nil {
		t.Fatal(err)
	}
	by := stepsByID(steps)
	for host, want := range map[string]struct {
		bundle string
		skip   []string
	}{
		"ctl-0":     {"1.2.3", nil},
		"ctl-1":     {"1.2.3", nil},
		"compute-0": {"1.2.3", bundle.ControlPlaneImages},
		"wit-0":     {"", nil},
	} {
		in := inputsOf[containerdspec.ImportInputs](t, by[host+"/images.import"])
		if in.Bundle != want.bundle || !slices.Equal(in.SkipBundleImages, want.skip) {
			t.Errorf("%s: bundle %q skip %v, want %q %v", host, in.Bundle, in.SkipBundleImages, want.bundle, want.skip)
		}
	}
}
