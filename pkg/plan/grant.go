package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/secretref"
)

// generatedGrants is the planner's word on who may hold each kind of generated
// secret: the step kinds whose inputs it renders a reference of that kind into.
// A kind not listed here is granted to no step.
var generatedGrants = map[string][]string{
	secretref.GenBootstrapToken: {kubespec.KindInit, kubespec.KindJoinControlPlane, kubespec.KindJoin},
	secretref.GenHex32:          {kubespec.KindInit, kubespec.KindJoinControlPlane},
	secretref.GenEtcdCA:         {kubespec.KindEtcd},
}

// GrantError is a step asking for a secret the planner did not grant it.
type GrantError struct {
	Step, Host, Secret, Reason string
}

func (e *GrantError) Error() string {
	return fmt.Sprintf("step %s on host %s may not resolve secret %q: %s", e.Step, e.Host, e.Secret, e.Reason)
}

// Grant reports whether step may resolve the secret name, by the planner's rule:
// an output of step X only if step depends on X (directly or through other steps),
// so only a step that waits for X's result can read it; a generated secret only for
// the step kinds generatedGrants lists for its kind; nothing else. lookup finds steps
// by ID for the dependency walk. The server enforces it on every step it hands out,
// so a forged or mis-rendered step record cannot reach another step's secrets.
func Grant(step Step, name string, lookup func(id string) (Step, bool)) error {
	refuse := func(why string) error {
		return &GrantError{Step: step.ID, Host: step.Host, Secret: name, Reason: why}
	}
	if stepID, _, ok := secretref.ParseOutput(name); ok {
		if dependsOn(step, stepID, lookup) {
			return nil
		}
		return refuse(fmt.Sprintf("it is an output of step %s, which this step does not depend on", stepID))
	}
	if kind, _, ok := secretref.ParseGenerated(name); ok {
		kinds, known := generatedGrants[kind]
		if !known {
			return refuse(fmt.Sprintf("generated secrets of kind %q are granted to no step", kind))
		}
		if slices.Contains(kinds, step.Kind) {
			return nil
		}
		return refuse(fmt.Sprintf("generated %s secrets are granted only to steps of kind %s, not %s", kind, strings.Join(kinds, ", "), step.Kind))
	}
	return refuse("steps may resolve only step outputs (output/<step>/<key>) and generated secrets (generated/<kind>/<id>)")
}

// dependsOn walks step's dependencies breadth first, each step once.
func dependsOn(step Step, target string, lookup func(id string) (Step, bool)) bool {
	seen := map[string]bool{step.ID: true}
	queue := slices.Clone(step.Deps)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if id == target {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if dep, ok := lookup(id); ok {
			queue = append(queue, dep.Deps...)
		}
	}
	return false
}
