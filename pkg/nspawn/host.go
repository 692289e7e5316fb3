package nspawn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
	"golang.org/x/sys/unix"
)

// DefaultPlainDirs are bind-mounted into every host from plain directories of its
// machine dir instead of living on the overlayfs root: containerd's overlayfs
// snapshotter cannot put its upper dirs on an overlayfs, and kubelet's volumes
// and the agent's state are better on a plain filesystem too.
var DefaultPlainDirs = []string{"/var/lib/containerd", "/var/lib/kubelet"}

// DefaultCgroupGroup is the cgroup (below our own, in every hierarchy) that holds
// one subtree per host.
const DefaultCgroupGroup = "plinth-lab"

// Bind is an extra bind mount into a host.
type Bind struct {
	Source   string `json:"source"` // on the machine
	Target   string `json:"target"` // in the host
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// HostConfig is one booted host.
type HostConfig struct {
	// Name is the machine name (and the hostname unless Hostname is set): lower
	// case letters, digits and dashes.
	Name string `json:"name"`
	// MachineDir is the host's own directory: overlay upper and work dirs, the
	// mounted root, plain dirs, console log and the record (host.json).
	MachineDir string `json:"machineDir"`
	// Rootfs is the read-only lower dir (BuildRootfs).
	Rootfs string `json:"rootfs"`
	// NetNS is the path of the host's network namespace, e.g. /run/netns/NAME,
	// made and wired by the caller (CreateNetNS).
	NetNS    string `json:"netns"`
	Hostname string `json:"hostname,omitempty"`
	// Hosts are /etc/hosts lines after localhost, e.g. "10.0.0.11 h1".
	Hosts []string `json:"hosts,omitempty"`
	// Nameservers go to /etc/resolv.conf (none: an empty file).
	Nameservers []string `json:"nameservers,omitempty"`
	Binds       []Bind   `json:"binds,omitempty"`
	// PlainDirs default to DefaultPlainDirs.
	PlainDirs []string `json:"plainDirs,omitempty"`
	// CgroupGroup defaults to DefaultCgroupGroup.
	CgroupGroup string `json:"cgroupGroup,omitempty"`
	// Profile's Env and Args are added to systemd-nspawn (LabProfile on this machine).
	Profile Profile `json:"profile"`
	// RuncWrapper is a built cmd/runc-lab, copied into the host at RuncWrapperPath.
	RuncWrapper string `json:"runcWrapper,omitempty"`
	// BootTimeout bounds the wait for `systemctl is-system-running`; default 2m.
	BootTimeout time.Duration `json:"bootTimeout,omitempty"`
}

// Host is a booted (or powered-off) host. Its methods are safe for concurrent use.
type Host struct {
	mu  sync.Mutex
	rec record
	// exited is closed when the nspawn process this Host started has been reaped;
	// nil for a host loaded from its record (its nspawn is another process's child).
	exited chan struct{}
}

// record is what host.json keeps, so a later process can find and remove the host.
type record struct {
	Config    HostConfig `json:"config"`
	Cgroups   []string   `json:"cgroups"` // the host's cgroup dir in every hierarchy
	MachineID string     `json:"machineID"`
	// PID and PIDStart (clock ticks after boot, /proc/PID/stat field 22) identify
	// the running systemd-nspawn; 0 when powered off.
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pidStart,omitempty"`
	// NspawnLock is the lock file systemd-nspawn takes on the root (by device and
	// inode of the mounted overlay); a killed nspawn leaves it behind.
	NspawnLock string `json:"nspawnLock,omitempty"`
}

// nspawnRun is systemd-nspawn's state dir on the machine.
const nspawnRun = "/run/systemd/nspawn"

const recordFile = "host.json"

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

func (c HostConfig) withDefaults() HostConfig {
	if c.Hostname == "" {
		c.Hostname = c.Name
	}
	if c.PlainDirs == nil {
		c.PlainDirs = DefaultPlainDirs
	}
	if c.CgroupGroup == "" {
		c.CgroupGroup = DefaultCgroupGroup
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 2 * time.Minute
	}
	return c
}

func (c HostConfig) validate() error {
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("nspawn: host name %q: want 1-32 lower case letters, digits and dashes", c.Name)
	}
	if !filepath.IsAbs(c.MachineDir) {
		return fmt.Errorf("nspawn: host %s: MachineDir %q must be an absolute path", c.Name, c.MachineDir)
	}
	if !isDir(filepath.Join(c.Rootfs, "etc")) {
		return fmt.Errorf("nspawn: host %s: Rootfs %q is not a root filesystem (BuildRootfs makes one)", c.Name, c.Rootfs)
	}
	if c.NetNS == "" {
		return fmt.Errorf("nspawn: host %s: NetNS is empty: want the path of a network namespace, e.g. /run/netns/%s", c.Name, c.Name)
	}
	if _, err := os.Stat(c.NetNS); err != nil {
		return fmt.Errorf("nspawn: host %s: network namespace: %w", c.Name, err)
	}
	for _, b := range c.Binds {
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) || strings.Contains(b.Source+b.Target, ":") {
			return fmt.Errorf("nspawn: host %s: bind %s -> %s: want absolute paths without ':'", c.Name, b.Source, b.Target)
		}
	}
	for _, d := range c.PlainDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("nspawn: host %s: plain dir %q: want an absolute path", c.Name, d)
		}
	}
	return nil
}

// Boot starts the host described by c and waits until systemd inside reports
// running. It is resumable: a host whose record exists in c.MachineDir is started
// again with its disk (upper dir) kept, and a running one is returned as it is.
// If the host boots but ends degraded, Boot returns the running Host together with
// a *DegradedError naming the failed units; on any other error nothing of the
// host is left running.
func Boot(ctx context.Context, c HostConfig) (*Host, error) {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	h, err := Load(c.MachineDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if h == nil {
		if err := os.MkdirAll(c.MachineDir, 0o755); err != nil {
			return nil, fmt.Errorf("nspawn: host %s: %w", c.Name, err)
		}
		h = &Host{rec: record{Config: c, MachineID: newMachineID()}}
	} else {
		h.rec.Config = c // the config may have changed (new binds, hosts lines)
	}
	if err := h.Start(ctx); err != nil {
		return h.keepIfDegraded(err)
	}
	return h, nil
}

func (h *Host) keepIfDegraded(err error) (*Host, error) {
	var d *DegradedError
	if errors.As(err, &d) {
		return h, err
	}
	return nil, err
}

// Load reads the record of the host in machineDir, running or not. The error
// wraps os.ErrNotExist when there is none.
func Load(machineDir string) (*Host, error) {
	b, err := os.ReadFile(filepath.Join(machineDir, recordFile))
	if err != nil {
		return nil, fmt.Errorf("nspawn: load %s: %w", machineDir, err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("nspawn: load %s: %w", filepath.Join(machineDir, recordFile), err)
	}
	return &Host{rec: rec}, nil
}

// Name is the host's machine name.
func (h *Host) Name() string { return h.rec.Config.Name }

// Config is the host's configuration.
func (h *Host) Config() HostConfig {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec.Config
}

// Cgroups are the host's cgroup dirs, one in every hierarchy.
func (h *Host) Cgroups() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.rec.Cgroups...)
}

// ConsoleLog is the file the host's console (and systemd-nspawn) write to.
func (h *Host) ConsoleLog() string { return filepath.Join(h.rec.Config.MachineDir, "console.log") }

// Root is where the host's root filesystem is mounted on the machine while it runs.
func (h *Host) Root() string { return filepath.Join(h.rec.Config.MachineDir, "root") }

func (h *Host) upper() string { return filepath.Join(h.rec.Config.MachineDir, "upper") }

// Running reports whether the host's systemd-nspawn is alive.
func (h *Host) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runningLocked()
}

func (h *Host) runningLocked() bool {
	if h.rec.PID == 0 {
		return false
	}
	if h.exited != nil {
		select {
		case <-h.exited:
			return false
		default:
			return true
		}
	}
	st, err := procStart(h.rec.PID)
	return err == nil && st == h.rec.PIDStart
}

// Start boots a powered-off host again with the same disk and waits until it is
// running. Starting a running host does nothing.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runningLocked() {
		return nil
	}
	c := h.rec.Config
	// what a crash of the machine-side processes left in the host's cgroups
	if pids, _ := h.pidsLocked(); len(pids) > 0 {
		h.powerLossLocked()
	}
	if err := h.prepareLocked(); err != nil {
		return err
	}
	if err := h.startLocked(); err != nil {
		h.cleanupLocked()
		return err
	}
	if err := h.waitRunningLocked(ctx); err != nil {
		var d *DegradedError
		if !errors.As(err, &d) {
			h.powerLossLocked()
			h.cleanupLocked()
		}
		return fmt.Errorf("nspawn: host %s: %w", c.Name, err)
	}
	return nil
}

// prepareLocked mounts the root, writes the host's own files and makes its cgroups.
func (h *Host) prepareLocked() error {
	c := h.rec.Config
	md := c.MachineDir
	for _, d := range []string{"upper", "work", "root", "dirs"} {
		if err := os.MkdirAll(filepath.Join(md, d), 0o755); err != nil {
			return fmt.Errorf("nspawn: host %s: %w", c.Name, err)
		}
	}
	root := h.Root()
	if mps, err := MountPoints(root); err != nil {
		return fmt.Errorf("nspawn: host %s: %w", c.Name, err)
	} else if len(mps) == 0 {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", c.Rootfs, h.upper(), filepath.Join(md, "work"))
		if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
			return fmt.Errorf("nspawn: host %s: mount overlay %s: %w", c.Name, opts, err)
		}
	}
	hosts := "127.0.0.1\tlocalhost\n127.0.1.1\t" + c.Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	for _, l := range c.Hosts {
		hosts += l + "\n"
	}
	var resolv strings.Builder
	for _, ns := range c.Nameservers {
		fmt.Fprintf(&resolv, "nameserver %s\n", ns)
	}
	files := map[string]string{
		"etc/hostname":    c.Hostname + "\n",
		"etc/hosts":       hosts,
		"etc/resolv.conf": resolv.String(),
		"etc/machine-id":  h.rec.MachineID + "\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		_ = os.Remove(p) // resolv.conf may be a symlink
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("nspawn: host %s: %w", c.Name, err)
		}
	}
	if c.RuncWrapper != "" {
		b, err := os.ReadFile(c.RuncWrapper)
		if err != nil {
			return fmt.Errorf("nspawn: host %s: runc wrapper: %w", c.Name, err)
		}
		if err := atomicfile.WriteFile(filepath.Join(root, RuncWrapperPath), b, 0o755); err != nil {
			return fmt.Errorf("nspawn: host %s: runc wrapper: %w", c.Name, err)
		}
	}
	for _, d := range c.PlainDirs {
		if err := os.MkdirAll(h.plainDir(d), 0o755); err != nil {
			return fmt.Errorf("nspawn: host %s: %w", c.Name, err)
		}
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	if h.rec.Cgroups == nil {
		for _, hi := range hs {
			h.rec.Cgroups = append(h.rec.Cgroups, filepath.Join(hi.mount, hi.own, c.CgroupGroup, c.Name))
		}
	}
	for _, dir := range h.rec.Cgroups {
		for _, hi := range hs {
			if strings.HasPrefix(dir, hi.mount+"/") {
				if err := makeCgroup(hi, dir); err != nil {
					return err
				}
			}
		}
	}
	return h.saveLocked()
}

func (h *Host) plainDir(d string) string {
	return filepath.Join(h.rec.Config.MachineDir, "dirs", strings.ReplaceAll(strings.Trim(d, "/"), "/", "-"))
}

// nspawnArgs is the systemd-nspawn command line for the host.
func (h *Host) nspawnArgs() []string {
	c := h.rec.Config
	args := []string{"systemd-nspawn", "-D", h.Root(), "--boot", "-M", c.Name, "--network-namespace-path=" + c.NetNS}
	args = append(args, c.Profile.Args...)
	for _, d := range c.PlainDirs {
		args = append(args, "--bind="+h.plainDir(d)+":"+d)
	}
	for _, b := range c.Binds {
		flag := "--bind="
		if b.ReadOnly {
			flag = "--bind-ro="
		}
		args = append(args, flag+b.Source+":"+b.Target)
	}
	return args
}

// startLocked starts systemd-nspawn in its own session, inside the host's cgroups,
// detached: the host outlives the process that booted it.
func (h *Host) startLocked() error {
	c := h.rec.Config
	logf, err := os.OpenFile(h.ConsoleLog(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("nspawn: host %s: %w", c.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- plinth: boot %s at %s\n", c.Name, time.Now().Format(time.RFC3339))
	argv := []string{"sh", "-c", joinCgroupsScript, "sh"}
	for _, d := range h.rec.Cgroups {
		argv = append(argv, filepath.Join(d, "cgroup.procs"))
	}
	argv = append(append(argv, "--"), h.nspawnArgs()...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(cleanEnv(os.Environ()), c.Profile.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nspawn: host %s: start systemd-nspawn: %w", c.Name, err)
	}
	exited := make(chan struct{})
	go func() { // reaps our child; ends when systemd-nspawn does
		_ = cmd.Wait()
		close(exited)
	}()
	h.exited = exited
	h.rec.PID = cmd.Process.Pid
	var rootSt unix.Stat_t
	if unix.Stat(h.Root(), &rootSt) == nil {
		h.rec.NspawnLock = fmt.Sprintf("%s/locks/inode-%d:%d", nspawnRun, rootSt.Dev, rootSt.Ino)
	}
	st, err := procStart(h.rec.PID)
	if err != nil {
		return fmt.Errorf("nspawn: host %s: systemd-nspawn exited at once (see %s): %w", c.Name, h.ConsoleLog(), err)
	}
	h.rec.PIDStart = st
	return h.saveLocked()
}

// cleanEnv drops what would make systemd-nspawn talk to a service manager we are
// not running under.
func cleanEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if strings.HasPrefix(e, "NOTIFY_SOCKET=") || strings.HasPrefix(e, "LISTEN_") || strings.HasPrefix(e, "SYSTEMD_") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// DegradedError is a host that booted with failed units.
type DegradedError struct {
	Host   string
	Failed string // `systemctl --failed` output
}

func (e *DegradedError) Error() string {
	return fmt.Sprintf("booted degraded, failed units:\n%s", e.Failed)
}

// waitRunningLocked waits for `systemctl is-system-running` to say running.
func (h *Host) waitRunningLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.rec.Config.BootTimeout)
	defer cancel()
	state, why := "", "" // why: the last reason there was no state to read
	for {
		if !h.runningLocked() {
			return fmt.Errorf("systemd-nspawn exited during boot; console log %s:\n%s", h.ConsoleLog(), tail(h.ConsoleLog(), 20))
		}
		leader, err := h.leaderLocked()
		if err != nil {
			why = err.Error()
		} else {
			// Each probe is bounded, so one hung systemctl cannot eat the whole wait.
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := h.execLocked(pctx, leader, nil, "systemctl", "is-system-running")
			cancel()
			state = strings.TrimSpace(string(out))
			if state == "" && err != nil {
				why = fmt.Sprintf("systemctl is-system-running in PID %d: %v", leader, err)
			}
			switch state {
			case "running":
				return nil
			case "degraded":
				failed, _ := h.execLocked(ctx, leader, nil, "systemctl", "--failed", "--no-pager", "--full")
				return &DegradedError{Host: h.rec.Config.Name, Failed: string(failed)}
			}
		}
		select {
		case <-ctx.Done():
			if state == "" && why != "" {
				state = "none: " + why
			}
			return fmt.Errorf("not running within %s (state %q); console log %s:\n%s", h.rec.Config.BootTimeout, state, h.ConsoleLog(), tail(h.ConsoleLog(), 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Leader is the host's PID 1 (systemd) as seen on the machine.
func (h *Host) Leader() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leaderLocked()
}

func (h *Host) leaderLocked() (int, error) {
	if !h.runningLocked() {
		return 0, fmt.Errorf("nspawn: host %s is not running", h.rec.Config.Name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.rec.PID, h.rec.PID))
	if err != nil {
		return 0, fmt.Errorf("nspawn: host %s: %w", h.rec.Config.Name, err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("nspawn: host %s: systemd not started yet", h.rec.Config.Name)
}

// Command returns argv run inside every namespace of the host's PID 1 and in its
// cgroups (a process started this way belongs to the host, and a power loss kills
// it). The caller sets Stdin/Stdout/Stderr and runs it.
func (h *Host) Command(ctx context.Context, argv ...string) (*exec.Cmd, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	leader, err := h.leaderLocked()
	if err != nil {
		return nil, err
	}
	return h.commandLocked(ctx, leader, argv...)
}

func (h *Host) commandLocked(ctx context.Context, leader int, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("nspawn: Exec needs a command")
	}
	procs, err := leaderCgroupProcs(leader)
	if err != nil {
		return nil, fmt.Errorf("nspawn: host %s: %w", h.rec.Config.Name, err)
	}
	args := append([]string{"-c", joinCgroupsScript, "sh"}, procs...)
	args = append(args, "--", "nsenter", "-t", strconv.Itoa(leader), "-a", "--")
	args = append(args, argv...)
	cmd := exec.CommandContext(ctx, "sh", args...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "TERM=dumb"}
	return cmd, nil
}

// leaderCgroupProcs are the cgroup.procs files of the cgroups pid is in.
func leaderCgroupProcs(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	var out []string
	for _, hi := range hs {
		// the hierarchy's own path in /proc/self/cgroup tells which line is whose
		for ctrls, p := range own {
			if hierarchyFor(ctrls, hi.mount) {
				out = append(out, filepath.Join(hi.mount, p, "cgroup.procs"))
				break
			}
		}
	}
	return out, nil
}

// hierarchyFor matches a /proc/PID/cgroup controller list to a mount point under
// /sys/fs/cgroup (cpu,cpuacct -> /sys/fs/cgroup/cpu,cpuacct; name=systemd ->
// systemd; "" -> the cgroup2 mount).
func hierarchyFor(ctrls, mount string) bool {
	base := filepath.Base(mount)
	switch {
	case ctrls == "":
		return base == "unified" || mount == "/sys/fs/cgroup"
	case strings.HasPrefix(ctrls, "name="):
		return base == strings.TrimPrefix(ctrls, "name=")
	default:
		return base == ctrls
	}
}

// Exec runs argv inside the host (see Command) with stdin, returning its standard
// output; a failure's error carries its standard error.
func (h *Host) Exec(ctx context.Context, stdin io.Reader, argv ...string) ([]byte, error) {
	h.mu.Lock()
	leader, err := h.leaderLocked()
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return h.execLocked(ctx, leader, stdin, argv...)
}

func (h *Host) execLocked(ctx context.Context, leader int, stdin io.Reader, argv ...string) ([]byte, error) {
	cmd, err := h.commandLocked(ctx, leader, argv...)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("nspawn: host %s: %s: %w: %s", h.rec.Config.Name, strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Poweroff shuts the host down cleanly (systemctl poweroff), falling back to
// SIGTERM for systemd-nspawn and then to a power loss, and unmounts its root. Its
// disk is kept: Start boots it again.
func (h *Host) Poweroff(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runningLocked() {
		if leader, err := h.leaderLocked(); err == nil {
			_, _ = h.execLocked(ctx, leader, nil, "systemctl", "poweroff")
		}
		if !h.waitExitLocked(ctx, 60*time.Second) {
			_ = unix.Kill(h.rec.PID, unix.SIGTERM)
			if !h.waitExitLocked(ctx, 15*time.Second) {
				h.powerLossLocked()
			}
		}
	}
	// what outlived the poweroff (nothing, normally) dies with the power
	if pids, _ := h.pidsLocked(); len(pids) > 0 {
		h.powerLossLocked()
	}
	return h.cleanupLocked()
}

// PowerLoss cuts the host's power: systemd-nspawn and every process in the host's
// cgroups are frozen and SIGKILLed at once. The disk keeps what was written.
func (h *Host) PowerLoss() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.powerLossLocked()
	if pids, _ := h.pidsLocked(); len(pids) > 0 {
		return fmt.Errorf("nspawn: host %s: processes survived a power loss: %v", h.rec.Config.Name, pids)
	}
	return h.cleanupLocked()
}

func (h *Host) powerLossLocked() {
	var freezer string
	for _, d := range h.rec.Cgroups {
		if strings.HasPrefix(d, "/sys/fs/cgroup/freezer/") {
			freezer = d
		}
	}
	if freezer != "" {
		_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("FROZEN"), 0o644)
	}
	pidNS := ""
	if h.runningLocked() {
		if leader, err := h.leaderLocked(); err == nil {
			pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", leader))
		}
		_ = unix.Kill(h.rec.PID, unix.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, _ := h.pidsLocked()
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		if freezer != "" {
			_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("THAWED"), 0o644)
		}
		// processes leave their cgroups before they are gone: wait for the pid
		// namespace to empty too
		if (len(pids) == 0 && !h.runningLocked() && len(pidsInNamespace(pidNS)) == 0) || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidsInNamespace lists the processes in pid namespace ns (a /proc/PID/ns/pid link).
func pidsInNamespace(ns string) []int {
	if ns == "" {
		return nil
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l == ns {
			out = append(out, pid)
		}
	}
	return out
}

// waitExitLocked waits up to d for systemd-nspawn to exit.
func (h *Host) waitExitLocked(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for h.runningLocked() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// cleanupLocked unmounts the root of a stopped host and forgets its process.
func (h *Host) cleanupLocked() error {
	if h.runningLocked() {
		return fmt.Errorf("nspawn: host %s: still running", h.rec.Config.Name)
	}
	h.rec.PID, h.rec.PIDStart = 0, 0
	err := unmountUnder(h.rec.Config.MachineDir)
	// systemd-nspawn's own leftovers when it was killed, and its state dirs once
	// no other container uses them
	_ = os.RemoveAll(filepath.Join(nspawnRun, "propagate", h.rec.Config.Name))
	if h.rec.NspawnLock != "" {
		_ = os.Remove(h.rec.NspawnLock)
		h.rec.NspawnLock = ""
	}
	for _, d := range []string{"propagate", "locks", "."} {
		_ = unix.Rmdir(filepath.Join(nspawnRun, d))
	}
	if serr := h.saveLocked(); err == nil {
		err = serr
	}
	return err
}

// Pids lists every process in the host's cgroups, as seen on the machine.
func (h *Host) Pids() ([]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pidsLocked()
}

func (h *Host) pidsLocked() ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, d := range h.rec.Cgroups {
		pids, err := cgroupPids(d)
		if err != nil {
			return out, err
		}
		for _, p := range pids {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// MemoryUsage is the host's memory cgroup usage in bytes (page cache included).
func (h *Host) MemoryUsage() (uint64, error) {
	for _, d := range h.Cgroups() {
		if strings.HasPrefix(d, "/sys/fs/cgroup/memory/") {
			b, err := os.ReadFile(filepath.Join(d, "memory.usage_in_bytes"))
			if err != nil {
				return 0, err
			}
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return 0, fmt.Errorf("nspawn: host %s: no memory cgroup", h.Name())
}

// Remove powers the host off and deletes everything of it: mounts under its
// machine dir, its cgroups (depth first) and the machine dir. The group cgroup
// above it goes too once no other host is in it.
func (h *Host) Remove(ctx context.Context) error {
	if err := h.Poweroff(ctx); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.rec.Cgroups {
		if err := removeCgroup(d); err != nil {
			return err
		}
		_ = unix.Rmdir(filepath.Dir(d)) // the group: fails while other hosts use it
	}
	return removeTree(h.rec.Config.MachineDir)
}

func (h *Host) saveLocked() error {
	b, err := json.MarshalIndent(h.rec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(h.rec.Config.MachineDir, recordFile), b, 0o644); err != nil {
		return fmt.Errorf("nspawn: host %s: record: %w", h.rec.Config.Name, err)
	}
	return nil
}

// procStart is field 22 of /proc/PID/stat (start time), which tells a process
// from a later one with the same pid.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	if f[0] == "Z" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func newMachineID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
