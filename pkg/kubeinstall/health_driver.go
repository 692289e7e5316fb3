package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// healthTimeout bounds each request of a health check, so a dead VIP fails fast.
const healthTimeout = 5 * time.Second

// HealthDriver runs kube.health: it checks, with the admin kubeconfig, that the API
// answers /readyz through the control-plane endpoint (the VIP) and that every expected
// node is Ready. It changes nothing: every problem is a Change without Apply, so a
// failing first run is a retryable failure and a later problem is drift, both naming
// what is wrong.
type HealthDriver struct{ o *options }

// NewHealthDriver returns the kube.health driver.
func NewHealthDriver(stateDir string, opts ...Option) *HealthDriver {
	return &HealthDriver{o: newOptions(stateDir, opts)}
}

// Kind implements driver.Driver.
func (d *HealthDriver) Kind() string { return kubespec.KindHealth }

// Diff implements driver.Driver.
func (d *HealthDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.HealthInputs
	if err := decode(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(in.Kubeconfig))
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.health: kubeconfig: %w", err))
	}
	// The kubeconfig's own server may be a controller's address: ask the VIP.
	cfg.Host = in.Endpoint
	cfg.Timeout = healthTimeout
	cfg.UserAgent = "plinth-agent"
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.health: %w", err))
	}
	via := "the VIP " + in.Endpoint
	if !in.VIP {
		via = "the control-plane endpoint " + in.Endpoint
	}
	if err := readyz(ctx, hc, in.Endpoint); err != nil {
		return []driver.Change{{Summary: fmt.Sprintf("API not reachable through %s: %v", via, err)}}, nil
	}
	c, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.health: %w", err))
	}
	lctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	list, err := c.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return []driver.Change{{Summary: fmt.Sprintf("cannot list nodes through %s: %v", via, err)}}, nil
	}
	nodes := map[string]*corev1.Node{}
	for i := range list.Items {
		nodes[list.Items[i].Name] = &list.Items[i]
	}
	var cs []driver.Change
	for _, name := range in.Nodes {
		if why := notReady(nodes[name]); why != "" {
			cs = append(cs, driver.Change{Summary: fmt.Sprintf("node %s is not Ready: %s", name, why)})
		}
	}
	return cs, nil
}

// readyz asks the API server whether it is ready to serve.
func readyz(ctx context.Context, hc *http.Client, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/readyz?verbose", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	// The verbose answer lists each check; name the failed ones.
	var failed []string
	for _, l := range strings.Split(string(body), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(l), "[-]"); ok {
			failed = append(failed, f)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("/readyz: %s: %s", resp.Status, strings.Join(failed, ", "))
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return fmt.Errorf("/readyz: %s: %s", resp.Status, msg)
}

// notReady says why a node is not Ready, or "" when it is.
func notReady(n *corev1.Node) string {
	if n == nil {
		return "not registered (no such Node in the cluster)"
	}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		why := strings.TrimSpace(strings.Join(nonEmpty(c.Reason, c.Message), ": "))
		if why == "" {
			why = "Ready is " + string(c.Status)
		}
		return why
	}
	return "kubelet has not reported a Ready condition"
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
