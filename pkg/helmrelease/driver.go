package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartv2util "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Errors a caller branches on (with errors.Is); input errors are in chart.go.
var (
	// ErrNotFound: the release has no revision.
	ErrNotFound = errors.New("release not found")
	// ErrProtected: remediating the failed release would uninstall it, and it is
	// protected; it is kept for inspection.
	ErrProtected = errors.New("failed release is protected")
	// ErrRequest: a field of the request is missing or invalid.
	ErrRequest = errors.New("invalid request")
	// ErrTests: the chart's Helm tests failed after an install or upgrade.
	ErrTests = errors.New("helm tests failed")
	// ErrMinReady: the release's resources did not stay ready for MinReady.
	ErrMinReady = errors.New("release did not stay ready")
)

// Labels on Helm's release records; label values are at most 63 characters, so
// each holds the first 32 hex digits (128 bits) of its SHA-256.
const (
	labelChartDigest  = "plinth.dev/chart-digest"
	labelValuesDigest = "plinth.dev/values-digest"
	digestLen         = 32
)

// Remediation is what Apply does with a failed release (including one it has just
// unlocked from a stale pending state) before applying again.
type Remediation string

const (
	// RemediateRollback rolls back to the last revision that deployed, then
	// upgrades; a release that never deployed is reinstalled.
	RemediateRollback Remediation = "rollback"
	// RemediateReinstall uninstalls the release, then installs it afresh.
	RemediateReinstall Remediation = "reinstall"
)

// WaitFor says which resources an operation waits for before it succeeds.
type WaitFor string

const (
	// WaitAll waits until every resource of the release is ready (kstatus:
	// Deployments available, Jobs complete, Services with their addresses, ...).
	WaitAll WaitFor = "all"
	// WaitHooks waits for hooks only: the release succeeds once its resources are
	// accepted by the API server.
	WaitHooks WaitFor = "hooks"
)

// DefaultTimeout bounds one operation's wait when Wait.Timeout is zero.
const DefaultTimeout = 5 * time.Minute

// DefaultMaxHistory is how many revisions a release keeps when the request says 0.
const DefaultMaxHistory = 10

// Wait is an operation's wait policy.
type Wait struct {
	For     WaitFor       // "" is WaitAll
	Timeout time.Duration // 0 is DefaultTimeout
}

func (w Wait) strategy() kube.WaitStrategy {
	if w.For == WaitHooks {
		return kube.HookOnlyStrategy
	}
	return kube.StatusWatcherStrategy
}

func (w Wait) timeout() time.Duration {
	if w.Timeout <= 0 {
		return DefaultTimeout
	}
	return w.Timeout
}

// Request is one release as it should be.
type Request struct {
	Release   string
	Namespace string
	Chart     *Chart
	// Values are the merged overrides (a nil map is no overrides).
	Values      map[string]any
	Wait        Wait
	Remediation Remediation // "" is RemediateRollback
	// Protected keeps a failed release for inspection: Apply refuses to uninstall it
	// (ErrProtected) where remediation would.
	Protected  bool
	MaxHistory int // 0 is DefaultMaxHistory
	// Tests runs the chart's Helm tests after an install or upgrade; a failing
	// test fails Apply (ErrTests), the release stays deployed.
	Tests bool
	// MinReady: after the wait succeeds, the release's resources must still be
	// ready this much later (a crash-looping pod that was briefly ready fails).
	MinReady time.Duration
}

// Status is a release's latest revision.
type Status struct {
	Release   string
	Namespace string
	Revision  int
	// State is Helm's: deployed, failed, superseded, uninstalled, uninstalling,
	// pending-install, pending-upgrade, pending-rollback.
	State       string
	Description string
	// LastError is the description of a failed revision, "" otherwise.
	LastError    string
	Chart        string // name-version
	ChartDigest  string // prefix of the archive's SHA-256 (digestLen hex digits)
	ValuesDigest string // prefix of the values' SHA-256
	Updated      time.Time
}

// Result is what Apply did.
type Result struct {
	Status Status
	// Changed is true when Apply made a new revision.
	Changed bool
	// Recovered says what Apply did to a stuck or failed release first ("" if
	// nothing): the unlock and the remediation.
	Recovered []string
}

// Driver drives releases on one cluster. Its methods may run concurrently for
// different releases; operations on the same release must not overlap (the
// caller serialises them, as the Raft leader does per chart).
type Driver struct {
	get *getter
	log *slog.Logger
}

// New makes a Driver for the cluster and identity of an admin kubeconfig.
func New(kubeconfig []byte, log *slog.Logger) (*Driver, error) {
	if log == nil {
		log = slog.Default()
	}
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: kubeconfig: %w", err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("helmrelease: kubeconfig: %w", err)
	}
	// client-go's defaults (5 QPS) throttle a chart of many objects.
	cfg.QPS, cfg.Burst = 50, 100
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: discovery client: %w", err)
	}
	disc := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(disc), disc, nil)
	return &Driver{get: &getter{raw: *raw, config: cfg, disc: disc, mapper: mapper}, log: log}, nil
}

// config is Helm's action configuration for one namespace, its release records
// stored as Secrets there (Helm's default).
func (d *Driver) config(ns string) (*action.Configuration, error) {
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(d.log.Handler()))
	if err := cfg.Init(d.get.forNamespace(ns), ns, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	return cfg, nil
}

func (r *Request) check() error {
	if err := chartv2util.ValidateReleaseName(r.Release); err != nil {
		return fmt.Errorf("%w: release: %q: %v", ErrRequest, r.Release, err)
	}
	if r.Namespace == "" {
		return fmt.Errorf("%w: release %s: namespace is empty", ErrRequest, r.Release)
	}
	if r.Chart == nil {
		return fmt.Errorf("%w: release %s/%s: no chart (load one with LoadChart)", ErrRequest, r.Namespace, r.Release)
	}
	switch r.Remediation {
	case "", RemediateRollback, RemediateReinstall:
	default:
		return fmt.Errorf("%w: release %s/%s: remediation %q (want %s or %s)", ErrRequest, r.Namespace, r.Release, r.Remediation, RemediateRollback, RemediateReinstall)
	}
	switch r.Wait.For {
	case "", WaitAll, WaitHooks:
	default:
		return fmt.Errorf("%w: release %s/%s: wait %q (want %s or %s)", ErrRequest, r.Namespace, r.Release, r.Wait.For, WaitAll, WaitHooks)
	}
	return nil
}

// Render renders the request's chart offline with its values, as Apply does
// before it changes anything, so a caller without a cluster (the coordinators'
// upload check) refuses a chart that cannot render. Errors wrap ErrRender.
func Render(req Request) error {
	if req.Chart == nil {
		return fmt.Errorf("helmrelease: %w: no chart (load one with LoadChart)", ErrRequest)
	}
	if err := req.render(); err != nil {
		return fmt.Errorf("helmrelease: %w", err)
	}
	return nil
}

// render renders the chart offline with the values (and checks them against the
// chart's values.schema.json), so a chart that cannot render is refused before
// anything changes.
func (r *Request) render() error {
	opts := common.ReleaseOptions{Name: r.Release, Namespace: r.Namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(r.Chart.chart, r.Values, opts, common.DefaultCapabilities)
	if err != nil {
		return fmt.Errorf("%w: chart %s-%s: %v", ErrRender, r.Chart.Name, r.Chart.Version, err)
	}
	if _, err := engine.Render(r.Chart.chart, vals); err != nil {
		return fmt.Errorf("%w: chart %s-%s: %v", ErrRender, r.Chart.Name, r.Chart.Version, err)
	}
	return nil
}

// Apply installs or upgrades the release to the request's chart and values. The
// same chart and values as the deployed revision make no new revision. A stuck
// or failed latest revision is recovered first (see the package doc).
func (d *Driver) Apply(ctx context.Context, req Request) (Result, error) {
	if err := req.check(); err != nil {
		return Result{}, fmt.Errorf("helmrelease: %w", err)
	}
	ref := req.Namespace + "/" + req.Release
	wrap := func(what string, err error) error {
		return fmt.Errorf("helmrelease: %s release %s: %w", what, ref, err)
	}
	vd, err := valuesDigest(req.Values)
	if err != nil {
		return Result{}, wrap("apply", err)
	}
	if err := req.render(); err != nil {
		return Result{}, wrap("apply", err)
	}
	labels := map[string]string{labelChartDigest: req.Chart.Digest[:digestLen], labelValuesDigest: vd[:digestLen]}
	cfg, err := d.config(req.Namespace)
	if err != nil {
		return Result{}, wrap("apply", err)
	}
	var res Result
	last, err := lastRelease(cfg, req.Release)
	if err != nil {
		return res, wrap("read", err)
	}
	if last != nil && last.Info.Status.IsPending() {
		note, err := d.unlock(cfg, last)
		if err != nil {
			return res, wrap("unlock", err)
		}
		res.Recovered = append(res.Recovered, note)
	}
	if last != nil && last.Info.Status == rcommon.StatusFailed {
		notes, err := d.remediate(ctx, cfg, req, last)
		res.Recovered = append(res.Recovered, notes...)
		if err != nil {
			return res, wrap("remediate", err)
		}
		if last, err = lastRelease(cfg, req.Release); err != nil {
			return res, wrap("read", err)
		}
	}
	if last != nil && last.Info.Status == rcommon.StatusUninstalling {
		// An uninstall that a dead process left half done: finish it.
		if err := d.uninstall(ctx, cfg, req.Release, req.Wait); err != nil {
			return res, wrap("finish uninstall of", err)
		}
		res.Recovered = append(res.Recovered, fmt.Sprintf("finished the interrupted uninstall of revision %d", last.Version))
		last = nil
	}

	var rel *release.Release
	switch {
	case last == nil || last.Info.Status == rcommon.StatusUninstalled:
		rel, err = d.install(ctx, cfg, req, labels, last != nil)
	case last.Info.Status == rcommon.StatusDeployed &&
		last.Labels[labelChartDigest] == labels[labelChartDigest] && last.Labels[labelValuesDigest] == labels[labelValuesDigest]:
		res.Status = statusOf(last)
		return res, nil
	default:
		rel, err = d.upgrade(ctx, cfg, req, labels)
	}
	if rel != nil {
		res.Status, res.Changed = statusOf(rel), true
	}
	if err != nil {
		return res, wrap("apply", err)
	}
	if err := d.settle(ctx, cfg, req, rel); err != nil {
		return res, wrap("check", err)
	}
	return res, nil
}

// settle holds a new revision to MinReady and runs its tests, if the request asks.
func (d *Driver) settle(ctx context.Context, cfg *action.Configuration, req Request, rel *release.Release) error {
	if req.MinReady > 0 && rel != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(req.MinReady):
		}
		resources, err := cfg.KubeClient.Build(strings.NewReader(rel.Manifest), false)
		if err != nil {
			return fmt.Errorf("read the release's resources: %w", err)
		}
		kc, ok := cfg.KubeClient.(kube.InterfaceWaitOptions)
		if !ok {
			return fmt.Errorf("helm's kube client cannot wait with options")
		}
		w, err := kc.GetWaiterWithOptions(kube.StatusWatcherStrategy, kube.WithWaitContext(ctx))
		if err != nil {
			return err
		}
		if err := w.Wait(resources, 30*time.Second); err != nil {
			return fmt.Errorf("%w: not ready %s after it first was: %v", ErrMinReady, req.MinReady, err)
		}
	}
	if req.Tests && rel != nil {
		t := action.NewReleaseTesting(cfg)
		t.Namespace, t.Timeout = req.Namespace, req.Wait.timeout()
		t.WaitOptions = []kube.WaitOption{kube.WithWaitContext(ctx)}
		_, shutdown, err := t.Run(req.Release)
		if shutdown != nil {
			if serr := shutdown(); serr != nil {
				d.log.Warn("helm test cleanup", "release", req.Namespace+"/"+req.Release, "err", serr)
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrTests, err)
		}
	}
	return nil
}

func (d *Driver) install(ctx context.Context, cfg *action.Configuration, req Request, labels map[string]string, replace bool) (*release.Release, error) {
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Replace = req.Release, req.Namespace, true, replace
	in.WaitStrategy, in.Timeout = req.Wait.strategy(), req.Wait.timeout()
	in.WaitOptions = []kube.WaitOption{kube.WithWaitContext(ctx)}
	in.Labels = labels
	// Helm's client-side OpenAPI check parses the server's whole OpenAPI document on
	// every install (three quarters of an install's time, `make bench-helm`); the
	// API server validates every object strictly anyway.
	in.DisableOpenAPIValidation = true
	r, err := in.RunWithContext(ctx, req.Chart.chart, req.Values)
	rel, _ := asRelease(r)
	return rel, err
}

func (d *Driver) upgrade(ctx context.Context, cfg *action.Configuration, req Request, labels map[string]string) (*release.Release, error) {
	up := action.NewUpgrade(cfg)
	up.Namespace = req.Namespace
	up.WaitStrategy, up.Timeout = req.Wait.strategy(), req.Wait.timeout()
	up.WaitOptions = []kube.WaitOption{kube.WithWaitContext(ctx)}
	up.Labels = labels
	up.DisableOpenAPIValidation = true // as install
	up.MaxHistory = req.MaxHistory
	if up.MaxHistory <= 0 {
		up.MaxHistory = DefaultMaxHistory
	}
	r, err := up.RunWithContext(ctx, req.Release, req.Chart.chart, req.Values)
	rel, _ := asRelease(r)
	return rel, err
}

// Rollback rolls the release back to a revision (0: the one before the latest).
// A stale pending latest revision is unlocked first.
func (d *Driver) Rollback(ctx context.Context, name, namespace string, revision int, wait Wait) (Status, error) {
	ref := namespace + "/" + name
	cfg, err := d.config(namespace)
	if err != nil {
		return Status{}, fmt.Errorf("helmrelease: rollback release %s: %w", ref, err)
	}
	last, err := lastRelease(cfg, name)
	if err != nil {
		return Status{}, fmt.Errorf("helmrelease: rollback release %s: %w", ref, err)
	}
	if last == nil {
		return Status{}, fmt.Errorf("helmrelease: rollback release %s: %w", ref, ErrNotFound)
	}
	if last.Info.Status.IsPending() {
		if _, err := d.unlock(cfg, last); err != nil {
			return Status{}, fmt.Errorf("helmrelease: rollback release %s: %w", ref, err)
		}
	}
	if err := d.rollback(ctx, cfg, name, revision, wait); err != nil {
		return Status{}, fmt.Errorf("helmrelease: rollback release %s to revision %d: %w", ref, revision, err)
	}
	return d.Status(ctx, name, namespace)
}

func (d *Driver) rollback(ctx context.Context, cfg *action.Configuration, name string, revision int, wait Wait) error {
	rb := action.NewRollback(cfg)
	rb.Version = revision
	rb.WaitStrategy, rb.Timeout = wait.strategy(), wait.timeout()
	rb.WaitOptions = []kube.WaitOption{kube.WithWaitContext(ctx)}
	rb.MaxHistory = DefaultMaxHistory
	return rb.Run(name)
}

// Uninstall removes the release and its history; a release that does not exist is
// already uninstalled.
func (d *Driver) Uninstall(ctx context.Context, name, namespace string, wait Wait) error {
	cfg, err := d.config(namespace)
	if err != nil {
		return fmt.Errorf("helmrelease: uninstall release %s/%s: %w", namespace, name, err)
	}
	if err := d.uninstall(ctx, cfg, name, wait); err != nil {
		return fmt.Errorf("helmrelease: uninstall release %s/%s: %w", namespace, name, err)
	}
	return nil
}

func (d *Driver) uninstall(ctx context.Context, cfg *action.Configuration, name string, wait Wait) error {
	un := action.NewUninstall(cfg)
	un.IgnoreNotFound = true
	un.WaitStrategy, un.Timeout = wait.strategy(), wait.timeout()
	un.WaitOptions = []kube.WaitOption{kube.WithWaitContext(ctx)}
	_, err := un.Run(name)
	return err
}

// Status reports the latest revision; ErrNotFound when there is none.
func (d *Driver) Status(_ context.Context, name, namespace string) (Status, error) {
	cfg, err := d.config(namespace)
	if err != nil {
		return Status{}, fmt.Errorf("helmrelease: status of release %s/%s: %w", namespace, name, err)
	}
	last, err := lastRelease(cfg, name)
	if err != nil {
		return Status{}, fmt.Errorf("helmrelease: status of release %s/%s: %w", namespace, name, err)
	}
	if last == nil {
		return Status{}, fmt.Errorf("helmrelease: status of release %s/%s: %w", namespace, name, ErrNotFound)
	}
	return statusOf(last), nil
}

// History lists every kept revision, oldest first; empty when there is none.
func (d *Driver) History(_ context.Context, name, namespace string) ([]Status, error) {
	cfg, err := d.config(namespace)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: history of release %s/%s: %w", namespace, name, err)
	}
	rels, err := history(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: history of release %s/%s: %w", namespace, name, err)
	}
	out := make([]Status, 0, len(rels))
	for _, r := range rels {
		out = append(out, statusOf(r))
	}
	return out, nil
}

// history reads every revision from Helm's storage, oldest first.
func history(cfg *action.Configuration, name string) ([]*release.Release, error) {
	hs, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*release.Release, 0, len(hs))
	for _, h := range hs {
		r, err := asRelease(h)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// lastRelease is the latest revision, nil when there is none.
func lastRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	hs, err := history(cfg, name)
	if err != nil || len(hs) == 0 {
		return nil, err
	}
	return hs[len(hs)-1], nil
}

func asRelease(r any) (*release.Release, error) {
	switch v := r.(type) {
	case *release.Release:
		return v, nil
	case release.Release:
		return &v, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected release record type %T", r)
}

func statusOf(r *release.Release) Status {
	s := Status{Release: r.Name, Namespace: r.Namespace, Revision: r.Version,
		ChartDigest: r.Labels[labelChartDigest], ValuesDigest: r.Labels[labelValuesDigest]}
	if r.Info != nil {
		s.State, s.Description, s.Updated = string(r.Info.Status), r.Info.Description, r.Info.LastDeployed
		if r.Info.Status == rcommon.StatusFailed {
			s.LastError = r.Info.Description
		}
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		s.Chart = r.Chart.Metadata.Name + "-" + r.Chart.Metadata.Version
	}
	return s
}

// Values returns the values the latest revision was made with (the merged
// overrides, as Helm stored them); ErrNotFound when there is none.
func (d *Driver) Values(_ context.Context, name, namespace string) (map[string]any, error) {
	cfg, err := d.config(namespace)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: values of release %s/%s: %w", namespace, name, err)
	}
	last, err := lastRelease(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: values of release %s/%s: %w", namespace, name, err)
	}
	if last == nil {
		return nil, fmt.Errorf("helmrelease: values of release %s/%s: %w", namespace, name, ErrNotFound)
	}
	return last.Config, nil
}
