// Package labhost tells a driver whether its agent runs on a lab host: a network
// namespace on a machine shared with other lab hosts (pkg/lab). Steps that act on the
// whole machine — kubelet, static pods, etcd, containerd's config — must not run
// there, and must say so rather than pretend to be done.
package labhost

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// Reason starts the error of every step refused on a lab host; the lab's progress
// table and summary recognise it.
const Reason = "not run in the lab"

// netnsDir is where `ip netns` keeps named network namespaces.
const netnsDir = "/run/netns"

// Check returns a permanent error starting with Reason when this process runs in a
// named network namespace, or one other than PID 1's, and nil on a host of its own
// (or when it cannot tell: a real host is the common case). what says what would
// have run, e.g. "Kubernetes" or "containerd's host config".
func Check(what string) error {
	self, err := nsID("/proc/self/ns/net")
	if err != nil {
		return nil
	}
	where := ""
	if pid1, err := nsID("/proc/1/ns/net"); err == nil && pid1 != self {
		where = "a network namespace other than PID 1's"
	}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if id, err := nsID(filepath.Join(netnsDir, e.Name())); err == nil && id == self {
			where = "network namespace " + e.Name()
		}
	}
	if where == "" {
		return nil
	}
	return driver.Permanent(fmt.Errorf("%s: this agent runs in %s, as lab hosts do, and %s needs a host of its own", Reason, where, what))
}

func nsID(path string) ([2]uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return [2]uint64{}, err
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}
