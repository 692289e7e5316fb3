package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It is 100 on
// every Linux architecture Go supports (getconf CLK_TCK); the kernel fixes it for
// the user ABI regardless of CONFIG_HZ.
const clockTicks = 100

// procUsage is one process over the idle window.
type procUsage struct {
	label    string
	pid      int
	comm     string
	rssStart int64 // kB, VmRSS
	rssEnd   int64
	rssMax   int64 // max of the 1 s samples, start and end included
	hwm      int64 // VmHWM at the end: peak RSS over the process's whole life
	threads  int
	cpu      time.Duration // utime+stime over the window
	wall     time.Duration
}

func (u procUsage) cpuPercent() float64 {
	if u.wall <= 0 {
		return 0
	}
	return 100 * float64(u.cpu) / float64(u.wall)
}

// idleResult is the idle measurement: every agent, the leader coordinator, every
// host as a whole, and how busy the whole machine was meanwhile.
type idleResult struct {
	agents      []procUsage
	leader      procUsage
	hosts       []hostUsage
	machineBusy float64 // % of all CPUs busy (/proc/stat) over the window
	cpus        int
	loadStart   string
	loadEnd     string
}

// hostUsage is the CPU of all of one host's processes (its cpuacct cgroup: systemd,
// journald, containerd, OVS, Ceph, Plinth) over the idle window.
type hostUsage struct {
	host string
	cpu  time.Duration
	wall time.Duration
}

func (u hostUsage) cpuPercent() float64 {
	if u.wall <= 0 {
		return 0
	}
	return 100 * float64(u.cpu) / float64(u.wall)
}

// watched is one process sampled during the idle window.
type watched struct {
	label string
	pid   int
}

func readComm(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b)), err
}

// statFields returns /proc/PID/stat's fields after the "(comm)" field, so that
// index 0 is field 3 (state) of proc(5).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

// cpuTime is utime+stime (fields 14 and 15) of the whole process, all threads.
func cpuTime(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// status reads VmRSS, VmHWM (kB) and Threads from /proc/PID/status.
func status(pid int) (rss, hwm int64, threads int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		case "Threads":
			threads = int(n)
		}
	}
	return rss, hwm, threads, nil
}

// machineTicks is (busy, total) jiffies of all CPUs from /proc/stat.
func machineTicks() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fs := strings.Fields(line)
	if len(fs) < 5 || fs[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected %q", line)
	}
	for i, f := range fs[1:] {
		if i >= 8 { // guest and guest_nice are already counted in user and nice
			break
		}
		n, _ := strconv.ParseInt(f, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	fs := strings.Fields(string(b))
	if len(fs) < 3 {
		return "?"
	}
	return strings.Join(fs[:3], " ")
}

// idleUsage lets the Ready site sit for the settle time, then samples every agent
// and the leader coordinator once a second for the idle window.
func (b *bench) idleUsage(ctx context.Context) (*idleResult, error) {
	var ws []watched
	for _, h := range b.l.Hosts() {
		pid, err := b.l.UnitPID(ctx, h, "plinth-agent")
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", h.Name, err)
		}
		comm, _ := readComm(pid)
		say("agent %-13s pid %d on the machine (/proc/%d/comm %q)", h.Name, pid, pid, comm)
		ws = append(ws, watched{"agent " + h.Name, pid})
	}
	leader, err := b.l.Leader(ctx)
	if err != nil {
		return nil, err
	}
	c := b.l.Coordinator(leader)
	if c == nil || c.Host == nil {
		return nil, fmt.Errorf("leader %q is not a coordinator on a lab host", leader)
	}
	lpid, err := b.l.UnitPID(ctx, c.Host, "plinth-coordinator")
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", leader, err)
	}
	comm, _ := readComm(lpid)
	say("leader coordinator %s pid %d on the machine (/proc/%d/comm %q)", leader, lpid, lpid, comm)
	ws = append(ws, watched{"coordinator " + leader + " (leader)", lpid})

	say("settling %s, then sampling for %s", b.o.settle, b.o.idle)
	if err := sleep(ctx, b.o.settle); err != nil {
		return nil, err
	}
	us := make([]procUsage, len(ws))
	cpu0 := make([]time.Duration, len(ws))
	res := &idleResult{loadStart: loadavg(), cpus: countCPUs()}
	mb0, mt0, err := machineTicks()
	if err != nil {
		return nil, err
	}
	hosts := b.l.Hosts()
	hcpu0 := make([]time.Duration, len(hosts))
	for i, h := range hosts {
		if hcpu0[i], err = hostCPU(h); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	sample := func() error {
		for i, w := range ws {
			rss, hwm, th, err := status(w.pid)
			if err != nil {
				return fmt.Errorf("%s (pid %d) went away during the idle window: %w", w.label, w.pid, err)
			}
			us[i].rssMax = max(us[i].rssMax, rss)
			us[i].rssEnd, us[i].hwm, us[i].threads = rss, hwm, th
		}
		return nil
	}
	for i, w := range ws {
		c, _ := readComm(w.pid)
		us[i] = procUsage{label: w.label, pid: w.pid, comm: c}
		if cpu0[i], err = cpuTime(w.pid); err != nil {
			return nil, err
		}
	}
	if err := sample(); err != nil {
		return nil, err
	}
	for i := range us {
		us[i].rssStart = us[i].rssEnd
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := t0.Add(b.o.idle)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
		if err := sample(); err != nil {
			return nil, err
		}
	}
	wall := time.Since(t0)
	for i, w := range ws {
		cpu1, err := cpuTime(w.pid)
		if err != nil {
			return nil, err
		}
		us[i].cpu, us[i].wall = cpu1-cpu0[i], wall
	}
	for i, h := range hosts {
		cpu1, err := hostCPU(h)
		if err != nil {
			return nil, err
		}
		res.hosts = append(res.hosts, hostUsage{host: h.Name, cpu: cpu1 - hcpu0[i], wall: wall})
	}
	mb1, mt1, err := machineTicks()
	if err != nil {
		return nil, err
	}
	if mt1 > mt0 {
		res.machineBusy = 100 * float64(mb1-mb0) / float64(mt1-mt0)
	}
	res.loadEnd = loadavg()
	res.agents, res.leader = us[:len(us)-1], us[len(us)-1]
	for _, u := range us {
		say("%-34s RSS %s -> %s (max %s)  CPU %s in %s = %.2f%%", u.label, mib(u.rssStart), mib(u.rssEnd), mib(u.rssMax),
			ms(u.cpu), wall.Round(100*time.Millisecond), u.cpuPercent())
	}
	for _, u := range res.hosts {
		say("host %-29s CPU of all its processes %s = %.2f%%", u.host, ms(u.cpu), u.cpuPercent())
	}
	return res, nil
}

func countCPUs() int {
	b, _ := os.ReadFile("/proc/stat")
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}

func mib(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }
