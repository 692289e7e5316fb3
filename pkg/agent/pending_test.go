package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
)

func TestPendingRoundTripAndOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pending")
	s := newPendingStore(dir)
	put := func(id string, res driver.Result) Pending {
		t.Helper()
		p, err := s.Put(Pending{ID: id, Kind: "host.network", InputsHash: "h-" + id, Result: res})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	put("b/host.network", driver.Result{Changes: []string{"mtu eth1: 1500 -> 9000"}})
	a1 := put("a/host.network", driver.Result{Error: "boom", Retryable: true})
	put("c/kube.join/x", driver.Result{Outputs: map[string]string{"k": "secret"}})
	a2 := put("a/host.network", driver.Result{}) // replaces a1, now the newest

	// A fresh store (as after a restart) lists the oldest first, one per step.
	got, err := newPendingStore(dir).List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	if want := "b/host.network c/kube.join/x a/host.network"; strings.Join(ids, " ") != want {
		t.Fatalf("replay order = %v, want %s", ids, want)
	}
	if got[2].Seq != a2.Seq || !got[2].Result.OK() || got[0].Result.Changes[0] != "mtu eth1: 1500 -> 9000" || got[1].Result.Outputs["k"] != "secret" {
		t.Fatalf("round trip lost data: %+v", got)
	}

	// Results may hold secrets: files are 0600 in a 0700 directory.
	for _, e := range mustReadDir(t, dir) {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %o, want 600", e.Name(), fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("pending dir has mode %o, want 700", fi.Mode().Perm())
	}

	// Deleting the superseded result keeps the newer one.
	if err := s.Delete("a/host.network", a1.Seq); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.List(); len(got) != 3 {
		t.Fatalf("delete of an old seq removed the newer result: %v", got)
	}
	if err := s.Delete("a/host.network", a2.Seq); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.List(); len(got) != 2 {
		t.Fatalf("after delete: %d pending, want 2", len(got))
	}
	// Later results sort after everything already on disk, even with a new store.
	s2 := newPendingStore(dir)
	if _, err := s2.List(); err != nil {
		t.Fatal(err)
	}
	p, err := s2.Put(Pending{ID: "d/x", InputsHash: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.List(); got[len(got)-1].Seq != p.Seq {
		t.Fatalf("new result not last: %+v", got)
	}
	// A store that neither wrote nor listed the file reads its seq before removing it.
	s3 := newPendingStore(dir)
	if err := s3.Delete("d/x", p.Seq-1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s3.path("d/x")); err != nil {
		t.Fatalf("delete of an older seq by a fresh store removed the result: %v", err)
	}
	if err := s3.Delete("d/x", p.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s3.path("d/x")); !os.IsNotExist(err) {
		t.Fatalf("result still there after its delete: %v", err)
	}
	// The directory removed under a running store is made again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Put(Pending{ID: "e/x", InputsHash: "h"}); err != nil {
		t.Fatalf("put after the directory was removed: %v", err)
	}
}

func TestPendingCorruptFileIsKept(t *testing.T) {
	dir := t.TempDir()
	s := newPendingStore(dir)
	if _, err := s.Put(Pending{ID: "a/x", InputsHash: "h"}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "zz.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.List()
	if err == nil || len(got) != 1 {
		t.Fatalf("List = %v, %v; want the good one and an error", got, err)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Fatalf("corrupt file was removed: %v", err)
	}
}

func TestSanitizeID(t *testing.T) {
	ids := []string{"a/b", "a_2Fb", "a_b", "a/b_c", "a_b/c", ".hidden", "_2Ehidden", "h/kube.join/x", "../../etc/passwd", "ä/x"}
	seen := map[string]string{}
	for _, id := range ids {
		n := sanitizeID(id)
		if strings.ContainsAny(n, "/\\") || strings.HasPrefix(n, ".") || n == "" {
			t.Errorf("sanitizeID(%q) = %q: not a plain visible file name", id, n)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("sanitizeID(%q) = sanitizeID(%q) = %q", id, other, n)
		}
		seen[n] = id
	}
	if got := sanitizeID("compute-0/host.network"); got != "compute-0_2Fhost.network" {
		t.Errorf("sanitizeID = %q", got)
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}
