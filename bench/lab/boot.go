package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/nspawn"
	"github.com/plinth-dev/plinth/pkg/state"
)

// upResult is standing the lab up, as `plinth-lab up` does (without the apply).
type upResult struct {
	rootfsKey    string
	rootfsCached bool          // the lab's rootfs was in the cache already
	rootfs       time.Duration // BuildRootfs with the default cache (a lookup when cached)
	cold         time.Duration // BuildRootfs into an empty cache (-cold-rootfs), else 0
	coldSize     int64         // bytes of the cold-built rootfs
	unpack       time.Duration // lab.UnpackBundle into the lab directory
	labUp        time.Duration // lab.Up: bridge, boots, Ceph, install scripts
	enrolled     time.Duration // start -> every host listed by /v1/hosts
	reachable    time.Duration // start -> every host's Reachable=True
	hosts        []*hostTimes  // in boot order
}

// hostTimes is one host's figures, read from lab.Up's progress lines.
type hostTimes struct {
	name      string
	boot      time.Duration // namespace, links and nspawn.Boot to `systemctl is-system-running`
	bootAt    time.Duration // when the boot line came, since Up started
	ceph      time.Duration // one-node Ceph bootstrap (controller-0 only)
	install   time.Duration // install.sh run (tokens and the coordinator's readiness included)
	installAt time.Duration
	kind      string // install.sh mode: --init, --join controller, --join witness, --agent
}

// The progress lines lab.Up prints (pkg/lab/site.go); a change there shows as
// missing figures, never as wrong ones.
var (
	bootLine    = regexp.MustCompile(`host (\S+)\s+booted \(systemd running\) in ([0-9.]+)s`)
	cephLine    = regexp.MustCompile(`host (\S+)\s+one-node Ceph cluster .* healthy in ([0-9.]+)s`)
	installLine = regexp.MustCompile(`host (\S+)\s+install\.sh (--[a-z]+(?: [a-z]+)?): .*\(([0-9.]+)s\)\s*$`)
)

// upLog copies lab.Up's progress to out and picks per-host times from its lines.
type upLog struct {
	out   io.Writer
	start time.Time
	mu    sync.Mutex
	buf   []byte
	hosts []*hostTimes
}

func (u *upLog) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, err := u.out.Write(p); err != nil {
		return 0, err
	}
	u.buf = append(u.buf, p...)
	for {
		i := bytes.IndexByte(u.buf, '\n')
		if i < 0 {
			break
		}
		u.line(string(u.buf[:i]), time.Since(u.start))
		u.buf = u.buf[i+1:]
	}
	return len(p), nil
}

func (u *upLog) host(name string) *hostTimes {
	for _, h := range u.hosts {
		if h.name == name {
			return h
		}
	}
	h := &hostTimes{name: name}
	u.hosts = append(u.hosts, h)
	return h
}

func seconds(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * 1000 * float64(time.Millisecond)).Round(time.Millisecond)
}

func (u *upLog) line(s string, at time.Duration) {
	if m := bootLine.FindStringSubmatch(s); m != nil {
		h := u.host(m[1])
		h.boot, h.bootAt = seconds(m[2]), at
	} else if m := cephLine.FindStringSubmatch(s); m != nil {
		u.host(m[1]).ceph = seconds(m[2])
	} else if m := installLine.FindStringSubmatch(s); m != nil {
		h := u.host(m[1])
		h.kind, h.install, h.installAt = m[2], seconds(m[3]), at
	}
}

// rootfsSize is the disk use of a rootfs tree in bytes (hard links once).
func rootfsSize(dir string) int64 {
	var n int64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		n += fi.Size()
		return nil
	})
	return n
}

// coldRootfs times BuildRootfs into an empty cache below the scratch directory (what
// PLINTH_CACHE pointing at an empty directory gives), then removes it.
func (b *bench) coldRootfs(ctx context.Context, r *upResult) error {
	cache := filepath.Join(b.dir, "cold-cache")
	say("cold rootfs: building into the empty cache %s (debootstrap and apt-get: minutes)", cache)
	t := time.Now()
	dir, err := nspawn.BuildRootfs(ctx, nspawn.RootfsOptions{Profile: nspawn.LabProfile(), CacheDir: cache, Progress: os.Stdout})
	if err != nil {
		return fmt.Errorf("cold rootfs: %w", err)
	}
	r.cold = time.Since(t)
	r.coldSize = rootfsSize(dir)
	say("cold rootfs: built in %.1fs, %s", r.cold.Seconds(), mibBytes(uint64(r.coldSize)))
	return removeScratch(cache)
}

// up stands the lab up without a manifest, as `plinth-lab up` does before its apply:
// rootfs (cached), bundle unpacked into the lab directory, lab.Up; then waits until
// every host is enrolled and every agent Reachable, so the first apply is timed
// against idle, enrolled agents.
func (b *bench) up(ctx context.Context) (*upResult, error) {
	r := &upResult{}
	opts := nspawn.RootfsOptions{Profile: nspawn.LabProfile()}
	key, err := nspawn.RootfsKey(opts)
	if err != nil {
		return nil, err
	}
	r.rootfsKey = key
	if b.o.coldRootfs {
		if err := b.coldRootfs(ctx, r); err != nil {
			return nil, err
		}
	}
	_, err = os.Stat(filepath.Join(nspawn.CacheDir(), "rootfs", key, "etc"))
	r.rootfsCached = err == nil

	// The clock of "plinth-lab up": rootfs, unpack, Up, enrolment.
	start := time.Now()
	opts.Progress = os.Stdout
	dir, err := nspawn.BuildRootfs(ctx, opts)
	if err != nil {
		return nil, err
	}
	r.rootfs = time.Since(start)
	b.l.Rootfs = dir
	say("rootfs %s in %s (%s)", dir, ms(r.rootfs), map[bool]string{true: "cached", false: "not cached: built"}[r.rootfsCached])

	t := time.Now()
	if b.l.BundleDir, err = lab.UnpackBundle(ctx, b.o.bundle, filepath.Join(b.l.Dir, "bundle")); err != nil {
		return nil, err
	}
	r.unpack = time.Since(t)
	say("bundle %s unpacked to %s in %s", filepath.Base(b.o.bundle), b.l.BundleDir, ms(r.unpack))

	t = time.Now()
	ul := &upLog{out: os.Stdout, start: t}
	err = b.l.Up(ctx, b.spec, ul)
	r.labUp = time.Since(t)
	r.hosts = ul.hosts
	if err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	cl, err := b.l.Client()
	if err != nil {
		return nil, err
	}
	b.cl = cl
	say("lab.Up returned after %s; waiting for every host to be enrolled and Reachable", ms(r.labUp))
	deadline := time.Now().Add(b.o.readyWait)
	for {
		var hosts []state.HostRecord
		_, err := b.cl.Do(ctx, "GET", "/v1/hosts?consistent", nil, &hosts)
		reach := 0
		for _, h := range hosts {
			if h.Reachable == api.ConditionTrue {
				reach++
			}
		}
		if err == nil && r.enrolled == 0 && len(hosts) == len(b.spec.Hosts) {
			r.enrolled = time.Since(start)
			say("all %d hosts enrolled %s after start", len(hosts), ms(r.enrolled))
		}
		if err == nil && reach == len(b.spec.Hosts) {
			r.reachable = time.Since(start)
			say("all %d agents Reachable %s after start", reach, ms(r.reachable))
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("agents not all Reachable within %s (%d of %d; last error %v)", b.o.readyWait, reach, len(b.spec.Hosts), err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
