package nspawn

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A booted host's systemd answers pkg/systemd's D-Bus questions (what the kube
// drivers' drift checks ask) as systemctl answers is-active and is-enabled: for a
// running enabled unit, a static one, an enabled template instance that is not
// running, one completed from a bare name, and units that do not exist.
func TestSystemdAnswersLikeSystemctl(t *testing.T) {
	needRoot(t)
	l := newTestLab(t, "10.253.9")
	h := l.boot("h1", 11)
	bin := filepath.Join(h.Root(), "usr/local/bin/unitstate")
	build := exec.Command("go", "build", "-o", bin, "../systemd/testdata/unitstate")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build unitstate: %v: %s", err, out)
	}
	units := []string{"systemd-journald.service", "containerd.service", "containerd", "getty@tty1.service",
		"nosuch.service", "nosuch.socket"}
	got := strings.Split(run(t, h, append([]string{"/usr/local/bin/unitstate"}, units...)...), "\n")
	if len(got) != len(units) {
		t.Fatalf("unitstate answered %d lines for %d units: %q", len(got), len(units), got)
	}
	for i, u := range units {
		// systemctl exits non-zero for inactive or disabled units: keep its output.
		active, _ := h.Exec(t.Context(), nil, "systemctl", "is-active", u)
		enabled, err := h.Exec(t.Context(), nil, "systemctl", "is-enabled", u)
		want := strings.TrimSpace(string(enabled))
		if err != nil && want == "" { // "No such file or directory", on stderr
			want = "not-found"
		}
		if w := u + " " + strings.TrimSpace(string(active)) + " " + want; got[i] != w {
			t.Errorf("pkg/systemd says %q, systemctl %q", got[i], w)
		}
	}
}
