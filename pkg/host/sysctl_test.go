package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

func readProc(t testing.TB, key string) string {
	t.Helper()
	v, err := readValue(filepath.Join("/proc/sys", sysctlRel(key)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// net.* sysctls belong to the network namespace: these are set for real, in a fresh
// one, and the root namespace's values are checked to be untouched.
func TestSysctlInNamespace(t *testing.T) {
	rootForward := readProc(t, "net.ipv4.ip_forward")
	n := newNS(t)
	dir := t.TempDir()
	n.run(t, func() {
		d := NewSysctlDriver(dir)
		in := mustJSON(t, hostspec.SysctlInputs{Sysctls: []hostspec.SysctlSpec{
			{Key: "net.ipv4.ip_forward", Value: "1"},
			{Key: "net.ipv4.conf.all.rp_filter", Value: "2"},
			{Key: "net.ipv4.ip_local_port_range", Value: "20000\t40000"},
			{Key: "net.bridge.no-such-knob", Value: "1", Optional: true},
		}})
		before := readProc(t, "net.ipv4.ip_local_port_range")
		got := mustRun(t, d, in)
		want := []string{
			"sysctl net.ipv4.conf.all.rp_filter: 0 -> 2",
			"sysctl net.ipv4.ip_forward: 0 -> 1",
			"sysctl net.ipv4.ip_local_port_range: " + before + " -> 20000 40000",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("changes %q\nwant    %q", got, want)
		}
		if readProc(t, "net.ipv4.ip_forward") != "1" || readProc(t, "net.ipv4.conf.all.rp_filter") != "2" {
			t.Error("values not set")
		}
		if again := mustRun(t, d, in); len(again) != 0 {
			t.Errorf("second run changed %q", again)
		}

		// Drift: changed by hand, reported, repaired.
		if err := writeValue("/proc/sys/net/ipv4/ip_forward", "0"); err != nil {
			t.Fatal(err)
		}
		drift, err := driver.Check(context.Background(), d, in)
		if err != nil || !slices.Equal(drift, []string{"sysctl net.ipv4.ip_forward: 0 -> 1"}) {
			t.Errorf("check %q %v", drift, err)
		}
		mustRun(t, d, in)

		// Dropped from the inputs: back to what Plinth found.
		got = mustRun(t, d, mustJSON(t, hostspec.SysctlInputs{Sysctls: []hostspec.SysctlSpec{{Key: "net.ipv4.conf.all.rp_filter", Value: "2"}}}))
		want = []string{
			"sysctl net.ipv4.ip_forward: 1 -> 0 (restored: no longer declared)",
			"sysctl net.ipv4.ip_local_port_range: 20000 40000 -> " + before + " (restored: no longer declared)",
		}
		if !slices.Equal(got, want) {
			t.Errorf("changes %q\nwant    %q", got, want)
		}
		if readProc(t, "net.ipv4.ip_forward") != "0" || readProc(t, "net.ipv4.ip_local_port_range") != before {
			t.Error("values not restored")
		}
	})
	if got := readProc(t, "net.ipv4.ip_forward"); got != rootForward {
		t.Errorf("root namespace ip_forward changed: %s -> %s", rootForward, got)
	}
}

// Other sysctls are host-wide: tested against a directory standing in for /proc/sys.
func TestSysctlFakeRoot(t *testing.T) {
	root := t.TempDir()
	for path, v := range map[string]string{"vm/swappiness": "60\n", "kernel/pid_max": "32768\n"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755)
		if err := os.WriteFile(filepath.Join(root, path), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := NewSysctlDriver(t.TempDir(), WithProcSys(root))
	in := mustJSON(t, hostspec.SysctlInputs{Sysctls: []hostspec.SysctlSpec{{Key: "vm.swappiness", Value: "10"}, {Key: "kernel.pid_max", Value: "32768"}}})
	if got := mustRun(t, d, in); !slices.Equal(got, []string{"sysctl vm.swappiness: 60 -> 10"}) {
		t.Errorf("changes %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "vm/swappiness")); string(b) != "10\n" {
		t.Errorf("swappiness %q", b)
	}
	_, err := d.Diff(context.Background(), mustJSON(t, hostspec.SysctlInputs{Sysctls: []hostspec.SysctlSpec{{Key: "vm.no_such", Value: "1"}}}))
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "sysctl vm.no_such: this kernel has no such parameter") {
		t.Errorf("missing key: %v", err)
	}
	for name, raw := range map[string]string{
		"escape":    `{"sysctls":[{"key":"net.ipv4/../../x","value":"1"}]}`,
		"one part":  `{"sysctls":[{"key":"swappiness","value":"1"}]}`,
		"empty":     `{"sysctls":[{"key":"vm.swappiness","value":" "}]}`,
		"newline":   `{"sysctls":[{"key":"vm.swappiness","value":"1\n2"}]}`,
		"twice":     `{"sysctls":[{"key":"vm.swappiness","value":"1"},{"key":"vm.swappiness","value":"2"}]}`,
		"bad field": `{"sysctls":[{"name":"vm.swappiness","value":"1"}]}`,
	} {
		if _, err := d.Diff(context.Background(), []byte(raw)); !driver.IsPermanent(err) {
			t.Errorf("%s: err %v, want permanent", name, err)
		}
	}
	if got, want := sysctlRel("net.ipv4.conf.eth0/100.rp_filter"), "net/ipv4/conf/eth0.100/rp_filter"; got != want {
		t.Errorf("sysctlRel = %q, want %q", got, want)
	}
}
