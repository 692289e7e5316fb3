// Package machinestate snapshots what a lab can leave behind on the machine —
// processes, mounts, cgroup dirs, links, network namespaces, nftables tables and
// the sysctls kubelet and CNI plugins touch — so a test can check that tearing a
// lab down leaves the machine exactly as it was. It only reads.
package machinestate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Proc is one process.
type Proc struct {
	PID     int
	PPID    int
	Start   uint64 // clock ticks after boot: tells a pid's reuse apart
	Comm    string
	Cmdline string
	PidNS   string // e.g. pid:[4026531836]
}

func (p Proc) String() string {
	c := p.Cmdline
	if c == "" {
		c = "[" + p.Comm + "]"
	}
	return fmt.Sprintf("pid %d (ppid %d, %s): %s", p.PID, p.PPID, p.PidNS, c)
}

// Snapshot is the machine at one moment.
type Snapshot struct {
	Self    int             // the snapshotting process
	Procs   map[string]Proc // key "pid/start"
	Mounts  map[string]bool // "mountpoint fstype source"
	Cgroups map[string]bool // dirs under /sys/fs/cgroup
	Links   map[string]bool // "name kind"
	NetNS   map[string]bool
	NFT     map[string]string // "family name" -> table text
	Sysctls map[string]string
}

// Sysctls are the keys a lab host's kubelet or CNI plugins would write if they
// could reach the machine's (net.bridge.* is added when br_netfilter is loaded).
var Sysctls = []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"}

// Take snapshots the machine.
func Take(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{Self: os.Getpid(), Procs: map[string]Proc{}, Mounts: map[string]bool{}, Cgroups: map[string]bool{},
		Links: map[string]bool{}, NetNS: map[string]bool{}, NFT: map[string]string{}, Sysctls: map[string]string{}}
	procs, err := processes()
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		s.Procs[fmt.Sprintf("%d/%d", p.PID, p.Start)] = p
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("machinestate: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		pf, sf := strings.Fields(pre), strings.Fields(post)
		if ok && len(pf) >= 5 && len(sf) >= 2 {
			s.Mounts[pf[4]+" "+sf[0]+" "+sf[1]] = true
		}
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			s.Cgroups[p] = true
		}
		return nil // cgroups come and go while we walk
	})
	out, err := exec.CommandContext(ctx, "ip", "-d", "-j", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("machinestate: ip -j link: %w", err)
	}
	var links []struct {
		Name     string `json:"ifname"`
		LinkInfo struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("machinestate: ip -j link: %w", err)
	}
	for _, l := range links {
		s.Links[strings.TrimSpace(l.Name+" "+l.LinkInfo.Kind)] = true
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			s.NetNS[e.Name()] = true
		}
	}
	if _, err := exec.LookPath("nft"); err == nil {
		out, err := exec.CommandContext(ctx, "nft", "list", "ruleset").Output()
		if err != nil {
			return nil, fmt.Errorf("machinestate: nft list ruleset: %w", err)
		}
		s.NFT = nftTables(string(out))
	}
	keys := append([]string(nil), Sysctls...)
	if ents, err := os.ReadDir("/proc/sys/net/bridge"); err == nil {
		for _, e := range ents {
			keys = append(keys, "net.bridge."+e.Name())
		}
	}
	for _, k := range keys {
		if v, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/")); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		} else {
			s.Sysctls[k] = "(absent)"
		}
	}
	return s, nil
}

// nftTables splits `nft list ruleset` into its tables.
func nftTables(ruleset string) map[string]string {
	out := map[string]string{}
	var cur string
	var buf strings.Builder
	for _, line := range strings.Split(ruleset, "\n") {
		if strings.HasPrefix(line, "table ") {
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "table "), " {")
			buf.Reset()
		}
		if cur != "" {
			buf.WriteString(line + "\n")
			if line == "}" {
				out[cur] = buf.String()
				cur = ""
			}
		}
	}
	return out
}

func processes() ([]Proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("machinestate: %w", err)
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 20 || f[0] == "Z" {
			continue
		}
		p := Proc{PID: pid, Comm: s[open+1 : closing]}
		p.PPID, _ = strconv.Atoi(f[1])
		p.Start, _ = strconv.ParseUint(f[19], 10, 64)
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		p.Cmdline = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		p.PidNS, _ = os.Readlink("/proc/" + e.Name() + "/ns/pid")
		out = append(out, p)
	}
	return out, nil
}

// Ignore filters differences that are not the lab's: other work on the machine.
type Ignore struct {
	// Proc, when set, says a new process is not the lab's.
	Proc func(Proc) bool
	// Cgroup, when set, says a cgroup dir that appeared or vanished is not the lab's.
	Cgroup func(dir string) bool
	// Link, when set, says a link ("name kind") is not the lab's.
	Link func(link string) bool
	// Mount, when set, says a mount ("mountpoint fstype source") is not the lab's.
	Mount func(mount string) bool
	// NetNS, when set, says a named network namespace is not the lab's (other tests
	// make their own while the lab runs).
	NetNS func(name string) bool
	// NFT, when set, says an nftables table ("family name") is not the lab's.
	NFT func(table string) bool
}

// Diff lists what changed from before to after, one readable line each; empty
// when the machine is as it was. New processes count only when still alive now,
// neither kernel threads nor descendants of the snapshotting process (its own
// children come and go). Processes that ended are not differences.
func Diff(before, after *Snapshot, ig Ignore) []string {
	var out []string
	kids := descendants(after)
	for k, p := range after.Procs {
		if _, ok := before.Procs[k]; ok || p.PPID == 2 || p.PID == 2 || kids[p.PID] {
			continue
		}
		if ig.Proc != nil && ig.Proc(p) {
			continue
		}
		if !alive(p) {
			continue
		}
		out = append(out, "new process: "+p.String())
	}
	out = append(out, diffSet("mount", before.Mounts, after.Mounts, ig.Mount)...)
	out = append(out, diffSet("cgroup", before.Cgroups, after.Cgroups, ig.Cgroup)...)
	out = append(out, diffSet("link", before.Links, after.Links, ig.Link)...)
	out = append(out, diffSet("netns", before.NetNS, after.NetNS, ig.NetNS)...)
	for _, t := range keys(before.NFT, after.NFT) {
		if ig.NFT != nil && ig.NFT(t) {
			continue
		}
		b, inB := before.NFT[t]
		a, inA := after.NFT[t]
		switch {
		case !inB:
			out = append(out, "nftables: new table "+t)
		case !inA:
			out = append(out, "nftables: table gone "+t)
		case a != b:
			out = append(out, fmt.Sprintf("nftables: table %s changed:\n--- before\n%s--- after\n%s", t, b, a))
		}
	}
	for _, k := range keys(before.Sysctls, after.Sysctls) {
		if before.Sysctls[k] != after.Sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s: %q -> %q", k, before.Sysctls[k], after.Sysctls[k]))
		}
	}
	sort.Strings(out)
	return out
}

func alive(p Proc) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) >= 20 && f[0] != "Z" && f[19] == strconv.FormatUint(p.Start, 10)
}

// descendants are the pids below the snapshotting process in after.
func descendants(s *Snapshot) map[int]bool {
	children := map[int][]int{}
	for _, p := range s.Procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	out := map[int]bool{s.Self: true}
	queue := []int{s.Self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

func diffSet(what string, before, after map[string]bool, ignore func(string) bool) []string {
	var out []string
	for k := range after {
		if !before[k] && (ignore == nil || !ignore(k)) {
			out = append(out, what+" added: "+k)
		}
	}
	for k := range before {
		if !after[k] && (ignore == nil || !ignore(k)) {
			out = append(out, what+" removed: "+k)
		}
	}
	return out
}

func keys(a, b map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// String prints a diff, or "no differences".
func String(diff []string) string {
	if len(diff) == 0 {
		return "no differences"
	}
	return strings.Join(diff, "\n")
}
