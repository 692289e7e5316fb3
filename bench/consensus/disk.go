package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// flushes are a disk's flush counters from /proc/diskstats (fields 16 and 17:
// requests completed, milliseconds spent). Both systems fsync every commit, and the
// cost of a flush on a virtual disk moves between regimes minutes apart, so each
// write window says what a flush cost during it: a ratio between windows of
// different regimes measures the disk, not the systems.
type flushes struct {
	n, ms uint64
	ok    bool
}

// scratchDisk is the whole disk holding the scratch directory ("" if unknown).
var scratchDisk string

// diskOf names the whole disk that holds dir (a partition's parent).
func diskOf(dir string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return ""
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	p, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(p, "partition")); err == nil {
		p = filepath.Dir(p)
	}
	return filepath.Base(p)
}

func readFlushes(disk string) flushes {
	if disk == "" {
		return flushes{}
	}
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return flushes{}
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 20 || f[2] != disk {
			continue
		}
		n, err1 := strconv.ParseUint(f[18], 10, 64)
		ms, err2 := strconv.ParseUint(f[19], 10, 64)
		return flushes{n: n, ms: ms, ok: err1 == nil && err2 == nil}
	}
	return flushes{}
}

// since is the mean flush time from f0 to f (0 when unknown or none).
func (f flushes) since(f0 flushes) (time.Duration, uint64) {
	if !f.ok || !f0.ok || f.n <= f0.n {
		return 0, 0
	}
	n := f.n - f0.n
	return time.Duration(float64(f.ms-f0.ms) / float64(n) * float64(time.Millisecond)), n
}
