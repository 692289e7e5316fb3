package plan

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/plinth-dev/plinth"

// contracts are the step contracts the planner may import: each lives next to its
// driver (pkg/<area>/<area>spec) but imports none of it.
var contracts = []string{
	module + "/pkg/host/hostspec",
	module + "/pkg/ceph/cephspec",
	module + "/pkg/ovs/ovsspec",
	module + "/pkg/containerd/containerdspec",
	module + "/pkg/kubeinstall/kubespec",
}

// drivers are the packages (and their subpackages, contracts excepted) that change
// hosts, and the libraries they change them with.
var drivers = []string{
	module + "/pkg/host",
	module + "/pkg/ceph",
	module + "/pkg/ovs",
	module + "/pkg/containerd",
	module + "/pkg/kubeinstall",
	"github.com/vishvananda/netlink",
	"github.com/ceph/go-ceph",
	"github.com/ovn-org/libovsdb",
	"github.com/digitalocean/go-openvswitch",
	"github.com/containerd/containerd",
	"k8s.io/client-go",
}

func isDriver(path string) bool {
	if slices.Contains(contracts, path) {
		return false
	}
	for _, d := range drivers {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// TestPlannerLinksNoDriver keeps the planner and the FSM (which run inside the
// coordinator's Raft Apply) and the step contracts free of drivers: they may import
// contract packages, never the code or libraries that act on a host.
func TestPlannerLinksNoDriver(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to list dependencies: %v", err)
	}
	roots := append([]string{module + "/pkg/plan", module + "/pkg/state"}, contracts...)
	for _, tags := range []string{"ceph,pacific", ""} {
		args := append([]string{"list", "-deps", "-tags=" + tags, "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, roots...)
		out, err := exec.Command(goTool, args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		imports := map[string][]string{}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) > 0 {
				imports[f[0]] = f[1:]
			}
		}
		for _, root := range roots {
			if _, ok := imports[root]; !ok {
				t.Fatalf("go list -tags=%q did not list %s", tags, root)
			}
			for _, chain := range driverChains(root, imports) {
				t.Errorf("tags %q: %s links a driver (%s); the planner, the FSM and the contracts may import contract packages (pkg/<area>/<area>spec), not drivers",
					tags, strings.TrimPrefix(root, module+"/"), strings.ReplaceAll(strings.Join(chain, " -> "), module+"/", ""))
			}
		}
	}
}

// driverChains returns, for every driver package reachable from root, one import
// chain from root to it, stopping at the first driver on each path.
func driverChains(root string, imports map[string][]string) [][]string {
	from := map[string]string{root: ""}
	queue := []string{root}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if isDriver(p) {
			chain := []string{p}
			for q := from[p]; q != ""; q = from[q] {
				chain = append([]string{q}, chain...)
			}
			chains = append(chains, chain)
			continue
		}
		for _, q := range imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return chains
}
