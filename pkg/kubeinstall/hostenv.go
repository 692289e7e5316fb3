package kubeinstall

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// LabReason is how a kube step on a lab host explains that it did not run.
const LabReason = "not run in the lab"

// netnsDir is where `ip netns` keeps named network namespaces.
const netnsDir = "/run/netns"

// checkHost refuses to run Kubernetes steps where they would not act on a host of
// their own: an agent in a named network namespace, or in one other than PID 1's, is
// a lab host sharing this machine's filesystem, and kubelet, static pods and etcd
// there would collide with every other lab host. The error is permanent: retrying
// cannot turn a lab host into a real one.
func checkHost(p Paths) error {
	if p.Root != "" {
		return nil
	}
	self, err := nsID("/proc/self/ns/net")
	if err != nil {
		return nil // cannot tell; a real host is the common case
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
	return driver.Permanent(fmt.Errorf("%s: this agent runs in %s, as lab hosts do; "+
		"Kubernetes needs a host of its own (see docs/kubernetes.md)", LabReason, where))
}

// nsID identifies a namespace file by device and inode.
func nsID(path string) ([2]uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return [2]uint64{}, err
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}
