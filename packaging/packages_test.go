package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/driverexec"
)

const repo = ".."

// TestAgentConfigLoads: the shipped /etc/plinth/agent.yaml is one the agent accepts,
// at the path it reads, and the package's state directory is the agent's.
func TestAgentConfigLoads(t *testing.T) {
	p := lookup(t, "plinth-agent")
	if len(p.Conffiles) != 1 || p.Conffiles[0].Dst != agent.DefaultConfigFile {
		t.Fatalf("agent conffiles %+v: want exactly %s", p.Conffiles, agent.DefaultConfigFile)
	}
	if p.StateDir != agent.DefaultStateDir {
		t.Errorf("package state dir %s, agent's default %s", p.StateDir, agent.DefaultStateDir)
	}
	fc, err := agent.LoadFile(filepath.Join(repo, "packaging", "debian", p.Conffiles[0].Src), false)
	if err != nil {
		t.Fatalf("the agent refuses the shipped config: %v", err)
	}
	if !reflect.DeepEqual(fc, agent.FileConfig{}) {
		t.Errorf("shipped config sets %+v; it should only show the defaults as comments", fc)
	}
}

// TestAgentDriversWhereItLooks: the agent package installs the drivers programs
// where the agent looks for them by default: plinth-drivers at DefaultPath, the
// others beside it.
func TestAgentDriversWhereItLooks(t *testing.T) {
	progs := lookup(t, "plinth-agent").programs()
	for _, want := range driverexec.Beside(driverexec.DefaultPath) {
		if !slices.ContainsFunc(progs, func(p program) bool { return p.Name == filepath.Base(want) && p.Dst == want }) {
			t.Errorf("plinth-agent installs %+v; the agent runs %s", progs, want)
		}
	}
}

// TestUnitsMatchPackages: each packaged unit starts the binary where the package
// installs it and keeps its state where purge removes it.
func TestUnitsMatchPackages(t *testing.T) {
	for _, p := range packages {
		b, err := os.ReadFile(filepath.Join(repo, "systemd", p.Unit))
		if err != nil {
			t.Fatal(err)
		}
		unit := string(b)
		if want := "ExecStart=" + filepath.Join(binDir, p.Binary) + " "; !strings.Contains(unit, want) {
			t.Errorf("%s: no %q", p.Unit, want)
		}
		if want := "StateDirectory=" + filepath.Base(p.StateDir) + "\n"; !strings.Contains(unit, want) {
			t.Errorf("%s: no %q (package state dir %s)", p.Unit, strings.TrimSpace(want), p.StateDir)
		}
	}
}

// TestShlibsMatchDpkgShlibdeps compares the Depends computed from the binaries'
// ELF headers with what dpkg-shlibdeps (Debian's own tool) says.
func TestShlibsMatchDpkgShlibdeps(t *testing.T) {
	if _, err := exec.LookPath("dpkg-shlibdeps"); err != nil {
		t.Skip("dpkg-shlibdeps (dpkg-dev) is not installed")
	}
	bins, standIn := binaries(t)
	if standIn {
		t.Skip("bin/ has no built binaries (run make build): nothing real to compare")
	}
	for _, p := range packages {
		var ours, progs []string
		for _, prog := range p.programs() {
			bin, err := filepath.Abs(filepath.Join(bins, prog.Name))
			if err != nil {
				t.Fatal(err)
			}
			l, err := shlibDepends(bin)
			if err != nil {
				t.Fatal(err)
			}
			ours = append(ours, l...)
			progs = append(progs, bin)
		}
		slices.Sort(ours)
		ours = slices.Compact(ours)
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "debian"), 0o755); err != nil {
			t.Fatal(err)
		}
		control := "Source: " + p.Name + "\n\nPackage: " + p.Name + "\nArchitecture: " + arch + "\n"
		if err := os.WriteFile(filepath.Join(dir, "debian", "control"), []byte(control), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("dpkg-shlibdeps", append([]string{"-O"}, progs...)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dpkg-shlibdeps %s: %v\n%s", progs, err, stderr(err))
		}
		theirs := strings.Split(strings.TrimPrefix(strings.TrimSpace(string(out)), "shlibs:Depends="), ", ")
		slices.Sort(theirs)
		if !slices.Equal(ours, theirs) {
			t.Errorf("%s: shlibs table gives %q, dpkg-shlibdeps %q", p.Name, ours, theirs)
		}
	}
}

// TestPackages builds both packages (from bin/ when make build ran, else from
// stand-in binaries: the subtest's name says which), then checks them with dpkg-deb
// and lintian and installs, upgrades, removes and purges them with real dpkg in
// scratch roots.
func TestPackages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: dpkg --root runs the maintainer scripts in a chroot")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps)", tool)
		}
	}
	bins, standIn := binaries(t)
	name := "built-binaries"
	if standIn {
		name = "stand-in-binaries-bin-missing"
	}
	t.Run(name, func(t *testing.T) {
		ctx := context.Background()
		out := t.TempDir()
		build := func(version string) map[string]string {
			o := options{Repo: repo, BinDir: bins, OutDir: filepath.Join(out, version), Version: version, Date: time.Unix(1_800_000_000, 0).UTC()}
			start := time.Now()
			paths, err := buildAll(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			debs := map[string]string{}
			for i, p := range packages {
				st, err := os.Stat(paths[i])
				if err != nil {
					t.Fatal(err)
				}
				if paths[i] != o.debFile(p) {
					t.Errorf("built %s, want %s", paths[i], o.debFile(p))
				}
				t.Logf("%s: %.1f MiB", filepath.Base(paths[i]), float64(st.Size())/(1<<20))
				debs[p.Name] = paths[i]
			}
			t.Logf("built version %s in %s", version, time.Since(start).Round(100*time.Millisecond))
			return debs
		}
		v1, v2 := build("1.0.0"), build("1.0.1")

		t.Run("contents", func(t *testing.T) {
			for _, p := range packages {
				checkContents(t, p, v1[p.Name], "1.0.0")
			}
		})
		t.Run("lintian", func(t *testing.T) {
			if _, err := exec.LookPath("lintian"); err != nil {
				t.Skip("lintian is not installed (make deps)")
			}
			lintian(t, v1["plinth-agent"], v1["plinth-coordinator"])
		})
		for _, p := range packages {
			t.Run("dpkg-round-trip/"+p.Name, func(t *testing.T) { roundTrip(t, p, v1[p.Name], v2[p.Name]) })
			t.Run("dpkg-without-systemd/"+p.Name, func(t *testing.T) { withoutSystemd(t, p, v1[p.Name]) })
		}
	})
}

// binaries returns the directory with plinth-agent and plinth-coordinator:
// $PLINTH_BIN if set, bin/ when make build made them, else a directory of stand-ins (copies of true(1), a
// small dynamically linked ELF binary like the real ones).
func binaries(t *testing.T) (dir string, standIn bool) {
	t.Helper()
	built := filepath.Join(repo, "bin")
	if d := os.Getenv("PLINTH_BIN"); d != "" {
		built = d
	}
	missing := false
	for _, p := range packages {
		for _, prog := range p.programs() {
			if _, err := os.Stat(filepath.Join(built, prog.Name)); err != nil {
				missing = true
			}
		}
	}
	if !missing {
		return built, false
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("bin/ has no binaries and there is no true(1) to stand in")
	}
	dir = t.TempDir()
	b, err := os.ReadFile(truePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range packages {
		for _, prog := range p.programs() {
			if err := os.WriteFile(filepath.Join(dir, prog.Name), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir, true
}

func lookup(t *testing.T, name string) pkg {
	t.Helper()
	for _, p := range packages {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no package %s", name)
	return pkg{}
}

func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkContents reads the package back with dpkg-deb: fields, files with owners and
// modes, conffiles and maintainer scripts.
func checkContents(t *testing.T, p pkg, deb, version string) {
	field := func(f string) string { return strings.TrimSpace(runOut(t, "dpkg-deb", "-f", deb, f)) }
	if got := field("Package"); got != p.Name {
		t.Errorf("%s: Package %q", deb, got)
	}
	if got := field("Version"); got != version {
		t.Errorf("%s: Version %q, want %q", deb, got, version)
	}
	if got := field("Architecture"); got != arch {
		t.Errorf("%s: Architecture %q", deb, got)
	}
	depends := strings.Split(field("Depends"), ", ")
	for _, d := range append([]string{"libc6 (>= 2.34)"}, p.Depends...) {
		if !slices.Contains(depends, d) {
			t.Errorf("%s: Depends %q lacks %q", p.Name, depends, d)
		}
	}
	if hasAptCache() {
		names := []string{"show", "--no-all-versions"}
		for _, d := range append(append(depends, p.Recommends...), p.Suggests...) {
			names = append(names, strings.Fields(d)[0])
		}
		if out, err := exec.Command("apt-cache", names...).CombinedOutput(); err != nil {
			t.Errorf("%s: apt does not know every package named in Depends, Recommends or Suggests %q: %v\n%s", p.Name, names[2:], err, lastLines(out, 3))
		}
	}
	if want := strings.Join(p.Recommends, ", "); field("Recommends") != want {
		t.Errorf("%s: Recommends %q, want %q", p.Name, field("Recommends"), want)
	}

	// dpkg-deb -c: "-rwxr-xr-x root/root 123 2026-01-01 00:00 ./usr/bin/x"
	listing := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(runOut(t, "dpkg-deb", "-c", deb)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		if f[1] != "root/root" {
			t.Errorf("%s: %s owned by %s, want root/root", p.Name, f[5], f[1])
		}
		listing[strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")] = f[0]
	}
	want := map[string]string{
		filepath.Join(unitDir, p.Unit):               "-rw-r--r--",
		"/usr/share/doc/" + p.Name + "/copyright":    "-rw-r--r--",
		"/usr/share/doc/" + p.Name + "/changelog.gz": "-rw-r--r--",
	}
	for _, prog := range p.programs() {
		want[prog.Dst] = "-rwxr-xr-x"
	}
	for _, c := range p.Conffiles {
		want[c.Dst] = "-rw-r--r--"
	}
	for path, mode := range want {
		if got, ok := listing[path]; !ok {
			t.Errorf("%s: no %s in the package", p.Name, path)
		} else if got != mode {
			t.Errorf("%s: %s has mode %s, want %s", p.Name, path, got, mode)
		}
	}
	for path, mode := range listing {
		if _, ok := want[path]; !ok && !strings.HasPrefix(mode, "d") {
			t.Errorf("%s: unexpected file %s in the package", p.Name, path)
		}
	}

	ctl := t.TempDir()
	runOut(t, "dpkg-deb", "-e", deb, ctl)
	conffiles, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
	var wantConf string
	for _, c := range p.Conffiles {
		wantConf += c.Dst + "\n"
	}
	if string(conffiles) != wantConf {
		t.Errorf("%s: conffiles %q, want %q", p.Name, conffiles, wantConf)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		path := filepath.Join(ctl, s)
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: no %s: %v", p.Name, s, err)
			continue
		}
		if st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %s mode %v, want 0755", p.Name, s, st.Mode().Perm())
		}
		b, _ := os.ReadFile(path)
		if !strings.HasPrefix(string(b), "#!/bin/sh\n") || !strings.Contains(string(b), "\nset -e\n") {
			t.Errorf("%s: %s is not a POSIX sh script with set -e", p.Name, s)
		}
		if strings.Contains(string(b), "{{") || !strings.Contains(string(b), p.Unit) && s != "postrm" {
			t.Errorf("%s: %s not rendered for %s:\n%s", p.Name, s, p.Unit, b)
		}
		// dash is Debian's /bin/sh: the scripts must parse there.
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n %s: %v\n%s", p.Name, s, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(ctl, "preinst")); err == nil {
		t.Errorf("%s: has a preinst; none is expected", p.Name)
	}
}

func stderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

func lastLines(b []byte, n int) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func hasAptCache() bool {
	_, err := exec.LookPath("apt-cache")
	return err == nil
}

var lintianLine = regexp.MustCompile(`^([EWIPXO]): (\S+): (\S+)(.*)$`)

// lintian fails on any error lintian reports and logs the rest.
func lintian(t *testing.T, debs ...string) {
	start := time.Now()
	args := append([]string{"--no-cfg", "--display-level", ">=info", "--fail-on", "none"}, debs...)
	cmd := exec.Command("lintian", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
	counts := map[string]int{}
	for _, l := range strings.Split(string(out), "\n") {
		m := lintianLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		counts[m[1]]++
		if m[1] == "E" {
			t.Errorf("lintian error: %s", l)
		} else if m[1] == "W" {
			t.Logf("lintian warning: %s", l)
		}
	}
	t.Logf("lintian: %d errors, %d warnings, %d info tags in %s", counts["E"], counts["W"], counts["I"], time.Since(start).Round(time.Second))
}

// scratchRoot is a root directory for dpkg --root: an empty dpkg database and just
// enough of a system for the maintainer scripts, which dpkg runs chrooted into it:
// /bin/sh and the coreutils they call, copied with their libraries from this
// machine. With systemd set, it also has /run/systemd/system and stand-ins for
// systemctl and deb-systemd-invoke (fakes: there is no systemd to talk to in a
// chroot) that log their arguments to /systemctl.log.
func scratchRoot(t *testing.T, systemd bool) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "usr/bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Scripts redirect to /dev/null, as everywhere.
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(root, "dev/null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod /dev/null in the scratch root: %v", err)
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Debian's merged /usr: /bin, /lib and /lib64 are links into /usr.
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if err := os.MkdirAll(filepath.Join(root, "usr", l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"sh", "install", "rm", "rmdir", "cat"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s to copy into the scratch root", tool)
		}
		copyWithLibs(t, root, path, filepath.Join("/usr/bin", tool))
	}
	if systemd {
		if err := os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, fake := range []string{"systemctl", "deb-systemd-invoke"} {
			script := "#!/bin/sh\necho \"" + fake + " $*\" >>/systemctl.log\n"
			if err := os.WriteFile(filepath.Join(root, "usr/bin", fake), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// copyWithLibs copies the executable src to dst under root with the shared
// libraries ldd names, at the same paths.
func copyWithLibs(t *testing.T, root, src, dst string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, real, filepath.Join(root, dst))
	out, err := exec.Command("ldd", real).Output()
	if err != nil {
		return // static
	}
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				lib, err := filepath.EvalSymlinks(f)
				if err != nil {
					t.Fatal(err)
				}
				copyFile(t, lib, filepath.Join(root, f))
			}
		}
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// dpkg runs dpkg on root. Dependencies are ignored: the scratch root has no Debian
// system to satisfy them; they are checked by checkContents and lintian.
func dpkg(t *testing.T, root string, args ...string) string {
	t.Helper()
	start := time.Now()
	out := runOut(t, "dpkg", append([]string{"--root=" + root, "--force-depends", "--log=/dev/null"}, args...)...)
	t.Logf("dpkg %s: %s", strings.Join(args, " "), time.Since(start).Round(10*time.Millisecond))
	return out
}

// systemctlLog returns and clears what the fake systemctl and deb-systemd-invoke
// were asked since the last call.
func systemctlLog(t *testing.T, root string) []string {
	t.Helper()
	path := filepath.Join(root, "systemctl.log")
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func exists(root, path string) bool {
	_, err := os.Lstat(filepath.Join(root, path))
	return err == nil
}

func status(t *testing.T, root, name string) string {
	out, _ := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f", "${db:Status-Status} ${Version}", name).Output()
	return strings.TrimSpace(string(out))
}

// roundTrip installs v1 where systemd runs (as far as the scripts can tell), adds
// the state and changes an enrolled host has, upgrades to v2, reinstalls v2,
// removes and purges, checking files and systemctl calls at each step.
func roundTrip(t *testing.T, p pkg, v1, v2 string) {
	root := scratchRoot(t, true)
	daemonReload := "systemctl --system daemon-reload"
	tryRestart := "deb-systemd-invoke try-restart " + p.Unit
	stop := "deb-systemd-invoke stop " + p.Unit
	expectCalls := func(step string, want ...string) {
		t.Helper()
		if got := systemctlLog(t, root); !slices.Equal(got, want) {
			t.Errorf("%s: systemctl calls %q, want %q", step, got, want)
		}
	}

	// First install: files in place, state dir private, nothing started.
	dpkg(t, root, "-i", v1)
	if got := status(t, root, p.Name); got != "installed 1.0.0" {
		t.Fatalf("after install: dpkg says %q", got)
	}
	for _, f := range []string{filepath.Join(binDir, p.Binary), filepath.Join(unitDir, p.Unit)} {
		if !exists(root, f) {
			t.Errorf("after install: no %s", f)
		}
	}
	for _, c := range p.Conffiles {
		if !exists(root, c.Dst) {
			t.Errorf("after install: no %s", c.Dst)
		}
	}
	if st, err := os.Stat(filepath.Join(root, p.StateDir)); err != nil {
		t.Errorf("after install: state dir: %v", err)
	} else if st.Mode().Perm() != 0o700 {
		t.Errorf("after install: state dir %s has mode %v; want 0700", p.StateDir, st.Mode().Perm())
	}
	expectCalls("install", daemonReload)

	// What an enrolled, enabled host has: identity, an edited config, the
	// enablement link.
	identity := filepath.Join(root, p.StateDir, "identity")
	if err := os.WriteFile(identity, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Conffiles {
		f, err := os.OpenFile(filepath.Join(root, c.Dst), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, "# edited by the operator")
		f.Close()
	}
	wantsLink := "/etc/systemd/system/multi-user.target.wants/" + p.Unit
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, wantsLink)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(unitDir, p.Unit), filepath.Join(root, wantsLink)); err != nil {
		t.Fatal(err)
	}

	// Upgrade, then the same version again: the service restarts if running,
	// identity and the edited config stay.
	for _, step := range []string{"upgrade", "reinstall"} {
		dpkg(t, root, "-i", v2)
		if got := status(t, root, p.Name); got != "installed 1.0.1" {
			t.Fatalf("after %s: dpkg says %q", step, got)
		}
		expectCalls(step, daemonReload, tryRestart)
		if b, err := os.ReadFile(identity); err != nil || string(b) != "keep me" {
			t.Errorf("after %s: identity %q, %v", step, b, err)
		}
		for _, c := range p.Conffiles {
			if b, _ := os.ReadFile(filepath.Join(root, c.Dst)); !strings.Contains(string(b), "# edited by the operator") {
				t.Errorf("after %s: the operator's edit of %s is gone", step, c.Dst)
			}
		}
		if !exists(root, wantsLink) {
			t.Errorf("after %s: enablement link gone", step)
		}
	}

	// Remove: stopped, program gone; config, state and enablement kept.
	dpkg(t, root, "-r", p.Name)
	if got := status(t, root, p.Name); got != "config-files 1.0.1" {
		t.Errorf("after remove: dpkg says %q", got)
	}
	expectCalls("remove", stop, daemonReload)
	for _, f := range []string{filepath.Join(binDir, p.Binary), filepath.Join(unitDir, p.Unit)} {
		if exists(root, f) {
			t.Errorf("after remove: %s is still there", f)
		}
	}
	for _, f := range []string{identity[len(root):], wantsLink} {
		if !exists(root, f) {
			t.Errorf("after remove: %s is gone; remove keeps it until purge", f)
		}
	}
	for _, c := range p.Conffiles {
		if !exists(root, c.Dst) {
			t.Errorf("after remove: conffile %s is gone", c.Dst)
		}
	}

	// Purge: nothing of the package is left but what the scratch root started with.
	dpkg(t, root, "-P", p.Name)
	if got := status(t, root, p.Name); got != "" && got != "not-installed " {
		t.Errorf("after purge: dpkg says %q", got)
	}
	expectCalls("purge", daemonReload)
	for _, f := range []string{p.StateDir, wantsLink, "/etc/plinth", "/usr/share/doc/" + p.Name} {
		if exists(root, f) {
			t.Errorf("after purge: %s is still there", f)
		}
	}
	// Purging again is a no-op.
	dpkg(t, root, "-P", p.Name)
	expectCalls("second purge")
	leftovers(t, root, p)
}

// leftovers fails on any file under /etc, /usr or /var/lib that is not part of the
// scratch root itself.
func leftovers(t *testing.T, root string, p pkg) {
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, root)
		switch {
		case rel == "" || d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0 && filepath.Dir(rel) == "/":
			return nil // the merged-/usr links
		case strings.HasPrefix(rel, "/var/lib/dpkg/"), strings.HasPrefix(rel, "/usr/bin/"), strings.HasPrefix(rel, "/usr/lib"), rel == "/dev/null":
			if strings.Contains(rel, p.Name) {
				t.Errorf("after purge: %s left behind", rel)
			}
			return nil
		}
		t.Errorf("after purge: %s left behind", rel)
		return nil
	})
}

// withoutSystemd installs and purges where systemd is not running (a rootfs being
// built): no systemctl call, and no failure.
func withoutSystemd(t *testing.T, p pkg, deb string) {
	root := scratchRoot(t, false)
	// A systemctl that would fail the scripts if they called it.
	if err := os.WriteFile(filepath.Join(root, "usr/bin/systemctl"), []byte("#!/bin/sh\necho \"systemctl $*\" >>/systemctl.log\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dpkg(t, root, "-i", deb)
	dpkg(t, root, "-i", deb)
	if st, err := os.Stat(filepath.Join(root, p.StateDir)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("state dir %s not created 0700: %v", p.StateDir, err)
	}
	dpkg(t, root, "-P", p.Name)
	if got := systemctlLog(t, root); got != nil {
		t.Errorf("systemctl called without systemd: %q", got)
	}
	if exists(root, p.StateDir) {
		t.Errorf("after purge: %s is still there", p.StateDir)
	}
}
