package nspawn

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountPoints returns the mount points of /proc/self/mountinfo at or under dir, in
// mount order (unmount them last first).
func MountPoints(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything at or under dir, deepest first.
func unmountUnder(dir string) error {
	for attempt := 0; attempt < 3; attempt++ {
		mps, err := MountPoints(dir)
		if err != nil || len(mps) == 0 {
			return err
		}
		sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
		for _, mp := range mps {
			if err := unix.Unmount(mp, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				_ = unix.Unmount(mp, unix.MNT_DETACH)
			}
		}
	}
	mps, err := MountPoints(dir)
	if err != nil {
		return err
	}
	if len(mps) > 0 {
		return fmt.Errorf("nspawn: still mounted under %s: %s", dir, strings.Join(mps, ", "))
	}
	return nil
}

// removeTree unmounts everything under dir and deletes it. It refuses to delete
// while anything is still mounted there (that would reach into the mounted fs).
func removeTree(dir string) error {
	dir = filepath.Clean(dir)
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("nspawn: remove %s: %w", dir, err)
	}
	return nil
}
