package api

import "github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"

// VIP providers (spec.kubernetes.vipProvider). The drivers' contract names them;
// the manifest uses the same words.
const (
	VIPKeepalived = kubespec.VIPKeepalived
	VIPKubeVIP    = kubespec.VIPKubeVIP
)
