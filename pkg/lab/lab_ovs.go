package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The OVS host service gives every lab host its own ovsdb-server and a userspace
// (netdev) ovs-vswitchd in its namespace, with all OVS files under STATE/ovs, and
// points the agent's OVS driver there with --ovs-rundir. No DPDK: that needs
// hugepages and would make the lab heavy; pkg/ovs's tests cover it.
//
// Without Open vSwitch on this machine the service says so (ErrServiceUnavailable)
// and starts the host's agent with --ovs-skip, so its OVS steps succeed reporting
// "skipped: ..." in their outputs and the demo still reaches Ready. A manifest that
// depends on the lab machine would be worse: the same site.yaml must work everywhere.
func init() { RegisterHostService("ovs", ovsService) }

const plainVswitchd = "/usr/lib/openvswitch-switch/ovs-vswitchd"

// OVSAvailable reports why the lab cannot run Open vSwitch, or nil.
func OVSAvailable() error {
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-appctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (scripts/install-deps.sh installs openvswitch-switch)", bin)
		}
	}
	if _, err := os.Stat(plainVswitchd); err != nil {
		return fmt.Errorf("%s not found (scripts/install-deps.sh installs openvswitch-switch)", plainVswitchd)
	}
	return nil
}

// OVSRunDir is where a lab host's OVS keeps db.sock and its control sockets.
func OVSRunDir(h *Host) string { return filepath.Join(h.StateDir, "ovs") }

func ovsService(ctx context.Context, l *Lab, h *Host, _ HostSpec) ([]string, error) {
	if err := OVSAvailable(); err != nil {
		h.AgentArgs = append(h.AgentArgs, "--ovs-skip", "Open vSwitch is not installed on the lab machine: "+err.Error())
		return nil, fmt.Errorf("%w: %v", ErrServiceUnavailable, err)
	}
	dir := OVSRunDir(h)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "conf.db")
	if _, err := os.Stat(db); os.IsNotExist(err) {
		if _, err := run(ctx, "ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"); err != nil {
			return nil, err
		}
	}
	// env makes every default OVS path (pidfiles, control sockets, bridge sockets)
	// land in dir, which is also what ovs-appctl looks at with OVS_RUNDIR.
	env := []string{"OVS_RUNDIR=" + dir, "OVS_LOGDIR=" + dir, "OVS_DBDIR=" + dir}
	sock := "unix:" + filepath.Join(dir, "db.sock")
	args := append(append([]string{}, env...), "ovsdb-server", db, "--remote=p"+sock, "--pidfile", "--log-file", "--no-chdir")
	if _, err := l.StartService("ovsdb-server "+h.Name, h.NS, "env", args...); err != nil {
		return nil, err
	}
	if err := waitPath(ctx, filepath.Join(dir, "db.sock")); err != nil {
		return nil, fmt.Errorf("lab: ovsdb-server on %s: %w", h.Name, err)
	}
	if _, err := run(ctx, "ovs-vsctl", "--db="+sock, "--no-wait", "init"); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(dir, "ovs-vswitchd.pid"))
	args = append(append([]string{}, env...), plainVswitchd, sock, "--pidfile", "--log-file", "--no-chdir")
	if _, err := l.StartService("ovs-vswitchd "+h.Name, h.NS, "env", args...); err != nil {
		return nil, err
	}
	if err := waitPath(ctx, filepath.Join(dir, "ovs-vswitchd.pid")); err != nil {
		return nil, fmt.Errorf("lab: ovs-vswitchd on %s: %w", h.Name, err)
	}
	return []string{"--ovs-rundir", dir}, nil
}

func waitPath(ctx context.Context, path string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within 10s", path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
