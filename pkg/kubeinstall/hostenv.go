package kubeinstall

import (
	"fmt"
	"os"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// LabReason is how a kube step on a lab host explains that it did not run.
const LabReason = "not run in the lab"

// checkHost refuses to run Kubernetes steps where they would not act on a host of
// their own: an agent in a network namespace other than PID 1's is a lab host (a
// namespace sharing this machine's filesystem), and kubelet, static pods and etcd
// there would collide with every other lab host. The error is permanent: retrying
// cannot turn a lab host into a real one.
func checkHost(p Paths) error {
	self, err1 := os.Readlink("/proc/self/ns/net")
	pid1, err2 := os.Readlink("/proc/1/ns/net")
	if err1 == nil && err2 == nil && self != pid1 && p.Root == "" {
		return driver.Permanent(fmt.Errorf("%s: this agent runs in network namespace %s, not the host's (%s), "+
			"as lab hosts do; Kubernetes needs a host of its own (see docs/kubernetes.md)", LabReason, self, pid1))
	}
	return nil
}
