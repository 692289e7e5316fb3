package containerd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDaemonConfigWithRoot runs the containerd.config step against a real containerd:
// the daemon starts with the written config, an unchanged step restarts nothing, and
// a changed mirror rewrites hosts.toml and restarts once. Pulls through the mirrors
// prove containerd reads them.
func TestDaemonConfigWithRoot(t *testing.T) {
	d := newTestDaemon(t)
	ctx := contextFor(t)
	reg1, reg2 := startRegistry(t), startRegistry(t)
	push(t, reg1.URL, "plinth/mirrored", "1", testImage(t, 11))
	push(t, reg2.URL, "plinth/mirrored", "2", testImage(t, 12))

	cd := NewConfigDriver(filepath.Join(d.dir, "agent"), d.options()...)
	in := containerdspec.ConfigInputs{
		SandboxImage: "registry.local/pause:3.10.2", CgroupDriver: "cgroupfs", Snapshotter: "overlayfs",
		Mirrors: []containerdspec.Mirror{{Registry: "mirror.invalid", Endpoints: []string{reg1.URL}}},
	}
	run := func(wantChanges ...string) {
		t.Helper()
		res := driver.Run(ctx, cd, mustJSON(t, in))
		if !res.OK() {
			t.Fatalf("run: %s", res.Error)
		}
		if len(res.Changes) != len(wantChanges) {
			t.Fatalf("changes = %q, want %d starting with %q", res.Changes, len(wantChanges), wantChanges)
		}
		for i, w := range wantChanges {
			if !strings.HasPrefix(res.Changes[i], w) {
				t.Fatalf("change %d = %q, want prefix %q", i, res.Changes[i], w)
			}
		}
	}

	run("create "+d.paths.ConfigPath, "create "+filepath.Join(d.paths.CertsDir, "mirror.invalid", "hosts.toml"), "restart containerd")
	if n := d.restartCount(); n != 1 {
		t.Fatalf("restarts = %d, want 1", n)
	}
	rs, is := d.cri()
	st, err := rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var running struct {
		SandboxImage string `json:"sandboxImage"`
		Containerd   struct {
			Snapshotter string `json:"snapshotter"`
		} `json:"containerd"`
		Registry struct {
			ConfigPath string `json:"configPath"`
		} `json:"registry"`
	}
	if err := json.Unmarshal([]byte(st.Info["config"]), &running); err != nil {
		t.Fatalf("CRI config %q: %v", st.Info["config"], err)
	}
	if running.SandboxImage != in.SandboxImage || running.Containerd.Snapshotter != "overlayfs" || running.Registry.ConfigPath != d.paths.CertsDir {
		t.Fatalf("daemon runs with %+v, not the written config", running)
	}
	pull := func(ref string) {
		t.Helper()
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("pull %s through the mirror: %v", ref, err)
		}
	}
	pull("mirror.invalid/plinth/mirrored:1")

	run() // unchanged: nothing written, no restart
	if n := d.restartCount(); n != 1 {
		t.Fatalf("unchanged step restarted containerd: restarts = %d", n)
	}

	in.Mirrors[0].Endpoints = []string{reg2.URL}
	run("update "+filepath.Join(d.paths.CertsDir, "mirror.invalid", "hosts.toml"), "restart containerd")
	if n := d.restartCount(); n != 2 {
		t.Fatalf("restarts = %d, want 2", n)
	}
	hosts, err := os.ReadFile(filepath.Join(d.paths.CertsDir, "mirror.invalid", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "hosts.toml", string(hosts), reg2.URL)
	if strings.Contains(string(hosts), reg1.URL) {
		t.Fatalf("hosts.toml still names the old mirror:\n%s", hosts)
	}
	pull("mirror.invalid/plinth/mirrored:2") // only the new mirror has it

	run()
	if n := d.restartCount(); n != 2 {
		t.Fatalf("restarts = %d after an unchanged run, want 2", n)
	}
}
