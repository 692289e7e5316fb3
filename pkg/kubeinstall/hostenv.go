package kubeinstall

import "github.com/plinth-dev/plinth/pkg/labhost"

// LabReason is how a kube step on a lab host explains that it did not run.
const LabReason = labhost.Reason

// checkHost refuses to run Kubernetes steps where they would not act on a host of
// their own (see pkg/labhost). A Paths.Root (tests) means a host of its own.
func checkHost(p Paths) error {
	if p.Root != "" {
		return nil
	}
	return labhost.Check("Kubernetes (kubelet, static pods, etcd; see docs/kubernetes.md)")
}
