package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// RotationFinished is logged when the log store finished a segment rotation a
// stop had interrupted (finishRotation).
const RotationFinished = "consensus: finished a raft log segment rotation a stop interrupted"

// finishRotation completes a segment rotation that a stop interrupted, before
// raft-wal opens the log.
//
// Why: raft-wal (v0.4.2) seals a full tail segment inside an append, by writing
// an index block before the batch's commit frame and fsync, and only then, in a
// background goroutine, records the seal in its meta database and starts the
// next segment. A process killed between the two, or closed while the
// rotation was queued, leaves a tail that is sealed on disk but open in the
// meta. wal.Open recovers that tail as a writer that is already sealed and never
// rotates it, so every later append fails with "segment is sealed" and raft
// can never commit again on this member (seen in TestSnapshotKills after a kill
// -9 during an operator restore, whose 7.9 MB entries rotate often).
//
// The repair is the rotation raft-wal would have done, made through its own
// segment and meta packages: mark the tail sealed at the last entry its commit
// frames hold, and add an empty next segment that wal.Open then creates. The
// seal is used only if every entry reads back through the sealed index the same
// as through the recovered tail; otherwise the log is left untouched and the
// error says so. It runs with the data directory locked and is idempotent: a
// kill before the meta commit leaves the state it started from, and after it
// the log opens normally. It reports whether it repaired anything.
func finishRotation(dir string, segmentSize int, log *slog.Logger) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, metadb.FileName)); errors.Is(err, os.ErrNotExist) {
		return false, nil // a new log: raft-wal creates it
	} else if err != nil {
		return false, fmt.Errorf("consensus: raft log %s: %w", dir, err)
	}
	db := &metadb.BoltMetaDB{}
	st, err := db.Load(dir)
	if err != nil {
		_ = db.Close()
		return false, fmt.Errorf("consensus: raft log %s: read meta: %w", dir, err)
	}
	repaired, err := sealTail(dir, db, st, segmentSize, log)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("consensus: raft log %s: close meta: %w", dir, cerr)
	}
	return repaired, err
}

func sealTail(dir string, db *metadb.BoltMetaDB, st types.PersistentState, segmentSize int, log *slog.Logger) (bool, error) {
	if len(st.Segments) == 0 {
		return false, nil
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return false, nil // raft-wal starts a new tail itself
	}
	filer := segment.NewFiler(dir, fs.New())
	name := filepath.Join(dir, segment.FileName(tail))
	w, err := filer.RecoverTail(tail)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // the meta was committed, the file not yet made: raft-wal makes it
	}
	if err != nil {
		return false, fmt.Errorf("consensus: raft log: recover %s: %w", name, err)
	}
	defer w.Close()
	sealed, indexStart, err := w.Sealed()
	if err != nil {
		return false, fmt.Errorf("consensus: raft log: %s: %w", name, err)
	}
	if !sealed {
		return false, nil
	}
	last := w.LastIndex()
	if last < tail.MinIndex {
		return false, fmt.Errorf("consensus: raft log: %s is sealed on disk, but the meta starts it at index %d, after its last entry %d; Plinth does not guess which is right: re-add this coordinator from a wiped data dir (docs/operations.md)", name, tail.MinIndex, last)
	}
	tail.SealTime = time.Now()
	tail.MaxIndex = last
	tail.IndexStart = indexStart
	if err := sameThroughIndex(filer, tail, w); err != nil {
		return false, fmt.Errorf("consensus: raft log: %s is sealed on disk but its seal does not hold: %w; the log is left as it was: re-add this coordinator from a wiped data dir (docs/operations.md)", name, err)
	}
	next := types.SegmentInfo{
		ID:         st.NextSegmentID,
		BaseIndex:  last + 1,
		MinIndex:   last + 1,
		SizeLimit:  uint32(segmentSize),
		Codec:      tail.Codec,
		CreateTime: time.Now(),
	}
	st.Segments[len(st.Segments)-1] = tail
	st.Segments = append(st.Segments, next)
	st.NextSegmentID++
	if err := db.CommitState(st); err != nil {
		return false, fmt.Errorf("consensus: raft log %s: record the seal of %s: %w", dir, name, err)
	}
	log.Warn(RotationFinished, "segment", name, "entries", fmt.Sprintf("%d..%d", tail.MinIndex, last), "next", segment.FileName(next))
	return true, nil
}

// sameThroughIndex reads every entry of the sealed segment through its index
// block and compares it with the entry the recovered tail found by scanning
// the commit frames.
func sameThroughIndex(filer *segment.Filer, info types.SegmentInfo, scanned types.SegmentReader) error {
	r, err := filer.Open(info)
	if err != nil {
		return err
	}
	defer r.Close()
	for i := info.MinIndex; i <= info.MaxIndex; i++ {
		a, err := scanned.GetLog(i)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		b, err := r.GetLog(i)
		if err != nil {
			_ = a.Close()
			return fmt.Errorf("entry %d through the index: %w", i, err)
		}
		same := bytes.Equal(a.Bs, b.Bs)
		_, _ = a.Close(), b.Close()
		if !same {
			return fmt.Errorf("entry %d differs through the index", i)
		}
	}
	return nil
}
