package apprunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plinth-dev/plinth/internal/apiservertest"
	"github.com/plinth-dev/plinth/internal/charttest"
	"github.com/plinth-dev/plinth/internal/logbuf"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/appplan"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/helmrelease"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
)

// localLog applies commands to a real state.Store in order, one at a time, as a
// single-member Raft log would commit them; the FSM's answers come back as errors.
type localLog struct {
	mu  sync.Mutex
	s   *state.Store
	idx uint64
}

func (l *localLog) propose(_ context.Context, typ string, body any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := state.Encode(typ, time.Now(), body)
	if err != nil {
		return err
	}
	l.idx++
	if err, ok := l.s.ApplyCommand(l.idx, data).(error); ok {
		return err
	}
	return nil
}

const siteYAML = `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata: {name: lab}
spec:
  controllers: [ctl-0]
  networks:
  - {name: mgmt, role: mgmt, cidr: 10.0.0.0/24}
  ceph: {osdHosts: 1}
---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: ctl-0}
spec:
  roles: [controller]
  managementAddress: 10.0.0.11
  interfaces:
  - {name: eth1, networks: [mgmt], addresses: [10.0.0.11/24]}
`

// The cephx key and the password the test's secret table holds: neither may show
// up in a release's values or the runner's log.
const (
	testCephKey  = "AQBtestKEYdoNotLeak0000000000000000000=="
	testPassword = "pw-do-not-leak-0123456789"
)

type env struct {
	t       *testing.T
	store   *state.Store
	log     *localLog
	kube    kubernetes.Interface
	kc      []byte
	logBuf  *logbuf.Buffer
	secrets map[string][]byte
	// repo is a chart repository (TLS) serving the web chart.
	repo      string
	repoTrust *http.Client
}

func newEnv(t *testing.T) *env {
	c := apiservertest.Start(t)
	kube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: state.New(nil), kube: kube, kc: c.Kubeconfig, logBuf: &logbuf.Buffer{}}
	e.log = &localLog{s: e.store}
	web := configChart(t, "web")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/index.yaml":
			fmt.Fprint(w, "apiVersion: v1\nentries:\n  web:\n  - {name: web, version: 0.1.0, urls: [web-0.1.0.tgz]}\n")
		case "/web-0.1.0.tgz":
			_, _ = w.Write(web)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	e.repo, e.repoTrust = srv.URL, srv.Client()
	m, err := api.Decode("site.yaml", []byte(siteYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.log.propose(context.Background(), state.CmdApplyManifest, state.ApplyManifest{File: "site.yaml", Manifest: *m}); err != nil {
		t.Fatal(err)
	}
	// The secret table as the coordinator would have it once ceph.user kube-rbd
	// succeeded and the leader generated the application's password.
	user := plan.StepID("ctl-0", cephspec.KindUser, "kube-rbd")
	e.secrets = map[string][]byte{
		secretref.OutputName(user, cephspec.OutputKey):                                               []byte(testCephKey),
		appplan.PasswordSecret("demo", "admin"):                                                      []byte(testPassword),
		secretref.OutputName(plan.StepID("ctl-0", cephspec.KindHealth, ""), cephspec.OutputMonitors): []byte("10.0.0.11:6789"),
	}
	for name, v := range e.secrets {
		e.must(state.CmdPutSecret, state.PutSecret{Secret: state.SecretRecord{Name: name, Ciphertext: v}})
	}
	return e
}

func (e *env) runner() *Runner {
	return New(Config{
		Store: e.store, Propose: e.log.propose,
		Kubeconfig: func() ([]byte, error) { return e.kc, nil },
		// The test's secrets are stored unsealed: sealing is the coordinator's (tested there).
		Unseal: func(_ string, ciphertext []byte) ([]byte, error) { return ciphertext, nil },
		Log:    slog.New(slog.NewTextHandler(e.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Poll:   200 * time.Millisecond,
		Fetch:  helmrelease.FetchOptions{HTTPClient: e.repoTrust},
	})
}

// start runs a runner until the returned stop is called (a leader losing its lead).
func (e *env) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.runner().Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

func (e *env) must(typ string, body any) {
	e.t.Helper()
	if err := e.log.propose(context.Background(), typ, body); err != nil {
		e.t.Fatalf("%s: %v", typ, err)
	}
}

func (e *env) app(name string) state.AppRecord {
	var r state.AppRecord
	e.store.Read(func(v state.View) { r, _ = v.App(name) })
	return r
}

// waitFor waits until cond holds for the application, failing with its status.
func (e *env) waitFor(name, what string, d time.Duration, cond func(r state.AppRecord) bool) state.AppRecord {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := e.app(name)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(r.Status, "", "  ")
			e.t.Fatalf("application %s: not %s after %s; status:\n%s\nrunner log:\n%s", name, what, d, b, tail(e.logBuf.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func chartStatus(r state.AppRecord, chart string) api.ChartStatus {
	for _, c := range r.Status.Charts {
		if c.Chart == chart {
			return c
		}
	}
	return api.ChartStatus{}
}

// configChart is ready as soon as it exists: a ConfigMap of its values.
func configChart(t *testing.T, name string) []byte {
	return charttest.Archive(t, name, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		"values.yaml": "greeting: hello\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data:
  greeting: {{ .Values.greeting | quote }}
  cephSecret: {{ .Values.plinth.ceph.clientSecret | default "none" | quote }}
`,
	})
}

// slowChart is a Deployment: without a kubelet it is ready only when the test says.
func slowChart(t *testing.T) []byte {
	return charttest.Archive(t, "slow", map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: slow\nversion: 0.1.0\n",
		"values.yaml": "replicas: 1\n",
		"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: slow}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec:
      containers: [{name: c, image: registry.local/hello:v1}]
`,
	})
}

func decodeApp(t *testing.T, y string) api.Application {
	t.Helper()
	m, err := api.Decode("app.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	m.Default()
	if len(m.Applications) != 1 {
		t.Fatalf("want one application, got %d", len(m.Applications))
	}
	return m.Applications[0]
}

const appV1 = `apiVersion: plinth.dev/v1alpha1
kind: Application
metadata: {name: demo}
spec:
  passwords: [admin]
  groups:
  - name: base
    charts:
    - {name: config, source: {archive: config-0.1.0.tgz}, namespace: demo}
  - name: web
    gates: [{nodesLabelled: {label: role=web}}, {chart: config}]
    charts:
    - {name: web, source: {repo: "REPO", chart: web, version: 0.1.0}, namespace: demo, values: {greeting: from-app}}
`

const appV2 = appV1 + `    - {name: slow, source: {archive: slow-0.1.0.tgz}, namespace: demo, wait: {timeoutSeconds: 120}}
`

func (e *env) upload(y string, update bool, archives ...state.Archive) {
	e.t.Helper()
	y = strings.ReplaceAll(y, "REPO", e.repo)
	e.must(state.CmdAppUpload, state.AppUpload{File: "app.yaml", Application: decodeApp(e.t, y), Archives: archives, Update: update})
}

func readyNode(t *testing.T, kube kubernetes.Interface, name string, labels map[string]string) {
	ctx := context.Background()
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// markDeploymentsReady plays the Deployment controller and kubelet for namespace
// ns until ctx ends: every Deployment's status says all its replicas are available.
func markDeploymentsReady(ctx context.Context, kube kubernetes.Interface, ns string) {
	for ctx.Err() == nil {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, d := range list.Items {
				if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas {
					continue
				}
				n := *d.Spec.Replicas
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
					Conditions: []appsv1.DeploymentCondition{
						{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
						{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
					}}
				_, _ = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestApplicationLifecycleRealAPIServer drives one application (one chart uploaded,
// one from a chart repository) through install
// (with gates the test satisfies), an override change, an update, an abort, a
// leader change in the middle of an apply, and removal, on a real API server.
func TestApplicationLifecycleRealAPIServer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	archives := []state.Archive{{Name: "config-0.1.0.tgz", Data: configChart(t, "config")}}
	e.upload(appV1, false, archives...)
	d, err := helmrelease.New(e.kc, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := e.start()
	e.must(state.CmdAppRequest, state.AppRequest{Name: "demo", Action: state.AppActionApply})

	// The first group installs; the second waits for a labelled Ready node.
	r := e.waitFor("demo", "waiting for a node", 60*time.Second, func(r state.AppRecord) bool {
		return chartStatus(r, "config").State == api.ChartDeployed && chartStatus(r, "web").State == api.ChartWaiting
	})
	if w := chartStatus(r, "web").WaitingFor; !strings.Contains(w, "role=web") {
		t.Errorf("web waits for %q, want it to name the label role=web", w)
	}
	readyNode(t, e.kube, "node-1", map[string]string{"role": "web"})
	r = e.waitFor("demo", api.AppApplied, 60*time.Second, func(r state.AppRecord) bool { return r.Status.State == api.AppApplied })
	if c := chartStatus(r, "web"); c.Revision != 1 {
		t.Errorf("web = %+v, want revision 1", c)
	}
	cm, err := e.kube.CoreV1().ConfigMaps("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "from-app" {
		t.Fatalf("web's ConfigMap = %v, %v; want the application's greeting", cm.Data, err)
	}

	// Generated objects: the Ceph client Secret holds the key; values never do.
	sec, err := e.kube.CoreV1().Secrets("demo").Get(ctx, "pvc-ceph-client-key", metav1.GetOptions{})
	if err != nil || string(sec.Data["key"]) != testCephKey {
		t.Errorf("Secret demo/pvc-ceph-client-key = %v, %v; want the kube-rbd key", sec.Data, err)
	}
	pw, err := e.kube.CoreV1().Secrets("demo").Get(ctx, "demo-passwords", metav1.GetOptions{})
	if err != nil || string(pw.Data["admin"]) != testPassword {
		t.Errorf("Secret demo/demo-passwords: %v", err)
	}
	for _, rel := range []string{"config", "web"} {
		vals, err := d.Values(ctx, rel, "demo")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(vals)
		if strings.Contains(string(b), testCephKey) || strings.Contains(string(b), testPassword) || strings.Contains(string(b), secretref.Prefix) {
			t.Errorf("release %s's values hold a secret: %s", rel, b)
		}
	}

	// A user override re-applies only the chart it changes.
	e.must(state.CmdAppOverride, state.AppOverride{Name: "demo", Chart: "web", Values: json.RawMessage(`{"greeting":"from-user"}`)})
	e.must(state.CmdAppRequest, state.AppRequest{Name: "demo", Action: state.AppActionApply})
	r = e.waitFor("demo", "applied with the override", 60*time.Second, func(r state.AppRecord) bool {
		return r.Status.State == api.AppApplied && chartStatus(r, "web").Revision == 2
	})
	if c := chartStatus(r, "config"); c.Revision != 1 {
		t.Errorf("config = revision %d after an override of web, want 1 (unchanged)", c.Revision)
	}
	if cm, _ := e.kube.CoreV1().ConfigMaps("demo").Get(ctx, "web", metav1.GetOptions{}); cm.Data["greeting"] != "from-user" {
		t.Errorf("web's greeting = %q, want the user override", cm.Data["greeting"])
	}

	// An update of an applied application rolls out at once; abort stops it
	// while slow waits for its Deployment.
	archives = append(archives, state.Archive{Name: "slow-0.1.0.tgz", Data: slowChart(t)})
	e.upload(appV2, true, archives...)
	e.waitFor("demo", "applying slow", 60*time.Second, func(r state.AppRecord) bool { return chartStatus(r, "slow").State == api.ChartApplying })
	waitPending(t, d, "slow", "demo")
	e.must(state.CmdAppRequest, state.AppRequest{Name: "demo", Action: state.AppActionAbort})
	r = e.waitFor("demo", api.AppApplyFailed, 5*time.Second, func(r state.AppRecord) bool { return r.Status.State == api.AppApplyFailed })
	time.Sleep(time.Second) // the aborted run must not report again
	if r2 := e.app("demo"); r2.Status.State != api.AppApplyFailed || r2.ModifyIndex != r.ModifyIndex {
		t.Errorf("after abort the status changed again: %+v", r2.Status)
	}

	// A leader change in the middle of an apply: the first runner stops while slow
	// waits; the second resumes the same request and finishes it once slow's
	// Deployment is ready.
	e.must(state.CmdAppRequest, state.AppRequest{Name: "demo", Action: state.AppActionApply})
	e.waitFor("demo", "applying slow again", 60*time.Second, func(r state.AppRecord) bool { return chartStatus(r, "slow").State == api.ChartApplying })
	waitPending(t, d, "slow", "demo")
	stop()
	op := e.app("demo").Op
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go markDeploymentsReady(cctx, e.kube, "demo")
	e.start()
	r = e.waitFor("demo", "applied by the new leader", 90*time.Second, func(r state.AppRecord) bool { return r.Status.State == api.AppApplied })
	if r.Op != op {
		t.Errorf("the new leader's run is request %d, want the interrupted %d", r.Op, op)
	}
	if c := chartStatus(r, "slow"); c.State != api.ChartDeployed || c.Message == "" {
		t.Errorf("slow = %+v; want deployed, saying how the interrupted release was recovered", c)
	} else {
		t.Logf("slow after the leader change: revision %d, %s", c.Revision, c.Message)
	}
	cancel()

	// Remove: every release and generated namespaced object goes; the application
	// is uploaded again and can be deleted.
	e.must(state.CmdAppRequest, state.AppRequest{Name: "demo", Action: state.AppActionRemove})
	e.waitFor("demo", api.AppUploaded, 60*time.Second, func(r state.AppRecord) bool { return r.Status.State == api.AppUploaded })
	for _, rel := range []string{"config", "web", "slow"} {
		if _, err := d.Status(ctx, rel, "demo"); !errors.Is(err, helmrelease.ErrNotFound) {
			t.Errorf("release %s after remove: %v, want not found", rel, err)
		}
	}
	if _, err := e.kube.CoreV1().Secrets("demo").Get(ctx, "pvc-ceph-client-key", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("generated Secret after remove: %v, want not found", err)
	}
	e.must(state.CmdAppRequest, state.AppRequest{Name: "demo", Action: state.AppActionDelete})

	// Nothing secret in the runner's log; events name application and chart.
	if l := e.logBuf.String(); strings.Contains(l, testCephKey) || strings.Contains(l, testPassword) {
		t.Error("the runner's log holds a secret")
	}
	var reasons []string
	e.store.Read(func(v state.View) {
		for _, ev := range v.Events(0) {
			if strings.HasPrefix(ev.Object, "app/demo") {
				reasons = append(reasons, ev.Reason)
			}
		}
	})
	for _, want := range []string{"ApplyRequested", "ChartDeployed", "ApplicationApplied", "Aborted", "ApplicationRemoved", "ApplicationDeleted"} {
		if !strings.Contains(strings.Join(reasons, " "), want) {
			t.Errorf("no %s event; events: %v", want, reasons)
		}
	}
	fmt.Fprintln(testWriter{t}, "events:", strings.Join(reasons, " "))
}

// waitPending waits until Helm has recorded the release's revision as pending:
// the run is inside Helm's install or upgrade.
func waitPending(t *testing.T, d *helmrelease.Driver, rel, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := d.Status(context.Background(), rel, ns)
		if err == nil && strings.HasPrefix(st.State, "pending-") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("release %s/%s never pending: %+v, %v", ns, rel, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
