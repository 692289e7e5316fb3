package nspawn

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestMirrorFromSources(t *testing.T) {
	deb822 := "Types: deb\n# comment: x\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://security\nSuites: bookworm-security\n"
	if got := mirrorFromDeb822(deb822, "bookworm"); got != "http://deb.debian.org/debian" {
		t.Errorf("deb822: got %q", got)
	}
	if got := mirrorFromDeb822(deb822, "trixie"); got != "" {
		t.Errorf("deb822 trixie: got %q, want none", got)
	}
	list := "# x\ndeb-src http://src bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://m/debian bookworm main\n"
	if got := mirrorFromList(list, "bookworm"); got != "http://m/debian" {
		t.Errorf("list: got %q", got)
	}
}

func TestRootfsKeyChangesWithPackagesAndProfile(t *testing.T) {
	a, err := RootfsKey(RootfsOptions{Profile: LabProfile()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RootfsKey(RootfsOptions{Profile: LabProfile(), Packages: append(append([]string(nil), LabPackages...), "jq")})
	p := LabProfile()
	p.Mask = append(p.Mask, "x.service")
	c, _ := RootfsKey(RootfsOptions{Profile: p})
	if a == b || a == c || b == c {
		t.Errorf("keys should differ: %s %s %s", a, b, c)
	}
	if a2, _ := RootfsKey(RootfsOptions{Profile: LabProfile()}); a2 != a {
		t.Errorf("key not stable: %s %s", a, a2)
	}
}

// needRoot skips unless the test can boot hosts here.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (debootstrap, mounts, cgroups, network namespaces)")
	}
	for _, bin := range []string{"systemd-nspawn", "debootstrap", "nsenter", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (scripts/install-deps.sh installs systemd-container, debootstrap): %v", bin, err)
		}
	}
}

// labRootfs builds (or finds cached) the lab rootfs once per test binary.
func labRootfs(t *testing.T) string {
	t.Helper()
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	begin := time.Now()
	dir, err := BuildRootfs(ctx, RootfsOptions{Profile: LabProfile(), Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE rootfs ready in %.1fs: %s", time.Since(begin).Seconds(), dir)
	return dir
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestBuildRootfs(t *testing.T) {
	dir := labRootfs(t)
	for _, f := range []string{"usr/bin/containerd", "usr/sbin/runc", "usr/local/sbin/plinth-lab-prep", "etc/systemd/system/sysinit.target.wants/plinth-lab-prep.service", "usr/bin/ceph-mon", "usr/bin/ovs-vsctl"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			t.Errorf("rootfs lacks %s: %v", f, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "etc/machine-id")); err != nil || st.Size() != 0 {
		t.Errorf("machine-id should be empty: %v %v", st, err)
	}
	if tgt, _ := os.Readlink(filepath.Join(dir, "etc/systemd/system/dpdk.service")); tgt != "/dev/null" {
		t.Errorf("dpdk.service not masked: %q", tgt)
	}
	begin := time.Now()
	again, err := BuildRootfs(context.Background(), RootfsOptions{Profile: LabProfile()})
	if err != nil || again != dir {
		t.Fatalf("warm build: %s %v", again, err)
	}
	t.Logf("FIGURE rootfs warm: %.3fs", time.Since(begin).Seconds())
}
