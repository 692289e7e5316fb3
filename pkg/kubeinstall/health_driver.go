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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// healthTimeout bounds each request of a health check, so a dead VIP fails fast.
const healthTimeout = 5 * time.Second

// healthWait bounds how long one run of kube.health waits for the cluster to become
// healthy (nodes turn Ready a few seconds after their joins, once the pod network
// is up), so the step finishes when the cluster does rather than at a retry backoff.
const healthWait = 2 * time.Minute

// HealthDriver runs kube.health: it checks, with the admin kubeconfig, that the API
// answers /readyz through the control-plane endpoint (the VIP) and that every expected
// node is Ready. It changes nothing: its one Change, when something is wrong, names
// every problem and waits (up to healthWait) for the cluster to heal itself, so a
// first run ends as soon as the cluster is healthy, and a later problem is drift.
type HealthDriver struct {
	o    *options
	wait time.Duration
}

// NewHealthDriver returns the kube.health driver.
func NewHealthDriver(stateDir string, opts ...Option) *HealthDriver {
	return &HealthDriver{o: newOptions(stateDir, opts), wait: healthWait}
}

// Kind implements driver.Driver.
func (d *HealthDriver) Kind() string { return kubespec.KindHealth }

// Diff implements driver.Driver.
func (d *HealthDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.HealthInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	problems, err := d.check(ctx, in)
	if err != nil {
		return nil, err
	}
	// One Change per problem; each waits for the whole cluster, so the first to run
	// does the waiting and the rest find nothing left.
	cs := make([]driver.Change, 0, len(problems))
	for _, p := range problems {
		cs = append(cs, driver.Change{Summary: p, Apply: func(ctx context.Context) error { return d.await(ctx, in) }})
	}
	return cs, nil
}

// await polls the cluster until it is healthy, or fails after d.wait naming what is
// still wrong.
func (d *HealthDriver) await(ctx context.Context, in kubespec.HealthInputs) error {
	deadline := time.Now().Add(d.wait)
	for {
		left, err := d.check(ctx, in)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("kube.health: still unhealthy after waiting %s: %s", d.wait, strings.Join(left, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// check lists what is wrong with the cluster; an error means the inputs are unusable.
func (d *HealthDriver) check(ctx context.Context, in kubespec.HealthInputs) ([]string, error) {
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
		return []string{fmt.Sprintf("API not reachable through %s: %v", via, err)}, nil
	}
	c, err := newRESTAPI(cfg, hc)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.health: %w", err))
	}
	lctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	list, err := c.Nodes(lctx)
	if err != nil {
		return []string{fmt.Sprintf("cannot list nodes through %s: %v", via, err)}, nil
	}
	nodes := map[string]*corev1.Node{}
	for i := range list {
		nodes[list[i].Name] = &list[i]
	}
	var problems []string
	for _, name := range in.Nodes {
		if why := notReady(nodes[name]); why != "" {
			problems = append(problems, fmt.Sprintf("node %s is not Ready: %s", name, why))
		}
	}
	return problems, nil
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
