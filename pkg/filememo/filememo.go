// Package filememo remembers what a driver computed from a file (its SHA-256, the
// image names in an archive) per version of the file, on disk.
//
// Why on disk: every step run and drift pass is a new plinth-drivers process
// (pkg/driverexec), so a memo held in memory starts empty each time, and a drift
// pass every minute would re-read and hash every Kubernetes binary and image
// archive a host has, hundreds of megabytes to gigabytes, to find them unchanged.
//
// A file's version is its device, inode, size, modification and change times. The
// change time cannot be set from user space, so a file rewritten in place and
// touched back to its old modification time is still a new version. A memo that
// cannot be read is ignored (everything is computed again), and a lost write only
// costs a recomputation, so writers need no lock across processes.
package filememo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
)

// Version identifies one version of a file's content.
type Version struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"` // Unix nanoseconds
	Ctime int64  `json:"ctime"` // Unix nanoseconds
}

// VersionOf is fi's version.
func VersionOf(fi os.FileInfo) Version {
	v := Version{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.Dev, v.Ino = uint64(st.Dev), st.Ino
		v.Ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
	return v
}

// format is the memo file's version; a file of another is ignored.
const format = 1

type entry[T any] struct {
	Version Version `json:"version"`
	Value   T       `json:"value"`
}

type file[T any] struct {
	Format int                 `json:"format"`
	Files  map[string]entry[T] `json:"files"`
}

// Memo holds values of type T (JSON-encodable) per file path and version, kept in
// one JSON file. It is safe for concurrent use.
type Memo[T any] struct {
	path   string
	mu     sync.Mutex
	loaded bool
	m      map[string]entry[T]
}

// New returns the memo kept at path (read at first use; created at the first Put).
// With path "" it is held in memory only.
func New[T any](path string) *Memo[T] { return &Memo[T]{path: path} }

// racyWindow is how recently a file may have changed for a value computed from it
// not to be remembered. File times advance in clock ticks (whole seconds on some
// file systems), so a write in the tick of the stat that began a computation can
// leave the version as it was: only a file that was already older than this when
// the computation began is known to have had that content throughout.
var racyWindow = 2 * time.Second

// Do returns what compute makes of f's content, which is the file name: the value
// remembered for f's version, or compute's, remembered when f kept its version
// while compute ran and was older than racyWindow when it began. hit says the value
// was remembered. A memo that cannot be written is returned as saveErr, with the
// value: it only costs a computation next time.
func (m *Memo[T]) Do(name string, f *os.File, compute func() (T, error)) (val T, hit bool, saveErr, err error) {
	began := time.Now()
	fi, err := f.Stat()
	if err != nil {
		return val, false, nil, err
	}
	v := VersionOf(fi)
	if val, ok := m.Get(name, v); ok {
		return val, true, nil, nil
	}
	if val, err = compute(); err != nil {
		return val, false, nil, err
	}
	after, err := f.Stat()
	if err != nil || VersionOf(after) != v || !settled(v, began) {
		return val, false, nil, nil
	}
	return val, false, m.Put(name, v, val), nil
}

// settled reports whether version v was older than racyWindow at t.
func settled(v Version, t time.Time) bool {
	limit := t.Add(-racyWindow).UnixNano()
	return v.Mtime < limit && v.Ctime < limit
}

// Get returns what was remembered for name at version v. The value is the memo's
// own: callers must not change it (a slice's elements, a map).
func (m *Memo[T]) Get(name string, v Version) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.load()
	e, ok := m.m[name]
	if !ok || e.Version != v {
		var zero T
		return zero, false
	}
	return e.Value, true
}

// Put remembers val for name at version v and writes the memo file, dropping the
// files that are gone. A write that fails is returned but loses nothing Get relies
// on: the value is still held here.
func (m *Memo[T]) Put(name string, v Version, val T) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.load()
	m.m[name] = entry[T]{Version: v, Value: val}
	if m.path == "" {
		return nil
	}
	for k := range m.m {
		if _, err := os.Lstat(k); k != name && errors.Is(err, fs.ErrNotExist) {
			delete(m.m, k)
		}
	}
	b, err := json.Marshal(file[T]{Format: format, Files: m.m})
	if err != nil {
		return fmt.Errorf("filememo: encode %s: %w", m.path, err)
	}
	if err := atomicfile.WriteFile(m.path, b, 0o600); err != nil {
		return fmt.Errorf("filememo: write %s: %w", m.path, err)
	}
	return nil
}

// load reads the memo file once; a missing, unreadable or foreign one is empty.
func (m *Memo[T]) load() {
	if m.loaded {
		return
	}
	m.loaded = true
	m.m = map[string]entry[T]{}
	if m.path == "" {
		return
	}
	b, err := os.ReadFile(m.path)
	if err != nil {
		return
	}
	var f file[T]
	if json.Unmarshal(b, &f) != nil || f.Format != format {
		return
	}
	for k, e := range f.Files {
		m.m[k] = e
	}
}
