package nspawn

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hierarchy is one mounted cgroup hierarchy and this process's cgroup in it.
type hierarchy struct {
	mount string // e.g. /sys/fs/cgroup/memory
	own   string // this process's cgroup in it, e.g. /process_api/abc
}

// hierarchies lists every cgroup hierarchy mounted under /sys/fs/cgroup (each v1
// controller, name=systemd and the cgroup2 one) with this process's cgroup in it.
// Host cgroups nest under our own, so a memory limit on us covers the hosts too.
func hierarchies() ([]hierarchy, error) {
	own := map[string]string{} // controllers ("cpu", "name=systemd", "" for v2) -> path
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("nspawn: cgroups: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("nspawn: cgroups: %w", err)
	}
	defer f.Close()
	var out []hierarchy
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, sf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(sf) < 3 {
			continue
		}
		mp := unescapeMount(pf[4])
		if mp != "/sys/fs/cgroup" && !strings.HasPrefix(mp, "/sys/fs/cgroup/") {
			continue
		}
		switch sf[0] {
		case "cgroup2":
			if p, ok := own[""]; ok {
				out = append(out, hierarchy{mount: mp, own: p})
			}
		case "cgroup":
			opts := strings.Split(sf[2], ",")
			for ctrls, p := range own {
				if ctrls != "" && allIn(strings.Split(ctrls, ","), opts) {
					out = append(out, hierarchy{mount: mp, own: p})
					break
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("nspawn: cgroups: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("nspawn: no cgroup hierarchy mounted under /sys/fs/cgroup")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].mount < out[j].mount })
	return out, nil
}

func allIn(want, have []string) bool {
	for _, w := range want {
		if !contains(have, w) {
			return false
		}
	}
	return true
}

// makeCgroup creates dir (and its parents) in hierarchy h; cpuset dirs get their
// parent's cpus and mems, without which no process can join them.
func makeCgroup(h hierarchy, dir string) error {
	rel, err := filepath.Rel(h.mount, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("nspawn: cgroup %s not under %s", dir, h.mount)
	}
	cur := h.mount
	for _, part := range strings.Split(rel, "/") {
		parent := cur
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("nspawn: cgroup %s: %w", cur, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if _, err := os.Stat(filepath.Join(parent, f)); err != nil {
				continue
			}
			if v, _ := os.ReadFile(filepath.Join(cur, f)); strings.TrimSpace(string(v)) != "" {
				continue
			}
			v, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("nspawn: cgroup %s: %w", cur, err)
			}
			if err := os.WriteFile(filepath.Join(cur, f), v, 0o644); err != nil {
				return fmt.Errorf("nspawn: cgroup %s: %s: %w", cur, f, err)
			}
		}
	}
	return nil
}

// cgroupPids lists the processes in dir and every cgroup below it.
func cgroupPids(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids, err
}

// removeCgroup removes dir and every cgroup below it, deepest first.
func removeCgroup(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("nspawn: cgroup %s: %w", dir, err)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("nspawn: remove cgroup %s: %w", d, err)
		}
	}
	return nil
}

// joinCgroupsScript is run by sh with the cgroup.procs files to join, "--" and the
// command to exec: the command then starts inside those cgroups.
const joinCgroupsScript = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 1; shift; done; shift; exec "$@"`
