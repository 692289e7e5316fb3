package plan

import (
	"fmt"
	"sort"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/host"
)

// Render turns the declared site and hosts into the steps every host must run.
// The site may be nil while only hosts have been applied.
func Render(site *api.Site, hosts []api.Host) ([]Step, error) {
	hs := append([]api.Host(nil), hosts...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Metadata.Name < hs[j].Metadata.Name })
	var nets map[string]api.Network
	if site != nil {
		nets = make(map[string]api.Network, len(site.Spec.Networks))
		for _, n := range site.Spec.Networks {
			nets[n.Name] = n
		}
	}
	in := renderInput{site: site, hosts: hs, nets: nets}
	var steps []Step
	for _, r := range renderers {
		s, err := r(in)
		if err != nil {
			return nil, err
		}
		steps = append(steps, s...)
	}
	if err := CheckDAG(steps); err != nil {
		return nil, err
	}
	return steps, nil
}

// renderInput is what every area's renderer sees: the site (may be nil), the
// declared hosts sorted by name, and the site's networks by name.
type renderInput struct {
	site  *api.Site
	hosts []api.Host
	nets  map[string]api.Network
}

// renderers produce each area's steps, in order; each lives in its own file
// (render_<area>.go) so the areas can grow independently.
var renderers = []func(renderInput) ([]Step, error){
	renderNetwork,
	renderContainerd,
	renderKubernetes,
	renderOVS,
	renderCeph,
}

// renderNetwork renders one host.network step per host.
func renderNetwork(in renderInput) ([]Step, error) {
	var steps []Step
	for _, h := range in.hosts {
		s, err := NewStep(h.Metadata.Name, host.KindNetwork, "", NetworkInputs(h, in.nets))
		if err != nil {
			return nil, fmt.Errorf("plan: host %s: render %s: %w", h.Metadata.Name, host.KindNetwork, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// NetworkInputs renders the host.network step of one host. An interface without its
// own MTU takes the largest MTU of the networks it carries.
func NetworkInputs(h api.Host, nets map[string]api.Network) host.NetworkInputs {
	var in host.NetworkInputs
	for _, ifc := range h.Spec.Interfaces {
		mtu := ifc.MTU
		if mtu == 0 {
			for _, n := range ifc.Networks {
				mtu = max(mtu, nets[n].MTU)
			}
		}
		in.Links = append(in.Links, host.LinkSpec{
			Name:      ifc.Name,
			MAC:       ifc.MAC,
			MTU:       mtu,
			Up:        ifc.State != "down",
			Addresses: append([]string(nil), ifc.Addresses...),
		})
	}
	for _, r := range h.Spec.Routes {
		in.Routes = append(in.Routes, host.RouteSpec{
			Dst: r.To, Gateway: r.Via, Dev: r.Dev, Metric: r.Metric, MTU: r.MTU, Table: r.Table,
		})
	}
	return in
}
