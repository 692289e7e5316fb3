package kubeinstall

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
)

// ClientFunc builds an API client from a kubeconfig's bytes; tests substitute a fake.
type ClientFunc func(kubeconfig []byte) (API, error)

// WithClients replaces how the drivers reach the API server.
func WithClients(f ClientFunc) Option { return func(o *options) { o.clients = f } }

// reuseClients returns f, building one client per kubeconfig for the life of the
// process: a drift pass on the first controller checks one kube.labels step per
// node with the same kubeconfig, which each client would parse and whose
// certificates it would load again. Errors are not kept.
func reuseClients(f ClientFunc) ClientFunc {
	var mu sync.Mutex
	built := map[string]API{}
	return func(kubeconfig []byte) (API, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := built[string(kubeconfig)]; ok {
			return c, nil
		}
		c, err := f(kubeconfig)
		if err != nil {
			return nil, err
		}
		built[string(kubeconfig)] = c
		return c, nil
	}
}

// NewClient builds an API client from kubeconfig bytes with short timeouts, so a
// step observing a dead control plane fails fast and retries.
func NewClient(kubeconfig []byte) (API, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	cfg.UserAgent = "plinth-agent"
	return newRESTAPI(cfg, nil)
}

// nodeRegistered reports whether the Node exists.
func nodeRegistered(ctx context.Context, c API, name string) (bool, error) {
	ok, err := c.NodeExists(ctx, name)
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", name, err)
	}
	return ok, nil
}

// tokenSecret names the Secret that holds bootstrap token id.
func tokenSecret(id string) string { return "bootstrap-token-" + id }

// tokenID is the public part of "id.secret".
func tokenID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}

// secretExists reports whether kube-system/name exists.
func secretExists(ctx context.Context, c API, name string) (bool, error) {
	_, err := c.Secret(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("get secret kube-system/%s: %w", name, err)
}

// plinthTokens lists the IDs of the bootstrap tokens Plinth created.
func plinthTokens(ctx context.Context, c API) ([]string, error) {
	list, err := c.Secrets(ctx, "type="+string(corev1.SecretTypeBootstrapToken))
	if err != nil {
		return nil, fmt.Errorf("list bootstrap tokens: %w", err)
	}
	var ids []string
	for _, s := range list {
		if string(s.Data["description"]) == TokenDescription {
			ids = append(ids, string(s.Data["token-id"]))
		}
	}
	return ids, nil
}

func deleteSecret(ctx context.Context, c API, name string) error {
	err := c.DeleteSecret(ctx, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret kube-system/%s: %w", name, err)
	}
	return nil
}
