package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plinth-dev/plinth/pkg/lab"
)

// hostMem is one booted host's memory at one moment.
type hostMem struct {
	host   string
	cgroup uint64 // nspawn Host.MemoryUsage: memory.usage_in_bytes, page cache included
	rss    uint64 // memory.stat total_rss: anonymous memory of the host's processes
	cache  uint64 // memory.stat total_cache: page cache (overlay files read, tmpfs, journal)
	procs  int
	rssSum int64 // kB, sum of VmRSS over the host's processes (shared pages counted in each)
	top    []procRSS
}

type procRSS struct {
	comm string
	rss  int64 // kB
}

// cgroupDir is h's cgroup directory in the hierarchy whose directory holds file.
func cgroupDir(h *lab.Host, file string) (string, error) {
	for _, d := range h.Machine.Cgroups() {
		if fileExists(filepath.Join(d, file)) {
			return d, nil
		}
	}
	return "", fmt.Errorf("host %s: no cgroup of %v has %s", h.Name, h.Machine.Cgroups(), file)
}

// memoryStat reads the total_* counters of a v1 memory cgroup.
func memoryStat(dir string) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return nil, err
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err == nil {
			m[k] = n
		}
	}
	return m, nil
}

// hostCPU is the CPU time of every process of h so far (cpuacct.usage).
func hostCPU(h *lab.Host) (time.Duration, error) {
	d, err := cgroupDir(h, "cpuacct.usage")
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(d, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/cpuacct.usage: %w", d, err)
	}
	return time.Duration(n), nil
}

// memory measures every host: its memory cgroup and its processes' RSS.
func (b *bench) memory() ([]hostMem, error) {
	var out []hostMem
	for _, h := range b.l.Hosts() {
		m := hostMem{host: h.Name}
		var err error
		if m.cgroup, err = h.Machine.MemoryUsage(); err != nil {
			return nil, err
		}
		if d, err := cgroupDir(h, "memory.stat"); err == nil {
			if st, err := memoryStat(d); err == nil {
				m.rss, m.cache = st["total_rss"], st["total_cache"]
			}
		}
		pids, err := h.Machine.Pids()
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			rss, _, _, err := status(pid)
			if err != nil {
				continue // exited meanwhile
			}
			comm, _ := readComm(pid)
			m.procs++
			m.rssSum += rss
			m.top = append(m.top, procRSS{comm, rss})
		}
		sort.Slice(m.top, func(i, j int) bool { return m.top[i].rss > m.top[j].rss })
		out = append(out, m)
	}
	return out, nil
}

func mibBytes(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// topProcs names the n largest processes of a host by RSS.
func topProcs(m hostMem, n int) string {
	var p []string
	for _, t := range m.top[:min(n, len(m.top))] {
		p = append(p, fmt.Sprintf("%s %.0f", t.comm, float64(t.rss)/1024))
	}
	return strings.Join(p, ", ")
}

func printMemory(when string, ms []hostMem) {
	fmt.Printf("memory per host %s:\n", when)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "host\tmemory cgroup\tof which rss\tof which cache\tprocesses\tsum of VmRSS\tlargest (VmRSS MiB)\t")
	var tc, tr, tca uint64
	var ts int64
	var tp int
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", m.host, mibBytes(m.cgroup), mibBytes(m.rss), mibBytes(m.cache), m.procs, mib(m.rssSum), topProcs(m, 4))
		tc, tr, tca, ts, tp = tc+m.cgroup, tr+m.rss, tca+m.cache, ts+m.rssSum, tp+m.procs
	}
	fmt.Fprintf(tw, "all hosts\t%s\t%s\t%s\t%d\t%s\t\t\n", mibBytes(tc), mibBytes(tr), mibBytes(tca), tp, mib(ts))
	tw.Flush()
}
