package api

import "github.com/plinth-dev/plinth/pkg/kubeinstall/kubesteps"

// VIP providers (spec.kubernetes.vipProvider). The drivers' contract names them;
// the manifest uses the same words.
const (
	VIPKeepalived = kubesteps.VIPKeepalived
	VIPKubeVIP    = kubesteps.VIPKubeVIP
)
