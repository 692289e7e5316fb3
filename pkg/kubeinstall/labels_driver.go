package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// Annotations recording what Plinth owns on a Node, so that a label or taint removed
// from the manifest is removed from the Node while everyone else's stay.
const (
	OwnedLabelsAnnotation = "plinth.dev/owned-labels"
	OwnedTaintsAnnotation = "plinth.dev/owned-taints"
)

// LabelsDriver runs kube.labels: it applies one node's OpenStack-Helm labels and
// Plinth's taints through the API with the admin kubeconfig kube.init produced.
type LabelsDriver struct{ o *options }

// NewLabelsDriver returns the kube.labels driver.
func NewLabelsDriver(stateDir string, opts ...Option) *LabelsDriver {
	return &LabelsDriver{o: newOptions(stateDir, opts)}
}

// Kind implements driver.Driver.
func (d *LabelsDriver) Kind() string { return kubespec.KindLabels }

// Diff implements driver.Driver.
func (d *LabelsDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.LabelsInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	c, err := d.o.clients([]byte(in.Kubeconfig))
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.labels: %w", err))
	}
	node, err := c.Node(ctx, in.Node)
	if err != nil {
		return nil, fmt.Errorf("kube.labels: node %s: %w", in.Node, err)
	}
	return nodeChanges(c, node, in), nil
}

// nodeChanges compares a Node with the inputs; each change patches the Node.
func nodeChanges(c API, node *corev1.Node, in kubespec.LabelsInputs) []driver.Change {
	var cs []driver.Change
	// Taints first: the ownership annotation changes last, so a crash in between
	// still knows which taints are Plinth's to remove.
	owned := splitList(node.Annotations[OwnedTaintsAnnotation])
	if _, tsum := wantTaints(node.Spec.Taints, in.Taints, owned); len(tsum) > 0 {
		cs = append(cs, driver.Change{Summary: fmt.Sprintf("node %s: %s", node.Name, strings.Join(tsum, ", ")),
			Apply: func(ctx context.Context) error { return setTaints(ctx, c, node.Name, in.Taints, owned) }})
	}
	labels := map[string]any{}
	var summary []string
	for _, k := range sortedKeys(in.Labels) {
		if v, ok := node.Labels[k]; !ok || v != in.Labels[k] {
			labels[k] = in.Labels[k]
			summary = append(summary, fmt.Sprintf("label %s=%s", k, in.Labels[k]))
		}
	}
	for _, k := range splitList(node.Annotations[OwnedLabelsAnnotation]) {
		if _, want := in.Labels[k]; !want {
			if _, has := node.Labels[k]; has {
				labels[k] = nil
				summary = append(summary, fmt.Sprintf("remove label %s (no longer in the manifest)", k))
			}
		}
	}
	ownedLabels := strings.Join(sortedKeys(in.Labels), ",")
	ownedTaints := taintList(in.Taints)
	annotations := map[string]any{}
	if node.Annotations[OwnedLabelsAnnotation] != ownedLabels {
		annotations[OwnedLabelsAnnotation] = ownedLabels
	}
	if node.Annotations[OwnedTaintsAnnotation] != ownedTaints {
		annotations[OwnedTaintsAnnotation] = ownedTaints
	}
	if len(labels) > 0 || len(annotations) > 0 {
		if len(summary) == 0 {
			summary = append(summary, "record Plinth-owned labels and taints")
		}
		patch := map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}}
		cs = append(cs, driver.Change{Summary: fmt.Sprintf("node %s: %s", node.Name, strings.Join(summary, ", ")),
			Apply: func(ctx context.Context) error {
				b, err := json.Marshal(patch)
				if err != nil {
					return err
				}
				return c.PatchNode(ctx, node.Name, b)
			}})
	}
	return cs
}

// wantTaints is the Node's taint list with Plinth's applied: desired ones set, owned
// ones no longer desired removed, everyone else's kept.
func wantTaints(cur []corev1.Taint, desired []kubespec.Taint, owned []string) ([]corev1.Taint, []string) {
	id := func(key, effect string) string { return key + ":" + effect }
	want := map[string]kubespec.Taint{}
	for _, t := range desired {
		want[id(t.Key, t.Effect)] = t
	}
	var out []corev1.Taint
	var sum []string
	seen := map[string]bool{}
	for _, t := range cur {
		k := id(t.Key, string(t.Effect))
		switch d, ok := want[k]; {
		case ok:
			seen[k] = true
			if t.Value != d.Value {
				sum = append(sum, fmt.Sprintf("taint %s=%s:%s", d.Key, d.Value, d.Effect))
				t.Value = d.Value
			}
		case slices.Contains(owned, k):
			sum = append(sum, fmt.Sprintf("remove taint %s (no longer in the manifest)", k))
			continue
		}
		out = append(out, t)
	}
	for _, d := range desired {
		if k := id(d.Key, d.Effect); !seen[k] {
			sum = append(sum, fmt.Sprintf("taint %s=%s:%s", d.Key, d.Value, d.Effect))
			out = append(out, corev1.Taint{Key: d.Key, Value: d.Value, Effect: corev1.TaintEffect(d.Effect)})
		}
	}
	return out, sum
}

// setTaints recomputes against the live Node on every conflict.
func setTaints(ctx context.Context, c API, name string, desired []kubespec.Taint, owned []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Node(ctx, name)
		if err != nil {
			return err
		}
		n.Spec.Taints, _ = wantTaints(n.Spec.Taints, desired, owned)
		return c.UpdateNode(ctx, n)
	})
}

func taintList(ts []kubespec.Taint) string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.Key + ":" + t.Effect
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
