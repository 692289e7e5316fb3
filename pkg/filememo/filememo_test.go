package filememo

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func stat(t *testing.T, p string) Version {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return VersionOf(fi)
}

// What one process remembered, the next one finds, for that version of the file
// only; a file rewritten and touched back to its old mtime is a new version.
func TestRememberedAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	memo := filepath.Join(dir, "state", "sums.json")
	bin := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(bin, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	v1 := stat(t, bin)
	if _, ok := New[string](memo).Get(bin, v1); ok {
		t.Fatal("an empty memo remembered something")
	}
	if err := New[string](memo).Put(bin, v1, "sum-1"); err != nil {
		t.Fatal(err)
	}
	if got, ok := New[string](memo).Get(bin, v1); !ok || got != "sum-1" {
		t.Fatalf("a new memo on the same file: %q, %v", got, ok)
	}
	if fi, _ := os.Stat(memo); fi.Mode().Perm() != 0o600 {
		t.Errorf("memo file mode %v, want 0600", fi.Mode().Perm())
	}

	// Same size, same mtime, new content: the change time tells them apart (written
	// until the clock tick has moved on).
	old := time.Unix(0, v1.Mtime)
	var v2 Version
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		if err := os.WriteFile(bin, []byte("v2"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(bin, old, old); err != nil {
			t.Fatal(err)
		}
		if v2 = stat(t, bin); v2.Ctime != v1.Ctime {
			break
		}
	}
	if v2.Size != v1.Size || v2.Mtime != v1.Mtime || v2 == v1 {
		t.Fatalf("versions %+v and %+v: want the same size and mtime, another ctime", v1, v2)
	}
	if _, ok := New[string](memo).Get(bin, v2); ok {
		t.Fatal("a file rewritten in place kept its old value")
	}
}

// An unreadable or foreign memo file is empty, not an error; Put replaces it, and
// forgets files that are gone.
func TestBadMemoAndGoneFiles(t *testing.T) {
	dir := t.TempDir()
	memo := filepath.Join(dir, "sums.json")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, junk := range []string{"not json", `{"format":99,"files":{}}`, `{"format":1,"files":{"x":{"version":"bad"}}}`} {
		if err := os.WriteFile(memo, []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		m := New[[]string](memo)
		if _, ok := m.Get(a, stat(t, a)); ok {
			t.Fatalf("memo %q: remembered something", junk)
		}
		if err := m.Put(a, stat(t, a), []string{"x"}); err != nil {
			t.Fatalf("memo %q: %v", junk, err)
		}
	}
	m := New[[]string](memo)
	if err := m.Put(b, stat(t, b), []string{"y"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := New[[]string](memo).Put(b, stat(t, b), []string{"z"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(memo)
	if got, ok := New[[]string](memo).Get(b, stat(t, b)); !ok || len(got) != 1 || got[0] != "z" {
		t.Fatalf("b: %v %v", got, ok)
	}
	if n := len(New[[]string](memo).heldEntries()); n != 1 {
		t.Fatalf("memo keeps %d files after a was removed: %s", n, raw)
	}
}

// heldEntries is what the memo holds after loading.
func (m *Memo[T]) heldEntries() map[string]entry[T] {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.load()
	return m.m
}

// Do computes once per settled version: a file that changed within racyWindow of the
// computation, or while it ran, is computed again next time.
func TestDoRemembersOnlySettledFiles(t *testing.T) {
	old := racyWindow
	racyWindow = 200 * time.Millisecond
	defer func() { racyWindow = old }()
	dir := t.TempDir()
	memo := filepath.Join(dir, "sums.json")
	p := filepath.Join(dir, "etcd")
	if err := os.WriteFile(p, []byte("etcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	calls := 0
	do := func(change func()) (string, bool) {
		t.Helper()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		val, hit, saveErr, err := New[string](memo).Do(p, f, func() (string, error) {
			calls++
			if change != nil {
				change()
			}
			return "computed", nil
		})
		if err != nil || saveErr != nil || val != "computed" {
			t.Fatalf("Do: %q, %v, %v", val, saveErr, err)
		}
		return val, hit
	}
	if _, hit := do(nil); hit || calls != 1 {
		t.Fatalf("first: hit %v, %d calls", hit, calls)
	}
	if _, hit := do(nil); hit || calls != 2 {
		t.Fatal("a file written a moment ago was remembered")
	}
	time.Sleep(racyWindow + 50*time.Millisecond)
	// Rewritten while computed: not remembered.
	if _, hit := do(func() { os.WriteFile(p, []byte("ETCD"), 0o755) }); hit || calls != 3 {
		t.Fatalf("changed while computed: hit %v, %d calls", hit, calls)
	}
	time.Sleep(racyWindow + 50*time.Millisecond)
	if _, hit := do(nil); hit || calls != 4 {
		t.Fatalf("settled, first time: hit %v, %d calls", hit, calls)
	}
	if _, hit := do(nil); !hit || calls != 4 {
		t.Fatalf("settled, second time: hit %v, %d calls", hit, calls)
	}
}
