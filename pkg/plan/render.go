package plan

import (
	"sort"

	"github.com/plinth-dev/plinth/pkg/api"
)

// Render turns the declared site and hosts into the steps every host must run.
// The site may be nil while only hosts have been applied. Pool addresses are
// allocated afresh: the coordinator, which keeps allocations, uses RenderAllocated.
func Render(site *api.Site, hosts []api.Host) ([]Step, error) {
	steps, _, err := RenderAllocated(site, hosts, nil)
	return steps, err
}

// RenderAllocated is Render given the pool allocations made so far; it returns the
// allocations the steps use, for the caller to record (see Allocate).
func RenderAllocated(site *api.Site, hosts []api.Host, prev []Allocation) ([]Step, []Allocation, error) {
	hs := append([]api.Host(nil), hosts...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].Metadata.Name < hs[j].Metadata.Name })
	var nets map[string]api.Network
	if site != nil {
		nets = make(map[string]api.Network, len(site.Spec.Networks))
		for _, n := range site.Spec.Networks {
			nets[n.Name] = n
		}
	}
	allocs, err := Allocate(site, hs, prev)
	if err != nil {
		return nil, nil, err
	}
	in := renderInput{site: site, hosts: hs, nets: nets, allocs: allocIndex(allocs), rendered: map[string]bool{}}
	var steps []Step
	for _, r := range renderers {
		s, err := r(in)
		if err != nil {
			return nil, nil, err
		}
		for _, st := range s {
			in.rendered[st.ID] = true
		}
		steps = append(steps, s...)
	}
	if err := CheckDAG(steps); err != nil {
		return nil, nil, err
	}
	setDepths(steps)
	return steps, allocs, nil
}

// setDepths sets each step's Depth in one pass over the (acyclic) dependencies.
func setDepths(steps []Step) {
	dependents := make(map[string][]int, len(steps))
	for i, s := range steps {
		for _, d := range s.Deps {
			dependents[d] = append(dependents[d], i)
		}
	}
	depth := make([]int, len(steps))
	done := make([]bool, len(steps))
	var visit func(i int) int
	visit = func(i int) int {
		if !done[i] {
			for _, j := range dependents[steps[i].ID] {
				depth[i] = max(depth[i], visit(j)+1)
			}
			done[i] = true
		}
		return depth[i]
	}
	for i := range steps {
		steps[i].Depth = visit(i)
	}
}

// renderInput is what every area's renderer sees: the site (may be nil), the
// declared hosts sorted by name, and the site's networks by name.
type renderInput struct {
	site  *api.Site
	hosts []api.Host
	nets  map[string]api.Network
	// allocs are the pool addresses by network and host.
	allocs map[[2]string]string
	// rendered holds the IDs of the steps earlier renderers produced, so a renderer
	// can depend on an optional step (e.g. host.hugepages) only when it exists.
	rendered map[string]bool
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
