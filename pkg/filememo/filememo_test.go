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

	// Same size, same mtime, new content: the change time tells them apart.
	old := time.Unix(0, v1.Mtime)
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(bin, []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	v2 := stat(t, bin)
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
