package apprunner

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
)

// Labels on every object the runner generates, so removal finds exactly its own.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedByPlinth  = "plinth"
	LabelApplication = "plinth.dev/application"
)

// cluster is the site's cluster as the admin kubeconfig reaches it: Helm's driver
// and a plain client for nodes and the generated objects.
type cluster struct {
	kubeconfig []byte
	driver     *helmrelease.Driver
	kube       kubernetes.Interface
}

// clusterFor returns the cluster for the current admin kubeconfig, building it the
// first time and again whenever the kubeconfig changes (a re-initialised cluster).
func (r *Runner) clusterFor() (*cluster, error) {
	kc, err := r.cfg.Kubeconfig()
	if err != nil {
		return nil, fmt.Errorf("waiting for the cluster: %w", err)
	}
	r.clusterMu.Lock()
	defer r.clusterMu.Unlock()
	if r.cluster != nil && bytes.Equal(r.cluster.kubeconfig, kc) {
		return r.cluster, nil
	}
	d, err := helmrelease.New(kc, r.log)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("apprunner: kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	k, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("apprunner: kubernetes client: %w", err)
	}
	r.cluster = &cluster{kubeconfig: kc, driver: d, kube: k}
	return r.cluster, nil
}

// nodes lists the cluster's nodes for the gates.
func (c *cluster) nodes(ctx context.Context) ([]appplan.Node, error) {
	list, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]appplan.Node, 0, len(list.Items))
	for _, n := range list.Items {
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = cond.Status == corev1.ConditionTrue
			}
		}
		out = append(out, appplan.Node{Name: n.Name, Labels: n.Labels, Ready: ready})
	}
	return out, nil
}

func ownLabels(app string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByPlinth, LabelApplication: app}
}

// ensureNamespace creates ns if it is missing.
func (c *cluster) ensureNamespace(ctx context.Context, ns string) error {
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// applyObject creates o or updates it to what it should be. secret holds a Secret's
// data (opened by the caller); it is never logged.
func (c *cluster) applyObject(ctx context.Context, app string, o appplan.Object, secret map[string][]byte) error {
	meta := metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: ownLabels(app)}
	switch o.Kind {
	case "Secret":
		want := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: secret}
		cl := c.kube.CoreV1().Secrets(o.Namespace)
		have, err := cl.Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cl.Create(ctx, want, metav1.CreateOptions{})
		case err == nil:
			have.Labels, have.Data, have.StringData = mergeLabels(have.Labels, meta.Labels), secret, nil
			_, err = cl.Update(ctx, have, metav1.UpdateOptions{})
		}
		return wrapObj(o, err)
	case "ConfigMap":
		want := &corev1.ConfigMap{ObjectMeta: meta, Data: o.Data}
		cl := c.kube.CoreV1().ConfigMaps(o.Namespace)
		have, err := cl.Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cl.Create(ctx, want, metav1.CreateOptions{})
		case err == nil:
			have.Labels, have.Data = mergeLabels(have.Labels, meta.Labels), o.Data
			_, err = cl.Update(ctx, have, metav1.UpdateOptions{})
		}
		return wrapObj(o, err)
	case "StorageClass":
		want := &storagev1.StorageClass{ObjectMeta: meta, Provisioner: o.Provisioner, Parameters: o.Data}
		cl := c.kube.StorageV1().StorageClasses()
		have, err := cl.Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cl.Create(ctx, want, metav1.CreateOptions{})
		case err == nil && (have.Provisioner != o.Provisioner || !sameMap(have.Parameters, o.Data)):
			// Provisioner and parameters are immutable: replace the class.
			if err = cl.Delete(ctx, o.Name, metav1.DeleteOptions{}); err == nil {
				_, err = cl.Create(ctx, want, metav1.CreateOptions{})
			}
		}
		return wrapObj(o, err)
	}
	return fmt.Errorf("generated object %s %s: kind not supported", o.Kind, o.Name)
}

// deleteObjects removes what the runner generated for app in the namespaces.
// Cluster-scoped objects (the StorageClass) are shared by applications and kept.
func (c *cluster) deleteObjects(ctx context.Context, app string, namespaces []string) error {
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedByPlinth + "," + LabelApplication + "=" + app}
	for _, ns := range namespaces {
		if err := c.kube.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete generated secrets in %s: %w", ns, err)
		}
		if err := c.kube.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete generated config maps in %s: %w", ns, err)
		}
	}
	return nil
}

func wrapObj(o appplan.Object, err error) error {
	if err == nil {
		return nil
	}
	where := o.Name
	if o.Namespace != "" {
		where = o.Namespace + "/" + o.Name
	}
	return fmt.Errorf("generated %s %s: %w", o.Kind, where, err)
}

func mergeLabels(have, add map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range have {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
