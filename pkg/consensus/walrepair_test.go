package consensus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	walmetrics "github.com/hashicorp/raft-wal/metrics"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// testSegmentSize makes the tests' segments rotate every few entries.
const testSegmentSize = 64 << 10

// walEntry is the log entry the tests write at index i: its data says its
// index, padded so that a few fill a test segment.
func walEntry(i uint64) *raft.Log {
	data := bytes.Repeat([]byte(strconv.FormatUint(i, 10)+";"), 600)
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data}
}

// testTail is the one segment the crash-state tests' meta lists, open.
var testTail = types.SegmentInfo{ID: 1, BaseIndex: 1, MinIndex: 1, SizeLimit: testSegmentSize, Codec: wal.CodecBinaryV1}

// tailOpenInMeta writes a meta that lists testTail open, creates its file and
// returns its writer: what raft-wal holds between two appends.
func tailOpenInMeta(t *testing.T, dir string) types.SegmentWriter {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db := &metadb.BoltMetaDB{}
	if _, err := db.Load(dir); err != nil {
		t.Fatal(err)
	}
	si := testTail
	si.CreateTime = time.Now()
	if err := db.CommitState(types.PersistentState{NextSegmentID: 2, Segments: []types.SegmentInfo{si}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := segment.NewFiler(dir, fs.New()).Create(si)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sealedTailOpenInMeta writes the state a stop between raft-wal's sealing
// append and its rotation leaves in dir: the meta lists one open segment, and
// that segment's file holds entries 1..n and a committed index block. It
// returns n and where the index block's offsets start.
func sealedTailOpenInMeta(t *testing.T, dir string) (n, indexStart uint64) {
	t.Helper()
	w := tailOpenInMeta(t, dir)
	defer w.Close()
	var codec wal.BinaryCodec
	for i := uint64(1); ; i++ {
		var buf bytes.Buffer
		if err := codec.Encode(walEntry(i), &buf); err != nil {
			t.Fatal(err)
		}
		if err := w.Append([]types.LogEntry{{Index: i, Data: buf.Bytes()}}); err != nil {
			t.Fatal(err)
		}
		if sealed, at, _ := w.Sealed(); sealed {
			return i, at
		}
	}
}

// checkEntries fails unless s holds exactly walEntry(first..last).
func checkEntries(t *testing.T, s interface {
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	GetLog(uint64, *raft.Log) error
}, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("log holds %d..%d, want %d..%d", f, l, first, last)
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := walEntry(i); !bytes.Equal(got.Data, want.Data) || got.Index != i {
			t.Fatalf("entry %d reads back as index %d with %.20q…", i, got.Index, got.Data)
		}
	}
}

// A tail sealed on disk but open in the meta stops raft-wal for good; the
// store finishes the rotation on open and keeps every entry.
func TestOpenFinishesInterruptedRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, walDir)
	n, _ := sealedTailOpenInMeta(t, path)

	// The state is the one that stopped raft: raft-wal alone refuses to append.
	raw, err := openWAL(path, testSegmentSize, slog.New(slog.DiscardHandler), &walmetrics.NoOpCollector{})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.StoreLog(walEntry(n + 1)); !errors.Is(err, wal.ErrSealed) {
		t.Fatalf("raft-wal alone appending after the interrupted rotation: %v, want %v", err, wal.ErrSealed)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := openLogStoreSized(dir, testSegmentSize, newHarness(t).log)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, s, 1, n)
	if err := s.StoreLogs([]*raft.Log{walEntry(n + 1), walEntry(n + 2)}); err != nil {
		t.Fatalf("append after the repair: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if again, err := finishRotation(path, testSegmentSize, slog.New(slog.DiscardHandler)); again || err != nil {
		t.Fatalf("second repair: %v, %v; want nothing to do", again, err)
	}
	s, err = openLogStoreSized(dir, testSegmentSize, newHarness(t).log)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, s, 1, n+2)
	_ = s.Close()
}

// A seal that does not hold is not trusted: the open fails, names the segment,
// and leaves the meta as it was.
func TestOpenRefusesASealThatDoesNotHold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, dir, seg string)
		wants string
	}{
		{"the index points the second entry at the first", func(t *testing.T, dir, seg string) {
			_, indexStart := sealedTailOpenInMeta(t, dir)
			f, err := os.OpenFile(seg, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			first := make([]byte, 4)
			if _, err := f.ReadAt(first, int64(indexStart)); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(first, int64(indexStart)+4); err != nil {
				t.Fatal(err)
			}
		}, "seal does not hold"},
		// raft-wal never seals an empty segment (ForceSeal refuses), so only a meta
		// that disagrees with the file reaches this.
		{"the meta starts the segment after its last entry", func(t *testing.T, dir, _ string) {
			n, _ := sealedTailOpenInMeta(t, dir)
			db := &metadb.BoltMetaDB{}
			st, err := db.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st.Segments[0].MinIndex = n + 1
			if err := db.CommitState(st); err != nil {
				t.Fatal(err)
			}
		}, "after its last entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, walDir)
			seg := filepath.Join(path, segment.FileName(testTail))
			tc.make(t, path, seg)
			metaBefore, err := os.ReadFile(filepath.Join(path, metadb.FileName))
			if err != nil {
				t.Fatal(err)
			}
			_, err = openLogStoreSized(dir, testSegmentSize, newHarness(t).log)
			if err == nil || !strings.Contains(err.Error(), tc.wants) || !strings.Contains(err.Error(), seg) {
				t.Fatalf("open: %v; want it refused with %q naming %s", err, tc.wants, seg)
			}
			metaAfter, _ := os.ReadFile(filepath.Join(path, metadb.FileName))
			if !bytes.Equal(metaBefore, metaAfter) {
				t.Fatal("the refused repair changed the meta")
			}
		})
	}
}

// walWriterEnv makes the test binary a process that appends to the log in
// dir until it is killed, printing each index once acknowledged.
const walWriterEnv = "PLINTH_TEST_WAL_WRITER"

func runWALWriter(dir string) {
	s, err := openLogStoreSized(dir, testSegmentSize, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	next, _ := s.LastIndex()
	fmt.Println("ready")
	for {
		// Now and then drop the last entries, as raft clears a conflicting
		// suffix: raft-wal seals the tail for that too (ForceSeal).
		if first, _ := s.FirstIndex(); rand.IntN(8) == 0 && next > first+2 {
			fmt.Printf("-%d\n", next-2) // the entries above may go from here on
			if err := s.DeleteRange(next-1, next); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			next -= 2
		}
		batch := []*raft.Log{}
		for range 1 + rand.IntN(3) {
			next++
			batch = append(batch, walEntry(next))
		}
		if err := s.StoreLogs(batch); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println(next)
	}
}

// Processes appending to the log, and now and then truncating its tail, are
// killed at random moments, many of them during a segment rotation; every
// restart keeps each acknowledged entry and can append again.
func TestWALSurvivesKillsDuringRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 40 writer processes")
	}
	dir := t.TempDir()
	var acked uint64
	repairs := 0
	for round := range 40 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), walWriterEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		if !lines.Scan() || lines.Text() != "ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: the writer did not start (%q); the log it could not open is the failure", round, lines.Text())
		}
		// The writer prints the index each append acknowledged, and "-N" before
		// it truncates the log to N: the log may end later than the last line
		// (an append or a truncation in flight), never earlier.
		done := make(chan uint64)
		go func() {
			last := acked
			for lines.Scan() {
				last, _ = strconv.ParseUint(strings.TrimPrefix(lines.Text(), "-"), 10, 64)
			}
			done <- last
		}()
		time.Sleep(time.Duration(5+rand.IntN(60)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		last := <-done
		_, _ = io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Fatalf("round %d: writer: %v", round, err)
		}
		acked = last

		path := filepath.Join(dir, walDir)
		repaired, err := finishRotation(path, testSegmentSize, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if repaired {
			repairs++
		}
		s, err := openLogStoreSized(dir, testSegmentSize, newHarness(t).log)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		l, _ := s.LastIndex()
		if l < acked {
			t.Fatalf("round %d: log ends at %d, but %d was acknowledged", round, l, acked)
		}
		checkEntries(t, s, 1, l)
		if err := s.StoreLog(walEntry(l + 1)); err != nil {
			t.Fatalf("round %d: append after restart: %v", round, err)
		}
		acked = l + 1
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("40 kills, %d acknowledged entries kept, %d rotations finished on open", acked, repairs)
}
