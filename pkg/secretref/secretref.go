// Package secretref is the one home of the secret reference format: a string in step
// inputs of the form "plinth-secret:NAME" stands for a sealed secret that the
// coordinator resolves when it hands the step to its host's agent. Only the planner
// writes references; a manifest may never hold one (pkg/api refuses it), so no
// operator-written string can make a coordinator hand out a secret.
package secretref

import "strings"

// Prefix starts every secret reference.
const Prefix = "plinth-secret:"

// Ref renders a reference to the secret name.
func Ref(name string) string { return Prefix + name }

// OutputName is the sealed secret holding output key of step stepID.
func OutputName(stepID, key string) string { return "output/" + stepID + "/" + key }

// OutputRef references output key of step stepID.
func OutputRef(stepID, key string) string { return Ref(OutputName(stepID, key)) }

// Parse returns the secret name s references, if it is a reference.
func Parse(s string) (string, bool) { return strings.CutPrefix(s, Prefix) }

// Contains reports whether s holds a reference anywhere (a prefix inside a longer
// string is refused by the manifest check too: it could be assembled into one).
func Contains(s string) bool { return strings.Contains(s, Prefix) }
