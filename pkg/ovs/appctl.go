package ovs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// run executes a command, returning its trimmed output in the error.
func run(ctx context.Context, env []string, name string, args ...string) error {
	_, err := output(ctx, env, name, args...)
	return err
}

func output(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// appctlTimeout bounds one control-socket command, as ovs-appctl --timeout=10 did.
const appctlTimeout = 10 * time.Second

// appctl runs a unixctl command in ovs-vswitchd, as ovs-appctl -t ovs-vswitchd
// does: one JSON-RPC request on its control socket, RUNDIR/ovs-vswitchd.PID.ctl.
// Neither OVS library wraps the dpif-netdev commands; speaking the protocol
// directly saves starting ovs-appctl (about 4 ms a call, two a DPDK host config).
// A command ovs-vswitchd refuses comes back as an error carrying its message.
func (o *options) appctl(ctx context.Context, method string, params ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, appctlTimeout)
	defer cancel()
	pidFile := filepath.Join(o.runDir, "ovs-vswitchd.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil, fmt.Errorf("ovs-vswitchd %s: is ovs-vswitchd running? %w", method, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("ovs-vswitchd %s: %s holds %q, not a process ID", method, pidFile, strings.TrimSpace(string(b)))
	}
	sock := filepath.Join(o.runDir, fmt.Sprintf("ovs-vswitchd.%d.ctl", pid))
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ovs-vswitchd %s: %w", method, err)
	}
	defer conn.Close()
	// Cancellation or the timeout ends a blocked write or read.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if params == nil {
		params = []string{}
	}
	req := unixctlRequest{ID: 0, Method: method, Params: params}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("ovs-vswitchd %s: send: %w", method, err)
	}
	var rep unixctlReply
	if err := json.NewDecoder(conn).Decode(&rep); err != nil {
		return nil, fmt.Errorf("ovs-vswitchd %s: read reply: %w", method, err)
	}
	if len(rep.Error) > 0 && string(rep.Error) != "null" {
		return nil, fmt.Errorf("ovs-vswitchd %s: %s", method, strings.TrimSpace(unixctlText(rep.Error)))
	}
	return []byte(unixctlText(rep.Result)), nil
}

// unixctlRequest and unixctlReply are JSON-RPC 1.0 as OVS's unixctl speaks it.
type unixctlRequest struct {
	ID     int      `json:"id"`
	Method string   `json:"method"`
	Params []string `json:"params"`
}

type unixctlReply struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// unixctlText is a reply's result or error: a string for text output, else the
// JSON as sent.
func unixctlText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// pmdThread is one PMD thread from dpif-netdev/pmd-rxq-show.
type pmdThread struct {
	NUMA, Core int
	Ports      []string
}

// parsePMDRxqShow parses dpif-netdev/pmd-rxq-show:
//
//	pmd thread numa_id 0 core_id 1:
//	  isolated : false
//	  port: n0                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
func parsePMDRxqShow(out []byte) ([]pmdThread, error) {
	var ts []pmdThread
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 6 && f[0] == "pmd" && f[1] == "thread" && f[2] == "numa_id" && f[4] == "core_id":
			numa, err1 := strconv.Atoi(f[3])
			core, err2 := strconv.Atoi(strings.TrimSuffix(f[5], ":"))
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("ovs: pmd-rxq-show: cannot parse %q", strings.TrimSpace(line))
			}
			ts = append(ts, pmdThread{NUMA: numa, Core: core})
		case len(f) >= 2 && f[0] == "port:" && len(ts) > 0:
			t := &ts[len(ts)-1]
			if len(t.Ports) == 0 || t.Ports[len(t.Ports)-1] != f[1] {
				t.Ports = append(t.Ports, f[1])
			}
		}
	}
	return ts, nil
}

// pmdThreads asks ovs-vswitchd where its PMD threads run and what they poll.
func (o *options) pmdThreads(ctx context.Context) ([]pmdThread, error) {
	out, err := o.appctl(ctx, "dpif-netdev/pmd-rxq-show")
	if err != nil && strings.Contains(err.Error(), "please specify an existing datapath") {
		return nil, nil // no netdev bridge yet, so no PMD threads
	}
	if err != nil {
		return nil, fmt.Errorf("ovs: PMD threads: %w", err)
	}
	return parsePMDRxqShow(out)
}
