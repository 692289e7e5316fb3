package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// TestLabKubernetes brings the demo's own site (examples/lab/site.yaml) up on booted
// hosts and checks the Kubernetes cluster Plinth's steps built there: nodes, labels,
// the pod network across hosts, Services and DNS; that re-applying changes nothing;
// and that losing controller-0 keeps the API (VIP), etcd and the coordinators up,
// with the Site's conditions naming controller-0, until it comes back.
func TestLabKubernetes(t *testing.T) {
	l, ctx := bootedLab(t, 15*time.Minute)
	// The demo's own manifest on the demo's addresses, under a prefix of its own. Up
	// boots and installs; the apply waits until the failure below is armed.
	manifest := filepath.Join("..", "..", "examples", "lab", "site.yaml")
	start := time.Now()
	if err := l.Up(ctx, lab.DefaultSpec(""), testLog{t}); err != nil {
		t.Fatal(err)
	}
	// A failed kube.init, induced: kubeadm is killed on controller-0 once it has
	// written the cluster CA, leaving half a control plane behind.
	killed := make(chan error, 1)
	go func() {
		_, err := l.Exec(ctx, l.Host("controller-0"), "sh", "-c",
			"until [ -e /etc/kubernetes/pki/ca.crt ]; do sleep 0.02; done; pkill -KILL -x kubeadm")
		killed <- err
	}()
	applied := time.Now()
	if out, err := l.Apply(ctx, manifest); err != nil {
		t.Fatalf("apply: %v %s", err, out)
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatalf("killing kubeadm init: %v", err)
		}
	case <-time.After(4 * time.Minute):
		t.Fatal("kubeadm init never started on controller-0")
	}
	// And, in the middle of the bootstrap, the leader coordinator dies (kill -9).
	leader, err := l.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Coordinator(leader).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubeadm init killed on controller-0 and leader coordinator %s killed %s after apply", leader, time.Since(applied).Round(100*time.Millisecond))
	if err := l.WaitSiteReady(ctx, nil, 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE apply -> Site Ready with a Kubernetes cluster, through a failed kube.init and a killed leader: %s (lab up to Ready %s)",
		time.Since(applied).Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	cl, err := l.Client()
	if err != nil {
		t.Fatal(err)
	}
	e := &labEnv{t: t, ctx: ctx, l: l, cl: cl, dir: t.TempDir()}
	kubeconfig, kubectl, ok, err := l.Kubeconfig(ctx)
	if err != nil || !ok {
		t.Fatalf("kubeconfig: ok=%v %v", ok, err)
	}
	// kubectl from the machine, through the VIP on the cluster-host network.
	k := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "10s"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	mustK := func(args ...string) string {
		t.Helper()
		out, err := k(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// Site Ready means kube.health saw the API through the VIP; if the machine then
	// cannot reach it, say for how long, with keepalived's view from each controller.
	var first, last error
	began := time.Now()
	for time.Since(began) < time.Minute {
		out, err := k("get", "--raw", "/readyz")
		if last = err; err == nil {
			break
		}
		if last = fmt.Errorf("%v: %s", err, out); first == nil {
			first = last
		}
		time.Sleep(time.Second)
	}
	if first != nil {
		t.Logf("the API did not answer through the VIP for %s after Site Ready (first: %v)", time.Since(began).Round(100*time.Millisecond), first)
		for _, c := range []string{"controller-0", "controller-1"} {
			out, _ := l.Exec(ctx, l.Host(c), "sh", "-c", "journalctl -u keepalived --no-pager -n 30; ip -br addr")
			t.Logf("==== %s\n%s", c, out)
		}
		if last != nil {
			t.Fatalf("the API through the VIP: %v", last)
		}
	}

	t.Run("the killed kube.init was reset and retried; the killed coordinator came back", func(t *testing.T) {
		var steps []plan.Record
		if _, err := e.cl.Do(ctx, "GET", "/v1/steps", nil, &steps); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(steps, func(r plan.Record) bool { return r.ID == "controller-0/kube.init" })
		if i < 0 || steps[i].LastResult == nil || !strings.Contains(strings.Join(steps[i].LastResult.Changes, "\n"), "clean up after a failed kube.init") {
			t.Errorf("kube.init's successful run did not clean up first: %+v", steps[i:min(i+1, len(steps))])
		}
		var evs []state.Event
		if _, err := e.cl.Do(ctx, "GET", "/v1/events", nil, &evs); err != nil {
			t.Fatal(err)
		}
		failed := false
		for _, ev := range evs {
			failed = failed || (ev.Reason == "StepFailed" && ev.Object == "step/controller-0/kube.init")
		}
		if !failed {
			t.Error("no StepFailed event for the killed kube.init")
		}
		if n, err := l.Systemctl(ctx, l.Host(leader), "show", "--property=NRestarts", "--value", "plinth-coordinator"); err != nil || strings.TrimSpace(n) == "0" {
			t.Errorf("the killed coordinator on %s was not restarted by systemd: %q %v", leader, n, err)
		}
	})

	t.Run("four nodes Ready with OpenStack-Helm labels; the witness is no node", func(t *testing.T) {
		nodes := mustK("get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if nodes != "compute-0 True\ncompute-1 True\ncontroller-0 True\ncontroller-1 True" {
			t.Errorf("nodes:\n%s", nodes)
		}
		for node, want := range map[string][]string{
			"controller-0": {"openstack-control-plane=enabled", "openvswitch=enabled"},
			"controller-1": {"openstack-control-plane=enabled", "openvswitch=enabled"},
			"compute-0":    {"openstack-compute-node=enabled", "openvswitch=enabled", "sriov=enabled"},
			"compute-1":    {"openstack-compute-node=enabled", "openvswitch=enabled"},
		} {
			labels := mustK("get", "node", node, "-o", "jsonpath={.metadata.labels}")
			for _, l := range want {
				kv := strings.SplitN(l, "=", 2)
				if !strings.Contains(labels, fmt.Sprintf("%q:%q", kv[0], kv[1])) {
					t.Errorf("%s lacks label %s: %s", node, l, labels)
				}
			}
		}
		// schedulableControllers: no control-plane taint on the controllers.
		if taints := mustK("get", "node", "controller-0", "-o", "jsonpath={.spec.taints}"); strings.Contains(taints, "NoSchedule") {
			t.Errorf("controller-0 taints %s", taints)
		}
	})

	t.Run("pods on two hosts reach each other, a Service and DNS", func(t *testing.T) {
		mustK("-n", "kube-system", "wait", "--for=condition=Ready", "pod", "-l", "k8s-app=kube-dns", "--timeout=120s")
		mustK("apply", "-f", filepath.Join("testdata", "hello.yaml"))
		mustK("wait", "--for=condition=Ready", "pod/hello-0", "pod/hello-1", "--timeout=120s")
		ip1 := mustK("get", "pod", "hello-1", "-o", "jsonpath={.status.podIP}")
		if out := mustK("exec", "hello-0", "--", "hello", "get", "http://"+ip1+":8080/"); !strings.Contains(out, "hello from hello-1") {
			t.Errorf("compute-0 -> compute-1 pod: %q", out)
		}
		poll.Until(t, 30*time.Second, "the Service answers", func() error {
			out, err := k("exec", "hello-0", "--", "hello", "get", "http://hello.default.svc.cluster.local/")
			if err != nil || !strings.Contains(out, "hello from") {
				return fmt.Errorf("%v %s", err, out)
			}
			return nil
		})
		if out := mustK("exec", "hello-1", "--", "hello", "resolve", "hello.default.svc.cluster.local"); !strings.Contains(out, mustK("get", "svc", "hello", "-o", "jsonpath={.spec.clusterIP}")) {
			t.Errorf("DNS: %q", out)
		}
	})

	t.Run("the demo application: ordered groups, on the compute nodes, with the generated Ceph key, behind a Service", func(t *testing.T) {
		name, err := l.InstallApp(ctx, filepath.Join("..", "..", lab.DemoApp), testLog{t}, 6*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var rec state.AppRecord
		if _, err := e.cl.Do(ctx, "GET", wire.PathApp(name)+"?consistent", nil, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Status.State != api.AppApplied {
			t.Fatalf("application %s is %s: %+v", name, rec.Status.State, rec.Status)
		}
		for _, c := range rec.Status.Charts {
			if c.State != api.ChartDeployed || c.Revision != 1 {
				t.Errorf("chart %s: %+v", c.Chart, c)
			}
		}
		// One hello pod on each compute node (OpenStack-Helm's label), Running: the
		// Secret volume they mount exists, or they would not start.
		pods := mustK("-n", "demo", "get", "pods", "-l", "app.kubernetes.io/name=hello", "-o",
			`jsonpath={range .items[*]}{.spec.nodeName}{" "}{.status.phase}{"\n"}{end}`)
		if got := strings.Split(pods, "\n"); len(got) != 2 || !slices.Contains(got, "compute-0 Running") || !slices.Contains(got, "compute-1 Running") {
			t.Errorf("hello pods:\n%s", pods)
		}
		// The generated Secret holds Ceph's own kube-rbd key.
		out, err := l.Exec(ctx, l.Host("controller-0"), "ceph", "-f", "json", "auth", "get-key", "client.kube-rbd")
		if err != nil {
			t.Fatal(err)
		}
		var key struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal([]byte(out), &key); err != nil || key.Key == "" {
			t.Fatalf("client.kube-rbd key: %v %q", err, out)
		}
		b64 := mustK("-n", "demo", "get", "secret", "pvc-ceph-client-key", "-o", "jsonpath={.data.key}")
		if got, _ := base64.StdEncoding.DecodeString(b64); string(got) != key.Key {
			t.Error("Secret demo/pvc-ceph-client-key does not hold client.kube-rbd's key")
		}
		// The generated password reached the cluster as a Secret only.
		pw64 := mustK("-n", "demo", "get", "secret", "demo-passwords", "-o", "jsonpath={.data.admin}")
		pw, _ := base64.StdEncoding.DecodeString(pw64)
		if len(pw) != 24 {
			t.Errorf("Secret demo/demo-passwords admin is %d bytes, want a generated 24-character password", len(pw))
		}
		// Nothing secret in the values Helm stored or in the coordinators' events.
		var evs []state.Event
		if _, err := e.cl.Do(ctx, "GET", "/v1/events", nil, &evs); err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(evs); strings.Contains(string(b), key.Key) || strings.Contains(string(b), string(pw)) {
			t.Error("an event holds the Ceph key or the password")
		}
		for _, rel := range []string{"hello", "demo-config"} {
			rec := mustK("-n", "demo", "get", "secret", "-l", "owner=helm,name="+rel, "-o", "jsonpath={.items[*].data.release}")
			if plain := helmRecords(t, rec); strings.Contains(plain, key.Key) || strings.Contains(plain, string(pw)) {
				t.Errorf("release %s's record holds the Ceph key or the password", rel)
			}
		}
		// The Service answers from both replicas.
		seen := map[string]bool{}
		poll.Until(t, 60*time.Second, "the demo Service answers from both compute nodes", func() error {
			out, err := k("exec", "hello-0", "--", "hello", "get", "http://hello.demo.svc.cluster.local/")
			if err != nil || !strings.Contains(out, "hello from") {
				return fmt.Errorf("%v %s", err, out)
			}
			seen[strings.TrimSpace(out[strings.Index(out, "hello from"):])] = true
			if len(seen) < 2 {
				return fmt.Errorf("answers so far: %v", seen)
			}
			return nil
		})
	})

	t.Run("re-applying the manifest and restarting agents re-run nothing", func(t *testing.T) {
		before := e.finished()
		manifest, err := os.ReadFile(filepath.Join(l.Dir, "site.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		e.apply(string(manifest))
		for _, h := range l.Hosts() {
			if _, err := l.Systemctl(ctx, h, "restart", "plinth-agent"); err != nil {
				t.Fatal(err)
			}
		}
		e.waitReady(2 * time.Minute)
		time.Sleep(3 * time.Second) // a re-run would start within the agents' first fetch
		for id, at := range e.finished() {
			if !at.Equal(before[id]) {
				t.Errorf("%s ran again (finished %s, was %s)", id, at, before[id])
			}
		}
	})

	t.Run("changing a label re-runs only that node's kube.labels", func(t *testing.T) {
		before := e.finished()
		b, err := os.ReadFile(filepath.Join(l.Dir, "site.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		const at = "  labels:\n    openstack-compute-node: enabled\n  interfaces:"
		i := strings.Index(string(b), "name: compute-1\n")
		j := strings.Index(string(b)[max(i, 0):], at)
		if i < 0 || j < 0 {
			t.Fatal("site.yaml: compute-1's labels not found")
		}
		j += i
		e.apply(string(b[:j]) + "  labels:\n    openstack-compute-node: enabled\n    plinth.dev/rack: r2\n  interfaces:" + string(b[j+len(at):]))
		poll.Until(t, 90*time.Second, "compute-1 labelled", func() error {
			out, err := k("get", "node", "compute-1", "-o", `jsonpath={.metadata.labels.plinth\.dev/rack}`)
			if err != nil || out != "r2" {
				return fmt.Errorf("rack label %q %v", out, err)
			}
			return nil
		})
		e.waitReady(time.Minute)
		for id, at := range e.finished() {
			if changed := !at.Equal(before[id]); changed != (id == "controller-0/kube.labels/compute-1") {
				t.Errorf("%s: finished %s, was %s", id, at, before[id])
			}
		}
	})

	t.Run("losing controller-0 keeps the API, etcd and the coordinators; it returns by itself", func(t *testing.T) {
		c0 := l.Host("controller-0")
		if err := c0.Machine.Poweroff(ctx); err != nil {
			t.Fatal(err)
		}
		lost := time.Now()
		// The VIP moves to controller-1 and the API answers through it.
		poll.Until(t, 60*time.Second, "API through the VIP without controller-0", func() error {
			_, err := k("get", "--raw", "/readyz")
			return err
		})
		t.Logf("FIGURE controller-0 off -> API answers through the VIP again: %s", time.Since(lost).Round(100*time.Millisecond))
		if out := mustK("get", "node", "compute-1", "-o", "name"); out != "node/compute-1" {
			t.Errorf("reads through the VIP: %q", out)
		}
		mustK("create", "configmap", "written-without-controller-0", "--from-literal=k=v") // etcd has quorum
		poll.Until(t, 60*time.Second, "the Site names controller-0", func() error {
			var site *state.SiteRecord
			if _, err := e.cl.Do(ctx, "GET", "/v1/site?consistent", nil, &site); err != nil || site == nil {
				return fmt.Errorf("read the site: %v", err)
			}
			r := plan.Find(site.Site.Status.Conditions, api.ConditionReady)
			if r == nil || r.Status != api.ConditionFalse || !strings.Contains(r.Message, "controller-0") {
				return fmt.Errorf("Site Ready %+v", r)
			}
			return nil
		})
		if err := c0.Machine.Start(ctx); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		e.waitReady(4 * time.Minute)
		t.Logf("FIGURE controller-0 back -> Site Ready: %s", time.Since(began).Round(100*time.Millisecond))
		mustK("wait", "--for=condition=Ready", "node/controller-0", "--timeout=120s")
	})
}

// finished maps every step to when it last finished.
// helmRecords decodes Helm's release records as kubectl prints their data field
// (base64 of the base64 of gzipped JSON, space-separated) into their JSON.
func helmRecords(t *testing.T, data string) string {
	var out strings.Builder
	for _, f := range strings.Fields(data) {
		b, err := base64.StdEncoding.DecodeString(f)
		if err == nil {
			b, err = base64.StdEncoding.DecodeString(string(b))
		}
		if err == nil {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
				b, err = io.ReadAll(zr)
			}
		}
		if err != nil {
			t.Fatalf("a Helm release record: %v", err)
		}
		out.Write(b)
	}
	return out.String()
}

func (e *labEnv) finished() map[string]time.Time {
	e.t.Helper()
	var steps []plan.Record
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/steps", nil, &steps); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, s := range steps {
		out[s.ID] = s.FinishedAt
	}
	return out
}
