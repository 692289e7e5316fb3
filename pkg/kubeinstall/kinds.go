package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// kinds maps an object's kind to the API resource that serves it, asking the API
// server for one group-version at a time, when an object of it is first applied or
// checked. client-go's discovery would fetch every group the server serves (and
// links kubernetes/scheme into every drivers process); a CNI manifest uses three
// or four group-versions.
type kinds struct {
	rc rest.Interface

	mu sync.Mutex
	gv map[schema.GroupVersion][]metav1.APIResource // nil: not served (yet)
}

func newKinds(rc rest.Interface) *kinds {
	return &kinds{rc: rc, gv: map[schema.GroupVersion][]metav1.APIResource{}}
}

// mapping returns gvk's resource and whether it is namespaced. A kind the server does
// not serve is a meta.NoKindMatchError (its CRD may come later in the same manifest).
func (k *kinds) mapping(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	gv := gvk.GroupVersion()
	k.mu.Lock()
	list, known := k.gv[gv]
	k.mu.Unlock()
	if !known {
		var err error
		if list, err = k.fetch(ctx, gv); err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		k.mu.Lock()
		k.gv[gv] = list
		k.mu.Unlock()
	}
	for _, r := range list {
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") { // not a subresource
			return gv.WithResource(r.Name), r.Namespaced, nil
		}
	}
	return schema.GroupVersionResource{}, false, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

// forget drops what is known of gv, so a CRD just created is looked up again.
func (k *kinds) forget(gv schema.GroupVersion) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.gv, gv)
}

// fetch reads one group-version's resource list; nil if the server does not serve it.
func (k *kinds) fetch(ctx context.Context, gv schema.GroupVersion) ([]metav1.APIResource, error) {
	p := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		p = "/api/" + gv.Version
	}
	body, err := k.rc.Get().AbsPath(p).DoRaw(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("discover %s: %w", gv, err)
	}
	var l metav1.APIResourceList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("discover %s: %w", gv, err)
	}
	return l.APIResources, nil
}
