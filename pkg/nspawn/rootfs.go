package nspawn

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Suite is the Debian release lab hosts run.
const Suite = "bookworm"

// basePackages go into debootstrap itself; the rest of the list is installed with
// apt-get inside the new rootfs (debootstrap's own dependency ordering fails on
// large sets such as Ceph's python modules).
var basePackages = []string{"systemd", "systemd-sysv", "dbus", "iproute2", "kmod", "procps", "util-linux", "ca-certificates"}

// LabPackages are installed into the lab rootfs: a freshly installed Debian host
// with Plinth's Debian dependencies already there, since lab hosts reach no
// mirror. Extend it (and the cache key changes) when a package of ours depends on
// more.
var LabPackages = []string{
	"systemd", "systemd-sysv", "dbus", "iproute2", "kmod", "procps", "util-linux",
	"ca-certificates", "iputils-ping",
	// plinth-agent's dependencies (containerd, images, kube-proxy, networking)
	"containerd", "runc", "nftables", "conntrack", "ethtool", "socat",
	// Open vSwitch with DPDK and the DPDK drivers the lab uses
	"openvswitch-switch", "openvswitch-switch-dpdk",
	"librte-mempool-ring23", "librte-net-null23", "librte-net-af-packet23",
	// the API VIP
	"keepalived",
	// Ceph daemons and CLIs (librados2 and librbd1 come with ceph-common)
	"ceph-mon", "ceph-mgr", "ceph-osd", "ceph-common",
}

// RootfsOptions say which rootfs to build and where to cache it.
type RootfsOptions struct {
	Suite    string   // default Suite
	Packages []string // default LabPackages
	Profile  Profile  // files and masks baked in; usually LabProfile()
	// CacheDir holds rootfs/<suite>-<hash>; default CacheDir().
	CacheDir string
	// Mirror is the Debian mirror URL; default the one this machine's apt uses.
	Mirror string
	// Progress gets one line per phase (nil: discarded).
	Progress io.Writer
}

// CacheDir is ${PLINTH_CACHE:-$HOME/.cache/plinth}.
func CacheDir() string {
	if d := os.Getenv("PLINTH_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "plinth")
}

// RootfsKey names a rootfs in the cache: the suite and a short hash of the sorted
// package list and the profile version.
func RootfsKey(opts RootfsOptions) (string, error) {
	opts = opts.withDefaults()
	pv, err := opts.Profile.Version()
	if err != nil {
		return "", err
	}
	pkgs := append([]string(nil), opts.Packages...)
	sort.Strings(pkgs)
	sum := sha256.Sum256([]byte(strings.Join(pkgs, ",") + "\nprofile=" + pv))
	return opts.Suite + "-" + hex.EncodeToString(sum[:])[:12], nil
}

func (o RootfsOptions) withDefaults() RootfsOptions {
	if o.Suite == "" {
		o.Suite = Suite
	}
	if len(o.Packages) == 0 {
		o.Packages = LabPackages
	}
	if o.CacheDir == "" {
		o.CacheDir = CacheDir()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// BuildRootfs returns the cached rootfs for opts, building it first if missing:
// debootstrap --variant=minbase with the packages, apt caches cleaned, an empty
// machine-id (each host gets its own), the profile applied. The build happens in a
// temporary dir renamed into place, so a killed build never leaves a half rootfs;
// one builder at a time (flock on rootfs/.lock). The result must be treated as
// read-only: hosts use it as their overlayfs lower dir.
func BuildRootfs(ctx context.Context, opts RootfsOptions) (string, error) {
	opts = opts.withDefaults()
	key, err := RootfsKey(opts)
	if err != nil {
		return "", err
	}
	base := filepath.Join(opts.CacheDir, "rootfs")
	dir := filepath.Join(base, key)
	begin := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(opts.Progress, "rootfs %s: %s (%.1fs)\n", key, fmt.Sprintf(format, args...), time.Since(begin).Seconds())
	}
	if isDir(dir) {
		progress("cached at %s", dir)
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("nspawn: rootfs cache %s: %w", base, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(base, ".lock"), func() { progress("waiting for another builder") })
	if err != nil {
		return "", err
	}
	defer unlock()
	if isDir(dir) { // built while we waited
		progress("cached at %s (built by another process)", dir)
		return dir, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", fmt.Errorf("nspawn: rootfs needs debootstrap (apt-get install debootstrap, or scripts/install-deps.sh): %w", err)
	}
	mirror := opts.Mirror
	if mirror == "" {
		if mirror, err = AptMirror(opts.Suite); err != nil {
			return "", err
		}
	}
	// Leftovers of a killed build: we hold the lock, so nobody is using them.
	stale, _ := filepath.Glob(filepath.Join(base, ".tmp-*"))
	for _, s := range stale {
		progress("removing the leftovers of an interrupted build %s", s)
		if err := removeTree(s); err != nil {
			return "", err
		}
	}
	tmp, err := os.MkdirTemp(base, ".tmp-"+key+"-")
	if err != nil {
		return "", fmt.Errorf("nspawn: rootfs: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = removeTree(tmp)
		}
	}()
	logPath := filepath.Join(base, key+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("nspawn: rootfs: %w", err)
	}
	defer logf.Close()
	progress("debootstrap %s from %s (log %s)", opts.Suite, mirror, logPath)
	args := []string{"--variant=minbase", "--include=" + strings.Join(basePackages, ","), opts.Suite, tmp, mirror}
	if err := runLogged(ctx, logf, progress, "debootstrap", args...); err != nil {
		if b, rerr := os.ReadFile(filepath.Join(tmp, "debootstrap/debootstrap.log")); rerr == nil {
			fmt.Fprintf(logf, "--- debootstrap/debootstrap.log\n%s", b)
		}
		return "", fmt.Errorf("nspawn: rootfs: debootstrap %s from %s: %w (log %s)", opts.Suite, mirror, err, logPath)
	}
	progress("debootstrap done; apt-get install %d packages", len(opts.Packages))
	if err := aptInstall(ctx, tmp, logf, progress, opts.Packages); err != nil {
		return "", fmt.Errorf("nspawn: rootfs: %w (log %s)", err, logPath)
	}
	progress("packages installed; cleaning and applying profile %s", opts.Profile.Name)
	if err := finishRootfs(ctx, tmp, opts.Profile); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("nspawn: rootfs: %w", err)
	}
	ok = true
	progress("built at %s", dir)
	return dir, nil
}

// aptInstall installs pkgs inside root with apt-get, /proc and /dev mounted and
// no service started.
func aptInstall(ctx context.Context, root string, logf io.Writer, progress func(string, ...any), pkgs []string) error {
	defer func() { _ = unmountUnder(root) }()
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", 0, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	if err := unix.Mount("/dev", filepath.Join(root, "dev"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind /dev: %w", err)
	}
	policy := filepath.Join(root, "usr/sbin/policy-rc.d")
	if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return err
	}
	env := []string{"DEBIAN_FRONTEND=noninteractive", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	for _, args := range [][]string{
		{"apt-get", "update"},
		{"apt-get", "install", "-y", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confdef"},
	} {
		if args[1] == "install" {
			args = append(args, pkgs...)
		}
		if err := runLoggedEnv(ctx, logf, progress, env, "chroot", append([]string{root}, args...)...); err != nil {
			return fmt.Errorf("chroot %s %s: %w", root, strings.Join(args[:2], " "), err)
		}
	}
	return os.Remove(policy)
}

// finishRootfs turns a fresh debootstrap into the cached lab rootfs.
func finishRootfs(ctx context.Context, root string, p Profile) error {
	if out, err := exec.CommandContext(ctx, "chroot", root, "apt-get", "clean").CombinedOutput(); err != nil {
		return fmt.Errorf("nspawn: rootfs: apt-get clean: %w: %s", err, out)
	}
	// Package lists are no use where no mirror is reachable.
	lists, _ := filepath.Glob(filepath.Join(root, "var/lib/apt/lists/*_*"))
	caches, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/*.bin"))
	for _, f := range append(lists, caches...) {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("nspawn: rootfs: %w", err)
		}
	}
	// Empty machine-id: every host gets its own (Boot writes one into the host's upper dir).
	if err := os.WriteFile(filepath.Join(root, "etc/machine-id"), nil, 0o444); err != nil {
		return fmt.Errorf("nspawn: rootfs: %w", err)
	}
	_ = os.Remove(filepath.Join(root, "var/lib/dbus/machine-id"))
	_ = os.Remove(filepath.Join(root, "etc/hostname"))
	return p.apply(root)
}

// AptMirror returns the Debian mirror this machine's apt uses for suite: the
// first deb822 stanza in /etc/apt/sources.list.d/*.sources listing it, else the
// first `deb` line of sources.list or sources.list.d/*.list.
func AptMirror(suite string) (string, error) {
	sources, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range sources {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := mirrorFromDeb822(string(b), suite); m != "" {
			return m, nil
		}
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, lists...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := mirrorFromList(string(b), suite); m != "" {
			return m, nil
		}
	}
	return "", fmt.Errorf("nspawn: no Debian mirror for %s in /etc/apt/sources.list or /etc/apt/sources.list.d/*.{sources,list}: add one (e.g. `deb http://deb.debian.org/debian %s main`) or set RootfsOptions.Mirror", suite, suite)
}

func mirrorFromDeb822(text, suite string) string {
	for _, stanza := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !contains(strings.Fields(fields["types"]), "deb") || !contains(strings.Fields(fields["suites"]), suite) {
			continue
		}
		if uris := strings.Fields(fields["uris"]); len(uris) > 0 {
			return uris[0]
		}
	}
	return ""
}

func mirrorFromList(text, suite string) string {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options: [arch=amd64 signed-by=...]
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 && f[1] == suite {
			return f[0]
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runLogged runs a long command with its output in logf, reporting its last
// line through progress every 15 s.
func runLogged(ctx context.Context, logf io.Writer, progress func(string, ...any), name string, args ...string) error {
	return runLoggedEnv(ctx, logf, progress, nil, name, args...)
}

func runLoggedEnv(ctx context.Context, logf io.Writer, progress func(string, ...any), env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = env
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var mu sync.Mutex
	last := ""
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // copies the output until the pipe is closed below
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			mu.Lock()
			last = sc.Text()
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	if err := cmd.Start(); err != nil {
		pw.Close()
		wg.Wait()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // ends when the command does
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			pw.Close()
			wg.Wait()
			return err
		case <-tick.C:
			mu.Lock()
			l := last
			mu.Unlock()
			progress("%s running: %s", name, l)
		}
	}
}

// lockFile takes an exclusive flock on path, calling waiting once if it must wait.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("nspawn: lock %s: %w", path, err)
	}
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("nspawn: lock %s: %w", path, err)
		}
		if !told {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("nspawn: lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
