package wire

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// What the agent must never link: the coordinator's consensus, its metrics registry
// and its API server. The agent reaches the coordinator only through this package
// and pkg/client.
var forbidden = []string{
	"github.com/hashicorp/raft",
	"github.com/prometheus/",
	"github.com/plinth-dev/plinth/pkg/server",
}

// thirdPartyPrometheus names the packages allowed to import Prometheus into the
// drivers programs, and only into them. The drivers expose no metrics of their own, but
// two driver libraries register theirs with Prometheus when linked: the Kubernetes
// config types kubeinstall writes (k8s.io/component-base, via feature gates and
// logging options) and the OVSDB client pkg/ovs talks to ovsdb-server with
// (github.com/ovn-org/libovsdb/client). No Plinth package may import Prometheus.
var thirdPartyPrometheus = []string{
	"k8s.io/component-base/",
	"github.com/ovn-org/libovsdb/client",
}

// drivers is what the long-running agent must not link either: the step drivers
// and their libraries run in the plinth-drivers process (pkg/driverexec), so the
// daemon idling on every host stays small. Their input contracts (…spec) are fine.
var drivers = []string{
	"k8s.io/", "github.com/containerd/", "github.com/ovn-org/", "github.com/ceph/", "google.golang.org/grpc",
	"github.com/plinth-dev/plinth/pkg/kubeinstall", "github.com/plinth-dev/plinth/pkg/ovs",
	"github.com/plinth-dev/plinth/pkg/ceph", "github.com/plinth-dev/plinth/pkg/containerd",
}

// cephOnly is what only plinth-drivers-ceph may link: go-ceph, and through it
// librados and librbd, whose C++ start-up would cost every plinth-drivers process.
var cephOnly = []string{"github.com/ceph/", "github.com/plinth-dev/plinth/pkg/ceph/librados"}

// agentOnly is what the drivers programs must not link: the agent daemon and its
// gossip. A drivers process lives for one step or drift pass, and every package it
// links costs its start-up (package init, page faults) on every pass. The agent's
// identity file, which the drivers read, is pkg/agentid.
var agentOnly = []string{
	"github.com/plinth-dev/plinth/pkg/agent", "github.com/plinth-dev/plinth/pkg/membership",
	"github.com/hashicorp/memberlist",
}

// everyAPIGroup is what the drivers programs must not link either: client-go's
// clientset and its discovery client import kubernetes/scheme, which registers every
// Kubernetes API group at package init, about 12 ms of CPU in every drivers process.
// pkg/kubeinstall has its own small client (API) and kind lookup (kinds) instead.
var everyAPIGroup = []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery"}

// driverContracts are the packages under drivers' prefixes the agent may link.
var driverContracts = []string{
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec", "github.com/plinth-dev/plinth/pkg/kubeinstall/certs",
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certreport", "github.com/plinth-dev/plinth/pkg/ovs/ovsspec",
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec", "github.com/plinth-dev/plinth/pkg/containerd/containerdspec",
}

// TestAgentLinksNoCoordinator keeps the agent's dependency graph free of Raft,
// Prometheus and the coordinator's server, with the build tags `make build` uses;
// the daemon's (cmd/agent) free of the drivers too, plinth-drivers' free of Ceph's
// libraries, and both drivers programs' free of the agent daemon and of client-go's
// every-group scheme.
func TestAgentLinksNoCoordinator(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH: cannot list dependencies")
	}
	for _, root := range []string{
		"github.com/plinth-dev/plinth/pkg/wire",
		"github.com/plinth-dev/plinth/pkg/client",
		"github.com/plinth-dev/plinth/pkg/agent",
		"github.com/plinth-dev/plinth/cmd/agent",
		"github.com/plinth-dev/plinth/cmd/drivers",
		"github.com/plinth-dev/plinth/cmd/drivers-ceph",
	} {
		t.Run(strings.TrimPrefix(root, "github.com/plinth-dev/plinth/"), func(t *testing.T) {
			imports := listDeps(t, goBin, root)
			isDrivers := strings.HasPrefix(root, "github.com/plinth-dev/plinth/cmd/drivers")
			bad := func(pkg string) bool {
				if root == "github.com/plinth-dev/plinth/cmd/drivers" && matches(pkg, cephOnly) {
					return true
				}
				if isDrivers && (matches(pkg, agentOnly) || matches(pkg, everyAPIGroup)) {
					return true
				}
				return isForbidden(pkg) || (!isDrivers && matches(pkg, drivers) && !slices.Contains(driverContracts, pkg))
			}
			for pkg, imps := range imports {
				for _, imp := range imps {
					if !bad(imp) || bad(pkg) {
						continue // only edges into the forbidden set are checked
					}
					if isDrivers && strings.HasPrefix(imp, "github.com/prometheus/") && matches(pkg, thirdPartyPrometheus) {
						continue
					}
					t.Errorf("%s depends on %s: %s imports it (%s)", root, imp, pkg, strings.Join(chain(imports, root, pkg), " -> "))
				}
			}
		})
	}
}

// listDeps returns every package root depends on, with its imports.
func listDeps(t *testing.T, goBin, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command(goBin, "list", "-tags", "ceph,pacific", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v: %s", root, err, stderr.String())
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if _, ok := imports[root]; !ok {
		t.Fatalf("go list -deps %s did not list %s itself", root, root)
	}
	return imports
}

func isForbidden(pkg string) bool { return matches(pkg, forbidden) }

// matches reports whether pkg is one of prefixes or lies under one: a prefix ending
// in "/" names a tree, any other a package and the packages below it, so pkg/agent
// does not take in pkg/agentid.
func matches(pkg string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool {
		if strings.HasSuffix(p, "/") {
			return strings.HasPrefix(pkg, p)
		}
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	})
}

// chain is one import path from root to pkg, for the failure message.
func chain(imports map[string][]string, root, pkg string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var out []string
			for ; p != ""; p = prev[p] {
				out = append(out, strings.TrimPrefix(p, "github.com/plinth-dev/plinth/"))
			}
			slices.Reverse(out)
			return out
		}
		for _, imp := range imports[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return []string{pkg}
}
