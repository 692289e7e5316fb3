package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// owner is the process a lab must not outlive (a test or bench run). A run that is
// killed cannot take its lab down, and a lab left behind holds its networks, so the
// next run on the machine fails; ReapOrphans removes such labs. The start time tells
// the owner from a later process that was given the same pid.
type owner struct {
	Pid int `json:"pid"`
	// Start is the process's start time in clock ticks since boot (/proc/PID/stat).
	Start uint64 `json:"start"`
}

// OwnedByThisProcess records the running process as the lab's owner: once it has
// ended, ReapOrphans takes the lab down. Labs meant to outlive the process that
// built them (plinth-lab up) have no owner.
func (l *Lab) OwnedByThisProcess() error {
	start, err := processStart(os.Getpid())
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.owner = &owner{Pid: os.Getpid(), Start: start}
	l.mu.Unlock()
	return l.save()
}

// processStart reads a process's start time; os.ErrNotExist when there is none.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("lab: process %d: %w", pid, err)
	}
	return parseStart(b)
}

// parseStart takes starttime, field 22 of /proc/PID/stat. The command name (field 2)
// may hold spaces and parentheses, so fields are counted after its last ')'.
func parseStart(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("lab: /proc stat %.40q: no command name", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("lab: /proc stat has %d fields after the command name, want at least 20", len(f))
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("lab: /proc stat start time %q: %w", f[19], err)
	}
	return v, nil
}

// gone reports whether the owner process has ended.
func (o owner) gone() bool {
	start, err := processStart(o.Pid)
	return errors.Is(err, os.ErrNotExist) || (err == nil && start != o.Start)
}

// ReapOrphans takes down every lab in the directories matching pattern (a
// filepath.Glob pattern) whose owner has ended, and returns those directories. Labs
// with no owner, or whose owner still runs, are left alone.
func ReapOrphans(ctx context.Context, pattern string) ([]string, error) {
	dirs, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("lab: reap %q: %w", pattern, err)
	}
	var reaped []string
	var errs []error
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "lab.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("lab: %w", err))
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			errs = append(errs, fmt.Errorf("lab: %s/lab.json: %w", dir, err))
			continue
		}
		if r.Owner == nil || !r.Owner.gone() {
			continue
		}
		if err := DownDir(ctx, dir); err != nil {
			errs = append(errs, fmt.Errorf("lab: reap %s (its owner, process %d, has ended): %w", dir, r.Owner.Pid, err))
			continue
		}
		reaped = append(reaped, dir)
	}
	return reaped, errors.Join(errs...)
}
