package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

func fakeSysfs(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, v := range files {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestHugepagesFakeSysfs(t *testing.T) {
	const (
		global = "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
		node0  = "devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages"
	)
	root := fakeSysfs(t, map[string]string{global: "0\n", node0: "1\n"})
	read := func(p string) string {
		b, _ := os.ReadFile(filepath.Join(root, p))
		return strings.TrimSpace(string(b))
	}
	d := NewHugepagesDriver(t.TempDir(), WithSysfs(root))
	zero := 0
	in := mustJSON(t, hostspec.HugepagesInputs{Pages: []hostspec.HugepageSpec{{SizeKB: 2048, Count: 512}, {SizeKB: 1048576, Node: &zero, Count: 4}}})
	got := mustRun(t, d, in)
	if want := []string{"hugepages 2048kB: 0 -> 512 pages", "hugepages 1048576kB on node0: 1 -> 4 pages"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	if read(global) != "512" || read(node0) != "4" {
		t.Errorf("counts %s %s", read(global), read(node0))
	}
	if again := mustRun(t, d, in); len(again) != 0 {
		t.Errorf("second run changed %q", again)
	}
	// Drift, then removal of one reservation: its count goes back to what it was.
	os.WriteFile(filepath.Join(root, node0), []byte("3\n"), 0o644)
	if drift, err := driver.Check(context.Background(), d, in); err != nil || !slices.Equal(drift, []string{"hugepages 1048576kB on node0: 3 -> 4 pages"}) {
		t.Errorf("check %q %v", drift, err)
	}
	got = mustRun(t, d, mustJSON(t, hostspec.HugepagesInputs{Pages: []hostspec.HugepageSpec{{SizeKB: 2048, Count: 512}}}))
	if want := []string{"hugepages 1048576kB on node0: 3 -> 1 pages (restored: no longer declared)"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	if read(node0) != "1" {
		t.Errorf("node0 count %s, want the original 1", read(node0))
	}

	one := 1
	_, err := d.Diff(context.Background(), mustJSON(t, hostspec.HugepagesInputs{Pages: []hostspec.HugepageSpec{{SizeKB: 2048, Node: &one, Count: 1}}}))
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "hugepages 2048kB on node1: this host has no such pool") {
		t.Errorf("missing node: %v", err)
	}
}

// The real sysfs is only read: the pool of the default size is diffed against its
// current count and one more, and nothing is applied.
func TestHugepagesRealSysfsReadOnly(t *testing.T) {
	const path = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	cur, err := readValue(path)
	if err != nil {
		t.Skipf("no 2048kB hugepages here: %v", err)
	}
	n, _ := strconv.Atoi(cur)
	d := NewHugepagesDriver(t.TempDir())
	for count, want := range map[int][]string{n: nil, n + 1: {fmt.Sprintf("hugepages 2048kB: %d -> %d pages", n, n+1)}} {
		cs, err := d.Diff(context.Background(), mustJSON(t, hostspec.HugepagesInputs{Pages: []hostspec.HugepageSpec{{SizeKB: 2048, Count: count}}}))
		if err != nil || !slices.Equal(summaries(cs), want) {
			t.Errorf("count %d: %q %v, want %q", count, summaries(cs), err, want)
		}
	}
	if after, _ := readValue(path); after != cur {
		t.Errorf("nr_hugepages changed %s -> %s", cur, after)
	}
}
