package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStart(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 20 21"
	for _, tc := range []struct {
		name, stat string
		want       uint64
		err        bool
	}{
		{"plain", "17 (sleep)" + tail, 4242, false},
		{"command name with spaces and parentheses", "17 (a) b (c ) d)" + tail, 4242, false},
		{"no command name", "17 sleep S 1 2", 0, true},
		{"cut short", "17 (sleep) S 1 2 3", 0, true},
		{"start not a number", "17 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -4 20", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStart([]byte(tc.stat))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStart = %d, %v; want %d (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
	if _, err := processStart(os.Getpid()); err != nil {
		t.Fatalf("this process's start: %v", err)
	}
}

// writeRecord writes a lab record with owner o (nil: none) into a new dir under root.
func writeRecord(t *testing.T, root, name string, o *owner) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(record{Prefix: "px", Owner: o})
	if err := os.WriteFile(filepath.Join(dir, "lab.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReapOrphansChoosesEndedOwners(t *testing.T) {
	root := t.TempDir()
	self, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := writeRecord(t, root, "lab-dead", &owner{Pid: ended.Process.Pid, Start: 1})
	reused := writeRecord(t, root, "lab-reused", &owner{Pid: os.Getpid(), Start: self + 1})
	live := writeRecord(t, root, "lab-live", &owner{Pid: os.Getpid(), Start: self})
	unowned := writeRecord(t, root, "lab-unowned", nil)
	notLab := filepath.Join(root, "lab-files")
	if err := os.MkdirAll(notLab, 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := ReapOrphans(context.Background(), filepath.Join(root, "lab-*"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{dead, reused}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("reaped %v, want %v", got, want)
	}
	for dir, kept := range map[string]bool{dead: false, reused: false, live: true, unowned: true, notLab: true} {
		if _, err := os.Stat(dir); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", filepath.Base(dir), err == nil, kept)
		}
	}

	bad := writeRecord(t, root, "lab-bad", nil)
	if err := os.WriteFile(filepath.Join(bad, "lab.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReapOrphans(context.Background(), filepath.Join(root, "lab-*")); err == nil || !strings.Contains(err.Error(), "lab-bad/lab.json") {
		t.Fatalf("a corrupt record: error %v, want one naming lab-bad/lab.json", err)
	}
}

// ownerHelperEnv makes the test binary the owner of a lab network in the directory
// it names, until it is killed.
const ownerHelperEnv = "PLINTH_LAB_OWNER_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(ownerHelperEnv); dir != "" {
		os.Exit(ownerHelper(dir, os.Getenv(ownerHelperEnv+"_PREFIX"), os.Getenv(ownerHelperEnv+"_GW")))
	}
	os.Exit(m.Run())
}

func ownerHelper(dir, prefix, gw string) int {
	l := New(dir, "", prefix)
	if err := l.OwnedByThisProcess(); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := l.Network(context.Background(), gw); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

// TestReapOrphansKilledOwner kills the process that built a lab network, as a killed
// test run would be, and checks the reaper removes its bridge and forward guard.
func TestReapOrphansKilledOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a bridge and an nftables table")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	root := t.TempDir()
	dir := filepath.Join(root, "lab-killed")
	prefix := fmt.Sprintf("pr%d", rand.IntN(1e6))
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), ownerHelperEnv+"="+dir, ownerHelperEnv+"_PREFIX="+prefix,
		fmt.Sprintf("%s_GW=10.251.%d.1/24", ownerHelperEnv, rand.IntN(250)))
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); removeNetwork(context.Background(), prefix+"br", prefix+"guard") })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("owner process: %q", line)
	}
	if _, err := net.InterfaceByName(prefix + "br"); err != nil {
		t.Fatalf("the owner's bridge: %v", err)
	}

	// While the owner runs, its lab stays.
	if got, err := ReapOrphans(context.Background(), filepath.Join(root, "lab-*")); err != nil || len(got) != 0 {
		t.Fatalf("owner running: reaped %v, %v; want nothing", got, err)
	}
	_ = helper.Process.Kill()
	_ = helper.Wait()
	got, err := ReapOrphans(context.Background(), filepath.Join(root, "lab-*"))
	if err != nil || len(got) != 1 || got[0] != dir {
		t.Fatalf("owner killed: reaped %v, %v; want %s", got, err, dir)
	}
	if _, err := net.InterfaceByName(prefix + "br"); err == nil {
		t.Errorf("bridge %sbr is still there", prefix)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", prefix+"guard").CombinedOutput(); err == nil {
		t.Errorf("table %sguard is still there:\n%s", prefix, out)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s is still there", dir)
	}
}
