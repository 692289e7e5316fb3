package containerd

import (
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
)

func TestRenderConfig(t *testing.T) {
	p := Paths{}.withDefaults()
	in := containerdspec.ConfigInputs{SandboxImage: "registry.k8s.io/pause:3.10.2", CgroupDriver: "systemd", Snapshotter: "overlayfs"}
	got := string(renderConfig(p, in))
	mustContain(t, "config.toml", got,
		"version = 2\n",
		`root = "/var/lib/containerd"`,
		`address = "/run/containerd/containerd.sock"`,
		`sandbox_image = "registry.k8s.io/pause:3.10.2"`,
		`snapshotter = "overlayfs"`,
		"SystemdCgroup = true",
		`config_path = "/etc/containerd/certs.d"`,
	)
	for _, absent := range []string{"BinaryName", "[plugins.\"io.containerd.grpc.v1.cri\".cni]"} {
		if strings.Contains(got, absent) {
			t.Errorf("config.toml sets %s without being asked:\n%s", absent, got)
		}
	}

	p.RuncBinary, p.CNIBinDir = "/opt/lab/runc-wrap", "/opt/lab/cni"
	in.CgroupDriver = "cgroupfs"
	got = string(renderConfig(p, in))
	mustContain(t, "config.toml", got, "SystemdCgroup = false", `BinaryName = "/opt/lab/runc-wrap"`, `bin_dir = "/opt/lab/cni"`)
	if strings.Contains(got, "conf_dir") {
		t.Errorf("unset CNI conf dir rendered:\n%s", got)
	}
}

func TestRenderHosts(t *testing.T) {
	got := string(renderHosts(containerdspec.Mirror{Registry: "docker.io", Endpoints: []string{"https://a.local", "http://b.local:5000"}, SkipVerify: true}))
	if !strings.HasPrefix(got, ownerMark) {
		t.Fatalf("hosts.toml lacks the owner mark:\n%s", got)
	}
	a, b := strings.Index(got, `[host."https://a.local"]`), strings.Index(got, `[host."http://b.local:5000"]`)
	if a < 0 || b < a {
		t.Fatalf("mirrors missing or out of order:\n%s", got)
	}
	if strings.Count(got, "skip_verify = true") != 2 || strings.Contains(got, "server =") {
		t.Fatalf("hosts.toml:\n%s", got)
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:      `"plain"`,
		`a"b\c`:      `"a\"b\\c"`,
		"tab\tnl\n":  `"tab\tnl\n"`,
		"<&>":        `"<&>"`,
		"ctl\x01end": `"ctl\u0001end"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}
