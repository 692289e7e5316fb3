// Package secretref is the one home of the secret reference format: a string in step
// inputs of the form "plinth-secret:NAME" stands for a sealed secret that the
// coordinator resolves when it hands the step to its host's agent. Only the planner
// writes references; a manifest may never hold one (pkg/api refuses it), so no
// operator-written string can make a coordinator hand out a secret. Which step may
// resolve which name is the planner's grant rule (plan.Grant), checked by the server.
//
// Names come in two families: "output/<stepID>/<key>", an output a step's driver
// reported (sealed by the coordinator), and "generated/<kind>/<id>", a value the
// leader generates the first time a step references it.
package secretref

import "strings"

// Prefix starts every secret reference.
const Prefix = "plinth-secret:"

const (
	outputPrefix    = "output/"
	generatedPrefix = "generated/"
)

// Kinds of generated secrets: what shape the leader's generator gives the value.
const (
	// GenHex32 is 32 random bytes as 64 hex digits (e.g. kubeadm's certificate key).
	GenHex32 = "hex32"
	// GenBootstrapToken is kubeadm's "[a-z0-9]{6}.[a-z0-9]{16}".
	GenBootstrapToken = "bootstrap-token"
	// GenPassword is 24 random characters of [a-z0-9].
	GenPassword = "password"
	// GenEtcdCA is a self-signed CA for Plinth's etcd, certificate and key PEM.
	GenEtcdCA = "etcd-ca"
)

// Ref renders a reference to the secret name.
func Ref(name string) string { return Prefix + name }

// OutputName is the sealed secret holding output key of step stepID.
func OutputName(stepID, key string) string { return outputPrefix + stepID + "/" + key }

// OutputRef references output key of step stepID.
func OutputRef(stepID, key string) string { return Ref(OutputName(stepID, key)) }

// GeneratedName is the secret the leader generates of kind for id.
func GeneratedName(kind, id string) string { return generatedPrefix + kind + "/" + id }

// GeneratedRef references the generated secret of kind for id.
func GeneratedRef(kind, id string) string { return Ref(GeneratedName(kind, id)) }

// Parse returns the secret name s references, if it is a reference.
func Parse(s string) (string, bool) { return strings.CutPrefix(s, Prefix) }

// ParseOutput splits an output secret name into its step and key (step IDs hold
// slashes, keys do not).
func ParseOutput(name string) (stepID, key string, ok bool) {
	rest, ok := strings.CutPrefix(name, outputPrefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// ParseGenerated splits a generated secret name into its kind and id.
func ParseGenerated(name string) (kind, id string, ok bool) {
	rest, ok := strings.CutPrefix(name, generatedPrefix)
	if !ok {
		return "", "", false
	}
	kind, id, ok = strings.Cut(rest, "/")
	if !ok || kind == "" || id == "" {
		return "", "", false
	}
	return kind, id, true
}

// Contains reports whether s holds a reference anywhere (a prefix inside a longer
// string is refused by the manifest check too: it could be assembled into one).
func Contains(s string) bool { return strings.Contains(s, Prefix) }
