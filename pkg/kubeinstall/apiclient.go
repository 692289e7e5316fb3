package kubeinstall

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// API is all the drivers ask of a cluster's API server: Nodes, and Secrets in
// kube-system. It is its own small client rather than client-go's clientset because
// the clientset (and discovery) import client-go's kubernetes/scheme, which registers
// every API group at package init: about 12 ms of CPU in every plinth-drivers
// process, drift passes included, whether or not the process talks to a cluster.
type API interface {
	Node(ctx context.Context, name string) (*corev1.Node, error)
	// NodeExists reports whether the Node is registered without decoding it: checks
	// that only ask this run on every drift pass.
	NodeExists(ctx context.Context, name string) (bool, error)
	Nodes(ctx context.Context) ([]corev1.Node, error)
	// PatchNode applies a JSON merge patch to the Node.
	PatchNode(ctx context.Context, name string, mergePatch []byte) error
	// UpdateNode writes n; a stale resourceVersion fails with a Conflict.
	UpdateNode(ctx context.Context, n *corev1.Node) error
	Secret(ctx context.Context, name string) (*corev1.Secret, error)
	// Secrets lists kube-system's Secrets matching a field selector ("" for all).
	Secrets(ctx context.Context, fieldSelector string) ([]corev1.Secret, error)
	DeleteSecret(ctx context.Context, name string) error
}

// fieldManager names Plinth in the managed fields of what it writes.
const fieldManager = "plinth"

// coreCodecs decode core/v1 and the API's Status errors; built on first use.
var coreCodecs = sync.OnceValues(func() (serializer.CodecFactory, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return serializer.CodecFactory{}, fmt.Errorf("core/v1 scheme: %w", err)
	}
	return serializer.NewCodecFactory(s), nil
})

// restAPI is API over client-go's REST client.
type restAPI struct{ rc *rest.RESTClient }

// newRESTAPI builds an API from a REST config; hc, when not nil, is the HTTP client
// to share.
func newRESTAPI(cfg *rest.Config, hc *http.Client) (API, error) {
	rc, err := newCoreREST(cfg, hc)
	if err != nil {
		return nil, err
	}
	return restAPI{rc: rc}, nil
}

// newCoreREST is a REST client for core/v1 (and, by AbsPath, any path the API serves).
func newCoreREST(cfg *rest.Config, hc *http.Client) (*rest.RESTClient, error) {
	codecs, err := coreCodecs()
	if err != nil {
		return nil, fmt.Errorf("kubernetes API client: %w", err)
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	var rc *rest.RESTClient
	if hc != nil {
		rc, err = rest.RESTClientForConfigAndClient(c, hc)
	} else {
		rc, err = rest.RESTClientFor(c)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes API client: %w", err)
	}
	return rc, nil
}

func (a restAPI) Node(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := a.rc.Get().Resource("nodes").Name(name).Do(ctx).Into(n)
	return n, err
}

func (a restAPI) NodeExists(ctx context.Context, name string) (bool, error) {
	return found(a.rc.Get().Resource("nodes").Name(name).Do(ctx).Error())
}

// found reads a GET's error as an answer to "is it there?": NotFound is no, any
// other error is an error.
func found(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

func (a restAPI) Nodes(ctx context.Context) ([]corev1.Node, error) {
	var l corev1.NodeList
	err := a.rc.Get().Resource("nodes").Do(ctx).Into(&l)
	return l.Items, err
}

func (a restAPI) PatchNode(ctx context.Context, name string, mergePatch []byte) error {
	return a.rc.Patch(types.MergePatchType).Resource("nodes").Name(name).
		Param("fieldManager", fieldManager).Body(mergePatch).Do(ctx).Error()
}

func (a restAPI) UpdateNode(ctx context.Context, n *corev1.Node) error {
	return a.rc.Put().Resource("nodes").Name(n.Name).Param("fieldManager", fieldManager).
		Body(n).Do(ctx).Error()
}

func (a restAPI) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := a.rc.Get().Namespace(metav1.NamespaceSystem).Resource("secrets").Name(name).Do(ctx).Into(s)
	return s, err
}

func (a restAPI) Secrets(ctx context.Context, fieldSelector string) ([]corev1.Secret, error) {
	var l corev1.SecretList
	r := a.rc.Get().Namespace(metav1.NamespaceSystem).Resource("secrets")
	if fieldSelector != "" {
		r = r.Param("fieldSelector", fieldSelector)
	}
	err := r.Do(ctx).Into(&l)
	return l.Items, err
}

func (a restAPI) DeleteSecret(ctx context.Context, name string) error {
	return a.rc.Delete().Namespace(metav1.NamespaceSystem).Resource("secrets").Name(name).Do(ctx).Error()
}
