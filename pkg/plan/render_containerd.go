package plan

import (
	"fmt"
	"maps"
	"slices"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
)

// renderContainerd renders <host>/containerd.config and then <host>/images.import
// for every host when the site runs Kubernetes; both wait for the host's network.
// Every host gets both steps, even without archives, so kube.* steps can depend on
// fixed IDs. Each imports only the bundle images it runs: controllers all of them,
// other nodes all but the control plane's, the witness (an etcd member, no node)
// none.
func renderContainerd(in renderInput) ([]Step, error) {
	if in.site == nil || in.site.Spec.Kubernetes == nil {
		return nil, nil
	}
	c := in.site.Spec.Kubernetes.EffectiveContainerd()
	cfg, imp := ContainerdConfigInputs(c), ImageImportInputs(c)
	if b := in.site.Spec.Kubernetes.Bundle; b != nil {
		imp.Bundle, imp.BundleSHA256 = b.Version, b.SHA256
	}
	var steps []Step
	for _, h := range in.hosts {
		name := h.Metadata.Name
		net := StepID(name, hostspec.KindNetwork, "")
		cs, err := NewStep(name, containerdspec.KindConfig, "", cfg, net)
		if err != nil {
			return nil, fmt.Errorf("plan: host %s: render %s: %w", name, containerdspec.KindConfig, err)
		}
		hostImp := imp
		switch {
		case name == in.site.Spec.Witness:
			hostImp.Bundle, hostImp.BundleSHA256 = "", ""
		case !slices.Contains(in.site.Spec.Controllers, name) && hostImp.Bundle != "":
			hostImp.SkipBundleImages = bundle.ControlPlaneImages
		}
		is, err := NewStep(name, containerdspec.KindImport, "", hostImp, cs.ID, net)
		if err != nil {
			return nil, fmt.Errorf("plan: host %s: render %s: %w", name, containerdspec.KindImport, err)
		}
		steps = append(steps, cs, is)
	}
	return steps, nil
}

// ContainerdConfigInputs renders a containerd.config step from effective settings
// (api.KubernetesSpec.EffectiveContainerd); mirrors come out sorted by registry.
func ContainerdConfigInputs(c api.ContainerdSpec) containerdspec.ConfigInputs {
	in := containerdspec.ConfigInputs{SandboxImage: c.SandboxImage, CgroupDriver: c.CgroupDriver, Snapshotter: c.Snapshotter}
	for _, reg := range slices.Sorted(maps.Keys(c.Mirrors)) {
		m := c.Mirrors[reg]
		in.Mirrors = append(in.Mirrors, containerdspec.Mirror{
			Registry: reg, Endpoints: slices.Clone(m.Endpoints), SkipVerify: m.SkipVerify,
		})
	}
	return in
}

// ImageImportInputs renders an images.import step; archives keep their order.
func ImageImportInputs(c api.ContainerdSpec) containerdspec.ImportInputs {
	in := containerdspec.ImportInputs{Snapshotter: c.Snapshotter}
	for _, a := range c.ImageArchives {
		in.Archives = append(in.Archives, containerdspec.Archive{Path: a.Path, Digest: a.Digest})
	}
	return in
}
