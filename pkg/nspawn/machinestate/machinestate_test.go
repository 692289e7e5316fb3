package machinestate

import (
	"os"
	"strings"
	"testing"
)

func TestDiffReportsWhatTheLabLeft(t *testing.T) {
	empty := func() *Snapshot {
		return &Snapshot{Self: os.Getpid(), Procs: map[string]Proc{}, Mounts: map[string]bool{}, Cgroups: map[string]bool{},
			Links: map[string]bool{}, NetNS: map[string]bool{}, NFT: map[string]string{}, Sysctls: map[string]string{}}
	}
	before, after := empty(), empty()
	before.Sysctls["vm.overcommit_memory"] = "0"
	after.Sysctls["vm.overcommit_memory"] = "1"
	after.Mounts["/m/root overlay overlay"] = true
	after.Cgroups["/sys/fs/cgroup/cpu/plinth-lab/h1"] = true
	after.Cgroups["/sys/fs/cgroup/memory/other"] = true
	after.Links["labbr bridge"] = true
	after.NetNS["lab-h1"] = true
	before.NFT["inet guard"] = "table inet guard {\n}\n"
	after.NFT["inet guard"] = "table inet guard {\n\tchain x {\n\t}\n}\n"
	after.NFT["inet new"] = "table inet new {\n}\n"
	// a process that is alive (pid 1) and one of our own children (ignored)
	p1 := Proc{PID: 1, Start: startOf(t, 1), Cmdline: "init"}
	after.Procs["1/x"] = p1
	got := Diff(before, after, Ignore{Cgroup: func(d string) bool { return strings.HasSuffix(d, "/other") }})
	want := []string{
		"cgroup added: /sys/fs/cgroup/cpu/plinth-lab/h1",
		"link added: labbr bridge",
		"mount added: /m/root overlay overlay",
		"netns added: lab-h1",
		"new process: pid 1",
		"nftables: new table inet new",
		"nftables: table inet guard changed",
		`sysctl vm.overcommit_memory: "0" -> "1"`,
	}
	if len(got) != len(want) {
		t.Fatalf("diff:\n%s", String(got))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d: %q, want prefix %q", i, got[i], want[i])
		}
	}
	if d := Diff(before, before, Ignore{}); len(d) != 0 || String(d) != "no differences" {
		t.Errorf("same snapshot: %v", d)
	}
}

func startOf(t *testing.T, pid int) uint64 {
	procs, err := processes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.PID == pid {
			return p.Start
		}
	}
	t.Skipf("no pid %d visible", pid)
	return 0
}

func TestNFTTables(t *testing.T) {
	got := nftTables("table inet a {\n\tchain c {\n\t}\n}\ntable ip b {\n}\n")
	if len(got) != 2 || !strings.Contains(got["inet a"], "chain c") || got["ip b"] != "table ip b {\n}\n" {
		t.Errorf("%q", got)
	}
}
