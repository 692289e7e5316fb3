package api

import (
	"strings"
	"testing"
)

// containerdYAML is a site's kubernetes.containerd section as an operator writes it.
const containerdYAML = `
    containerd:
      sandboxImage: registry.local/k8s/pause:3.10.2
      cgroupDriver: cgroupfs
      mirrors:
        docker.io: {endpoints: [https://mirror.local]}
        "10.0.1.5:5000": {endpoints: ["http://10.0.1.5:5000"], skipVerify: true}
        _default: {endpoints: [https://mirror.local/all]}
      imageArchives:
      - path: /var/lib/plinth/images/k8s.tar
        digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      - path: /var/lib/plinth/images/extra.tar
`

func withContainerd(t *testing.T) *Manifest {
	t.Helper()
	y := strings.Replace(exampleYAML, "    controlPlaneVIP: 10.0.1.10\n", "    controlPlaneVIP: 10.0.1.10"+containerdYAML, 1)
	m, err := Decode("site.yaml", []byte(y))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m
}

func TestContainerdDecodesAndValidates(t *testing.T) {
	m := withContainerd(t)
	c := m.Site.Spec.Kubernetes.Containerd
	if c == nil || len(c.Mirrors) != 3 || !c.Mirrors["10.0.1.5:5000"].SkipVerify || len(c.ImageArchives) != 2 {
		t.Fatalf("decoded %+v", c)
	}
	if errs := containerdErrs(m.Validate("site.yaml")); len(errs) != 0 {
		t.Fatalf("valid containerd section: %v", errs)
	}
}

// containerdErrs keeps the errors under kubernetes.containerd, so these tests do not
// depend on the other areas' rules for the example site.
func containerdErrs(errs ErrorList) ErrorList {
	var out ErrorList
	for _, e := range errs {
		if strings.HasPrefix(e.Path, "site.spec.kubernetes.containerd") {
			out = append(out, e)
		}
	}
	return out
}

func TestValidateContainerdRules(t *testing.T) {
	const p = "site.spec.kubernetes.containerd"
	c := func(m *Manifest) *ContainerdSpec { return m.Site.Spec.Kubernetes.Containerd }
	tests := []struct {
		name, path, msg string
		mutate          func(m *Manifest)
	}{
		{"sandbox image", p + ".sandboxImage", "not a valid image reference", func(m *Manifest) { c(m).SandboxImage = "Pause::1" }},
		{"cgroup driver", p + ".cgroupDriver", `"v2" is not valid; valid values are systemd, cgroupfs`, func(m *Manifest) { c(m).CgroupDriver = "v2" }},
		{"snapshotter", p + ".snapshotter", `"aufs" is not valid`, func(m *Manifest) { c(m).Snapshotter = "aufs" }},
		{"registry", p + `.mirrors["docker.io/library"]`, "is not a registry", func(m *Manifest) {
			c(m).Mirrors["docker.io/library"] = RegistryMirror{Endpoints: []string{"https://m.local"}}
		}},
		{"no endpoints", p + `.mirrors["docker.io"].endpoints`, "required", func(m *Manifest) { c(m).Mirrors["docker.io"] = RegistryMirror{} }},
		{"endpoint scheme", p + `.mirrors["docker.io"].endpoints[0]`, "not an http(s) URL", func(m *Manifest) {
			c(m).Mirrors["docker.io"] = RegistryMirror{Endpoints: []string{"mirror.local"}}
		}},
		{"endpoint credentials", p + `.mirrors["docker.io"].endpoints[0]`, "must not carry credentials", func(m *Manifest) {
			c(m).Mirrors["docker.io"] = RegistryMirror{Endpoints: []string{"https://u:p@mirror.local"}}
		}},
		{"endpoint twice", p + `.mirrors["docker.io"].endpoints[1]`, "listed twice", func(m *Manifest) {
			c(m).Mirrors["docker.io"] = RegistryMirror{Endpoints: []string{"https://m.local", "https://m.local"}}
		}},
		{"archive relative", p + ".imageArchives[1].path", "absolute, clean path", func(m *Manifest) { c(m).ImageArchives[1].Path = "images/x.tar" }},
		{"archive unclean", p + ".imageArchives[1].path", "absolute, clean path", func(m *Manifest) { c(m).ImageArchives[1].Path = "/a/../x.tar" }},
		{"archive twice", p + ".imageArchives[1].path", "listed twice", func(m *Manifest) { c(m).ImageArchives[1].Path = c(m).ImageArchives[0].Path }},
		{"archive digest", p + ".imageArchives[0].digest", "is not a digest", func(m *Manifest) { c(m).ImageArchives[0].Digest = "md5:abc" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := withContainerd(t)
			tt.mutate(m)
			errs := containerdErrs(m.Validate("site.yaml"))
			if !findError(errs, tt.path, tt.msg) || len(errs) != 1 {
				t.Fatalf("want only %s: ...%s...; got:\n%v", tt.path, tt.msg, errs)
			}
		})
	}
}

func TestIsRegistryHost(t *testing.T) {
	for s, want := range map[string]bool{
		"docker.io": true, "registry.k8s.io": true, "localhost:5000": true, "10.0.0.5": true, "10.0.0.5:5000": true,
		"[fd00::5]:5000": true, "fd00::5": false, "Docker.io": false, "a/b": false, "host:0": false, "host:99999": false,
		"": false, ".": false, "..": false, "-a.io": false,
	} {
		if got := isRegistryHost(s); got != want {
			t.Errorf("isRegistryHost(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEffectiveContainerd(t *testing.T) {
	k := &KubernetesSpec{}
	c := k.EffectiveContainerd()
	if c.SandboxImage != "registry.k8s.io/pause:3.10.2" || c.CgroupDriver != "systemd" || c.Snapshotter != "overlayfs" {
		t.Fatalf("defaults = %+v", c)
	}
	k.ImageRepository = "registry.local/k8s"
	k.Containerd = &ContainerdSpec{Mirrors: map[string]RegistryMirror{"docker.io": {Endpoints: []string{"https://m"}}}}
	c = k.EffectiveContainerd()
	if c.SandboxImage != "registry.local/k8s/pause:3.10.2" {
		t.Fatalf("sandbox image = %s", c.SandboxImage)
	}
	delete(c.Mirrors, "docker.io")
	if len(k.Containerd.Mirrors) != 1 || k.Containerd.SandboxImage != "" {
		t.Fatal("EffectiveContainerd changed the spec")
	}
}
