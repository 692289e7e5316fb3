package consensus

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walmetrics "github.com/hashicorp/raft-wal/metrics"
	"github.com/hashicorp/raft-wal/migrate"
	"go.etcd.io/bbolt"
)

// logStore is the Raft log and stable store: raft-wal's segmented, append-only
// log in DataDir/wal, held under an exclusive lock on DataDir/lock.
//
// Why not raft-boltdb, which Plinth used first: bolt is a copy-on-write B-tree, so
// every append rewrote tree pages and its freelist before the fsync, and that CPU
// was on the write path of every command (bench-consensus, seven runs each
// alternating on one machine: a third more writes a second with the WAL,
// medians). A data directory left by that version is migrated on open
// (migrateBolt).
type logStore struct {
	*wal.WAL
	lock  *os.File
	stats *walmetrics.AtomicCollector // raft-wal's counters (Node.LogBytesWritten)
}

// Close closes the WAL, then releases the directory lock.
func (s *logStore) Close() error {
	err := s.WAL.Close()
	if lerr := s.lock.Close(); err == nil && lerr != nil {
		err = fmt.Errorf("consensus: release %s: %w", s.lock.Name(), lerr)
	}
	return err
}

// init gives the standard logger back. raft-wal preallocates segments with
// etcd's fileutil, whose capnslog takes over the standard logger when it is
// initialised (which is before this package is); the coordinator's libraries
// that log through it would otherwise write in capnslog's format, or straight to
// journald under systemd, instead of to stderr like everything else.
func init() {
	stdlog.SetOutput(os.Stderr)
	stdlog.SetFlags(stdlog.LstdFlags)
	stdlog.SetPrefix("")
}

const (
	walDir   = "wal"
	lockFile = "lock"
	// boltFile is the raft-boltdb database of earlier versions; walMigrating the
	// WAL being filled from it, renamed to walDir only once complete.
	boltFile     = "raft.db"
	walMigrating = "wal.migrating"
	// boltOpenTimeout bounds waiting for the old database's own lock, which only a
	// process of an earlier version could hold (ours is DataDir/lock).
	boltOpenTimeout = time.Second
	// walSegmentSize is the size each log segment file is preallocated to (a soft
	// limit: a larger entry still fits). raft-wal's default is 64 MiB, reserved on
	// disk by every coordinator and test node; a site's writes are small (the first
	// apply of 1000 hosts appends 2.6 MiB, bench-scale), so a quarter of that
	// rotates rarely and lets truncation after a snapshot free space sooner.
	walSegmentSize = 16 << 20
	// migrateBatchBytes is how much log data each append of the migration carries.
	migrateBatchBytes = 1 << 20
)

// openLogStore locks dir, migrates a raft-boltdb database found there, and opens
// the WAL. The lock is taken without waiting: a second process on the same data
// directory gets an error at once instead of corrupting the log.
func openLogStore(dir string, log *slog.Logger) (*logStore, error) {
	return openLogStoreSized(dir, walSegmentSize, log)
}

// openLogStoreSized is openLogStore with segments of segmentSize bytes, which
// tests make small to rotate often.
func openLogStoreSized(dir string, segmentSize int, log *slog.Logger) (*logStore, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if err := migrateBolt(dir, log); err != nil {
		_ = lock.Close()
		return nil, err
	}
	path := filepath.Join(dir, walDir)
	if err := os.MkdirAll(path, 0o700); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("consensus: create %s: %w", path, err)
	}
	if _, err := finishRotation(path, segmentSize, log); err != nil {
		_ = lock.Close()
		return nil, err
	}
	stats := walmetrics.NewAtomicCollector(wal.MetricDefinitions)
	w, err := openWAL(path, segmentSize, log, stats)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("consensus: open raft log %s: %w", path, err)
	}
	return &logStore{WAL: w, lock: lock, stats: stats}, nil
}

func openWAL(dir string, segmentSize int, log *slog.Logger, stats walmetrics.Collector) (*wal.WAL, error) {
	return wal.Open(dir, wal.WithLogger(newHCLog(log, "raft-wal")), wal.WithSegmentSize(segmentSize), wal.WithMetricsCollector(stats))
}

// lockDir takes an exclusive, non-blocking flock on dir/lock. The kernel drops it
// when the process dies, so a killed coordinator never leaves it stale.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("consensus: open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("consensus: %s is locked: is raft running on %s elsewhere?", path, dir)
		}
		return nil, fmt.Errorf("consensus: lock %s: %w", path, err)
	}
	return f, nil
}

// migrateBolt moves the log and stable store of a raft-boltdb database
// (dir/raft.db) into the WAL. Every step is safe to repeat after a crash:
// the copy goes to dir/wal.migrating, which is only renamed to dir/wal once
// complete and synced, and raft.db is removed only after that rename. So a
// data directory holds either raft.db alone (copy again from scratch), or wal
// with or without raft.db (done; remove what is left). Needs the dir lock.
func migrateBolt(dir string, log *slog.Logger) error {
	boltPath := filepath.Join(dir, boltFile)
	if _, err := os.Stat(boltPath); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	walPath := filepath.Join(dir, walDir)
	if _, err := os.Stat(walPath); err == nil {
		// The rename below happened; only the removal did not.
		return removeBolt(dir, boltPath, log)
	}
	tmp := filepath.Join(dir, walMigrating)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("consensus: migrate: remove unfinished %s: %w", tmp, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	src, err := raftboltdb.New(raftboltdb.Options{
		Path:        boltPath,
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout, ReadOnly: true},
	})
	if err != nil {
		return fmt.Errorf("consensus: migrate: open %s: %w", boltPath, err)
	}
	defer src.Close()
	dst, err := openWAL(tmp, walSegmentSize, log, &walmetrics.NoOpCollector{})
	if err != nil {
		return fmt.Errorf("consensus: migrate: open %s: %w", tmp, err)
	}
	n, err := copyRaftStores(dst, src)
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("consensus: migrate %s to %s: %w", boltPath, tmp, err)
	}
	if err := os.Rename(tmp, walPath); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	log.Info("consensus: moved the raft log from raft-boltdb to the WAL", "from", boltPath, "to", walPath, "entries", n)
	return removeBolt(dir, boltPath, log)
}

func removeBolt(dir, boltPath string, log *slog.Logger) error {
	if err := os.Remove(boltPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("consensus: migrate: remove %s: %w", boltPath, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	log.Info("consensus: removed the migrated raft-boltdb database", "path", boltPath)
	return nil
}

// copyRaftStores copies every log entry and the stable keys raft sets from src
// to the empty dst, returning the number of entries copied. StableStore cannot
// list its keys, so they are named (raft.go's keyCurrentTerm and the rest); a
// key src never had (a server that never voted) is left unset, as raft expects.
func copyRaftStores(dst, src interface {
	raft.LogStore
	raft.StableStore
}) (uint64, error) {
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		if err := copyKey(k, src.GetUint64, dst.SetUint64); err != nil {
			return 0, err
		}
	}
	if err := copyKey("LastVoteCand", src.Get, dst.Set); err != nil {
		return 0, err
	}
	last, err := src.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("last index: %w", err)
	}
	if last == 0 {
		return 0, nil
	}
	first, err := src.FirstIndex()
	if err != nil {
		return 0, fmt.Errorf("first index: %w", err)
	}
	if err := migrate.CopyLogs(context.Background(), dst, src, migrateBatchBytes, nil); err != nil {
		return 0, err
	}
	return last - first + 1, nil
}

// copyKey copies one stable-store key, skipping one raft-boltdb never stored.
func copyKey[T any](key string, get func([]byte) (T, error), set func([]byte, T) error) error {
	v, err := get([]byte(key))
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if err := set([]byte(key), v); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
