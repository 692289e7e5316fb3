package ovs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
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

// appctl runs ovs-appctl against ovs-vswitchd. Neither OVS library wraps the
// dpif-netdev commands, so this is the one place the driver shells out.
func (o *options) appctl(ctx context.Context, args ...string) ([]byte, error) {
	return output(ctx, []string{"OVS_RUNDIR=" + o.runDir}, "ovs-appctl", append([]string{"--timeout=10", "-t", "ovs-vswitchd"}, args...)...)
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
