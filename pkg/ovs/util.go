package ovs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// decodeInputs decodes step inputs strictly: an unknown field means planner and
// agent disagree on the contract, which no retry fixes.
func decodeInputs(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return driver.Permanent(fmt.Errorf("ovs: bad inputs: %w", err))
	}
	return nil
}

// logHint quotes the last DPDK errors from ovs-vswitchd's log, best effort: when
// DPDK fails the database only says dpdk_initialized=false.
func (o *options) logHint() string {
	f, err := os.Open(o.logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		_, _ = f.Seek(-tail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	var hits []string
	for line := range strings.Lines(string(b)) {
		if (strings.Contains(line, "|dpdk|") || strings.Contains(line, "|netdev_dpdk|")) &&
			(strings.Contains(line, "|ERR|") || strings.Contains(line, "|EMER|")) || strings.Contains(line, "DPDK not supported") {
			// 2026-11-29T23:26:33.788Z|00133|dpdk|ERR|EAL: ... -> keep the message
			parts := strings.SplitN(strings.TrimSpace(line), "|", 5)
			hits = append(hits, parts[len(parts)-1])
		}
	}
	if len(hits) == 0 {
		return ""
	}
	hits = slices.Compact(hits[max(0, len(hits)-3):])
	return "; ovs-vswitchd log: " + strings.Join(hits, " / ")
}

// checkPMD verifies that ovs-vswitchd's PMD threads run exactly on the CPUs of
// mask (when set) and that every port in ports is polled by one. It returns the PMD
// cores as a cpulist, or "" when there are no PMD threads (no DPDK ports yet).
func (o *options) checkPMD(ctx context.Context, mask string, ports []string) (string, error) {
	ts, err := o.pmdThreads(ctx)
	if err != nil {
		return "", err
	}
	if len(ts) == 0 {
		if len(ports) > 0 {
			return "", fmt.Errorf("ovs: no PMD thread polls DPDK ports %s", strings.Join(ports, ", "))
		}
		return "", nil
	}
	var cores []int
	polled := map[string]bool{}
	for _, t := range ts {
		cores = append(cores, t.Core)
		for _, p := range t.Ports {
			polled[p] = true
		}
	}
	slices.Sort(cores)
	cores = slices.Compact(cores)
	if mask != "" {
		want, ok := maskCPUs(mask)
		if ok && !slices.Equal(cores, want) {
			return "", fmt.Errorf("ovs: PMD threads run on CPUs %s but pmd-cpu-mask %s wants %s", cpuList(cores), mask, cpuList(want))
		}
	}
	var missing []string
	for _, p := range ports {
		if !polled[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("ovs: no PMD thread polls %s (PMD threads on CPUs %s)", strings.Join(missing, ", "), cpuList(cores))
	}
	return cpuList(cores), nil
}
