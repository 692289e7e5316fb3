package containerd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
)

// header starts every file this package writes; its ownerMark marks hosts.toml files
// as ours, so keep that prefix stable.
const (
	ownerMark = "# Written by Plinth"
	header    = ownerMark + " (step " + containerdspec.KindConfig + "); local changes are overwritten.\n"
)

const cri = `plugins."io.containerd.grpc.v1.cri"`

// renderConfig renders config.toml (version 2, read by containerd 1.6 to 2.x).
func renderConfig(p Paths, in containerdspec.ConfigInputs) []byte {
	var b bytes.Buffer
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	b.WriteString(header)
	w(0, "version = 2")
	w(0, "root = %s", tomlString(p.Root))
	w(0, "state = %s", tomlString(p.State))
	w(0, "")
	w(0, "[grpc]")
	w(1, "address = %s", tomlString(p.Address))
	w(0, "")
	w(0, "[plugins]")
	w(1, `[plugins."io.containerd.internal.v1.opt"]`)
	w(2, "path = %s", tomlString(strings.TrimSuffix(p.Root, "/")+"/opt"))
	w(1, "[%s]", cri)
	w(2, "sandbox_image = %s", tomlString(in.SandboxImage))
	w(2, "[%s.containerd]", cri)
	w(3, "snapshotter = %s", tomlString(in.Snapshotter))
	w(3, `default_runtime_name = "runc"`)
	w(3, "[%s.containerd.runtimes.runc]", cri)
	w(4, `runtime_type = "io.containerd.runc.v2"`)
	w(4, "[%s.containerd.runtimes.runc.options]", cri)
	w(5, "SystemdCgroup = %t", in.CgroupDriver == "systemd")
	if p.RuncBinary != "" {
		w(5, "BinaryName = %s", tomlString(p.RuncBinary))
	}
	if p.CNIBinDir != "" || p.CNIConfDir != "" {
		w(2, "[%s.cni]", cri)
		if p.CNIBinDir != "" {
			w(3, "bin_dir = %s", tomlString(p.CNIBinDir))
		}
		if p.CNIConfDir != "" {
			w(3, "conf_dir = %s", tomlString(p.CNIConfDir))
		}
	}
	w(2, "[%s.registry]", cri)
	w(3, "config_path = %s", tomlString(p.CertsDir))
	return b.Bytes()
}

// renderHosts renders certs.d/<registry>/hosts.toml. Without a `server` line the
// registry itself stays the last resort after its mirrors.
func renderHosts(m containerdspec.Mirror) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	for _, e := range m.Endpoints {
		fmt.Fprintf(&b, "\n[host.%s]\n", tomlString(e))
		b.WriteString("  capabilities = [\"pull\", \"resolve\"]\n")
		if m.SkipVerify {
			b.WriteString("  skip_verify = true\n")
		}
	}
	return b.Bytes()
}

// tomlString quotes s as a TOML basic string; JSON's escapes are all valid TOML.
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
