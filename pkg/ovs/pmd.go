package ovs

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// checkPMD verifies that ovs-vswitchd's PMD threads run exactly on the CPUs of
// mask (when set) and that every port in ports is polled by one. It returns the PMD
// cores as a cpulist, or "" when there are no PMD threads (no DPDK ports yet).
func (o *options) checkPMD(ctx context.Context, mask string, ports []string) (string, error) {
	ts, err := o.pmdThreads(ctx)
	if err != nil {
		return "", err
	}
	return pmdVerdict(ts, mask, ports)
}

// pmdVerdict is checkPMD's judgement of the threads ts.
func pmdVerdict(ts []pmdThread, mask string, ports []string) (string, error) {
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

// pmdQuery is one question to ovs-vswitchd about its PMD threads, asked in the
// background so that a step reads the database meanwhile: right after DPDK ports
// were added ovs-vswitchd takes a few milliseconds to answer.
type pmdQuery struct {
	done chan struct{}
	ts   []pmdThread
	err  error
}

// askPMD starts a pmdQuery; it ends with ctx or appctlTimeout at the latest.
func (o *options) askPMD(ctx context.Context) *pmdQuery {
	q := &pmdQuery{done: make(chan struct{})}
	go func() {
		defer close(q.done)
		q.ts, q.err = o.pmdThreads(ctx)
	}()
	return q
}

// answer waits for the answer.
func (q *pmdQuery) answer(ctx context.Context) ([]pmdThread, error) {
	select {
	case <-q.done:
		return q.ts, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
