package kubeinstall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// ManifestHashAnnotation records which version of its manifest an object was applied
// from, so an unchanged manifest is not re-applied on every check.
const ManifestHashAnnotation = "plinth.dev/manifest-sha256"

// CNIDriver runs kube.cni: it applies the pod network's manifest with server-side
// apply: for flannel the one FlannelManifest renders from the inputs, otherwise the
// file the site ships on the first controller (Calico by default).
type CNIDriver struct{ o *options }

// NewCNIDriver returns the kube.cni driver.
func NewCNIDriver(stateDir string, opts ...Option) *CNIDriver {
	return &CNIDriver{o: newOptions(stateDir, opts)}
}

// Kind implements driver.Driver.
func (d *CNIDriver) Kind() string { return kubespec.KindCNI }

// Diff implements driver.Driver.
func (d *CNIDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.CNIInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	data, path, err := d.manifest(in)
	if err != nil {
		return nil, err
	}
	objs, err := decodeManifest(data)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.cni: %s: %w", path, err))
	}
	a, err := newApplier([]byte(in.Kubeconfig))
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.cni: %w", err))
	}
	var cs []driver.Change
	for _, obj := range objs {
		state, err := a.state(ctx, obj)
		if err != nil {
			return nil, err
		}
		if state == "" {
			continue
		}
		cs = append(cs, driver.Change{Summary: fmt.Sprintf("%s %s %s", state, obj.GetKind(), objName(obj)),
			Apply: func(ctx context.Context) error { return a.apply(ctx, obj) }})
	}
	return cs, nil
}

// manifest is the YAML to apply and where it came from (for errors).
func (d *CNIDriver) manifest(in kubespec.CNIInputs) ([]byte, string, error) {
	if in.Flannel != nil {
		data, err := FlannelManifest(*in.Flannel)
		if err != nil {
			return nil, "", driver.Permanent(fmt.Errorf("kube.cni: %w", err))
		}
		return data, "the rendered flannel manifest", nil
	}
	if in.Manifest == "" {
		return nil, "", driver.Permanent(fmt.Errorf("kube.cni: plugin %q has neither a manifest file nor flannel inputs", in.Plugin))
	}
	path := d.o.paths.Join(in.Manifest)
	data, err := os.ReadFile(path)
	if missing(err) {
		return nil, "", driver.Permanent(fmt.Errorf("kube.cni: the %s manifest %s is not on this host: the site ships it "+
			"(copy it there, or set kubernetes.cni.manifest; see docs/kubernetes.md)", in.Plugin, path))
	}
	if err != nil {
		return nil, "", fmt.Errorf("kube.cni: %w", err)
	}
	return data, path, nil
}

// decodeManifest splits a multi-document YAML into objects stamped with their hash.
func decodeManifest(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var m map[string]any
		if err := r.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("document %d: kind and metadata.name are required", i)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[ManifestHashAnnotation] = hex.EncodeToString(sum[:16])
		obj.SetAnnotations(ann)
		out = append(out, obj)
	}
}

func objName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// applier applies objects of any kind, learning new kinds (CRDs) as they appear.
type applier struct {
	dyn   dynamic.Interface
	kinds *kinds
}

func newApplier(kubeconfig []byte) (*applier, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	return newApplierForConfig(cfg)
}

func newApplierForConfig(cfg *rest.Config) (*applier, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := newCoreREST(cfg, hc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &applier{dyn: dyn, kinds: newKinds(rc)}, nil
}

func (a *applier) resource(ctx context.Context, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvr, namespaced, err := a.kinds.mapping(ctx, obj.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if namespaced {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return a.dyn.Resource(gvr).Namespace(ns), nil
	}
	return a.dyn.Resource(gvr), nil
}

// state is "create", "update" or "" (in sync) for obj.
func (a *applier) state(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
	ri, err := a.resource(ctx, obj)
	if meta.IsNoMatchError(err) {
		return "create", nil // its CRD comes earlier in the same manifest
	}
	if err != nil {
		return "", fmt.Errorf("kube.cni: %s %s: %w", obj.GetKind(), objName(obj), err)
	}
	cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "create", nil
	case err != nil:
		return "", fmt.Errorf("kube.cni: get %s %s: %w", obj.GetKind(), objName(obj), err)
	case cur.GetAnnotations()[ManifestHashAnnotation] != obj.GetAnnotations()[ManifestHashAnnotation]:
		return "update", nil
	}
	return "", nil
}

// apply server-side-applies obj; a kind whose CRD was just created is retried until
// the API serves it.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ri, err := a.resource(ctx, obj)
		if meta.IsNoMatchError(err) && time.Now().Before(deadline) {
			a.kinds.forget(obj.GroupVersionKind().GroupVersion())
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), objName(obj), err)
		}
		force := true
		_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), objName(obj), err)
		}
		return nil
	}
}
