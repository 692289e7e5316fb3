package plan

import (
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// cniInputs are kube.cni's inputs for an effective spec: calico's manifest file, or
// what the flannel manifest is rendered from (the pod network, and the bundle's
// flannel image under the site's image repository, where images.import put it, as
// with every other bundle image).
func cniInputs(k api.KubernetesSpec, kubeconfig string) kubespec.CNIInputs {
	in := kubespec.CNIInputs{Plugin: k.CNI.Plugin, Manifest: k.CNI.Manifest, Kubeconfig: kubeconfig}
	if k.CNI.Plugin == api.CNIFlannel {
		in.Flannel = &kubespec.FlannelInputs{
			Network: k.PodSubnet,
			Image:   k.ImageRepository + "/" + bundle.FlannelImage + ":" + bundle.DefaultPins.Flannel,
		}
	}
	return in
}
