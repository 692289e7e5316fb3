package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/charttest"
	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/consensus"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// singleCoordinator serves the real API of a one-coordinator site on loopback: a
// real state store behind a real single-node Raft, and an admin client for it.
func singleCoordinator(t *testing.T) (*client.Client, *state.Store) {
	t.Helper()
	c, store, _ := singleCoordinatorTLS(t)
	return c, store
}

// singleCoordinatorTLS is singleCoordinator with the admin client's TLS config.
func singleCoordinatorTLS(t *testing.T) (*client.Client, *state.Store, *tls.Config) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("lab", now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name, role string) pki.Bundle {
		key, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, _, err := ca.Issue(pki.IssueRequest{Name: name, Role: role, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, PublicKey: key.Public(), TTL: time.Hour, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, err := pki.EncodeKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pki.Bundle{CAPEM: ca.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM}
	}
	bundle := issue("c0", pki.RoleCoordinator)
	raftTLS, err := bundle.ServerTLS(pki.RequireRole(pki.RoleCoordinator))
	if err != nil {
		t.Fatal(err)
	}
	raftTLS.RootCAs = raftTLS.ClientCAs
	store := state.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	node, err := consensus.Open(ctx, consensus.Config{NodeID: "c0", BindAddr: "127.0.0.1:0", DataDir: t.TempDir(), TLS: raftTLS, FSM: store,
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "c0 leads", node.IsLeader)
	srv, err := New(Config{Name: "c0", Store: store, Raft: node, CA: ca, Bundle: bundle})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeAPI(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = node.Close()
	})
	tc, err := issue("admin", pki.RoleAdmin).ClientTLSVerify("", pki.RequireRole(pki.RoleCoordinator))
	if err != nil {
		t.Fatal(err)
	}
	return client.New([]string{ln.Addr().String()}, tc), store, tc
}

const demoApp = `apiVersion: plinth.dev/v1alpha1
kind: Application
metadata:
  name: demo
spec:
  groups:
  - name: infra
    charts:
    - name: web
      source: {archive: web-0.1.0.tgz}
      values:
        port: 8080
`

func uploadOf(doc string, archives map[string][]byte) wire.AppUpload {
	up := wire.AppUpload{File: "demo.yaml", Document: []byte(doc)}
	for n, d := range archives {
		up.Archives = append(up.Archives, wire.AppArchive{Name: n, Data: d})
	}
	return up
}

func TestAppUploadChecks(t *testing.T) {
	c, store := singleCoordinator(t)
	ctx := context.Background()
	web := charttest.Demo(t, "web", nil)
	good := map[string][]byte{"web-0.1.0.tgz": web}

	for _, tc := range []struct {
		name   string
		up     wire.AppUpload
		status int
		want   string
	}{
		{"too large", uploadOf(demoApp, map[string][]byte{"web-0.1.0.tgz": make([]byte, api.MaxUploadBytes+1)}), http.StatusRequestEntityTooLarge,
			"may be at most 8388608 bytes"},
		{"archive too large", uploadOf(demoApp, map[string][]byte{"web-0.1.0.tgz": make([]byte, api.MaxChartArchiveBytes+1)}), http.StatusRequestEntityTooLarge,
			"applications[demo].spec.groups[infra].charts[web].source.archive: web-0.1.0.tgz is 1048577 bytes; a chart archive may be at most 1048576 bytes"},
		{"not a chart", uploadOf(demoApp, map[string][]byte{"web-0.1.0.tgz": []byte("not a tarball")}), http.StatusUnprocessableEntity,
			"applications[demo].spec.groups[infra].charts[web].source.archive: web-0.1.0.tgz: helmrelease: not a chart archive"},
		{"bad Chart.yaml", uploadOf(demoApp, map[string][]byte{"web-0.1.0.tgz": charttest.Demo(t, "web", map[string]string{"Chart.yaml": "apiVersion: v2\nname: web\n"})}), http.StatusUnprocessableEntity,
			"charts[web].source.archive: web-0.1.0.tgz: helmrelease: not a chart archive"},
		{"missing archive", uploadOf(demoApp, nil), http.StatusUnprocessableEntity,
			`charts[web].source.archive: "web-0.1.0.tgz" was not uploaded`},
		{"extra archive", uploadOf(demoApp, map[string][]byte{"web-0.1.0.tgz": web, "stray.tgz": web}), http.StatusUnprocessableEntity,
			`archive "stray.tgz" was uploaded but no chart's source.archive names it`},
		{"render failure", uploadOf(strings.Replace(demoApp, "port: 8080", "greeting: null", 1), good), http.StatusUnprocessableEntity,
			"charts[web].source.archive: web-0.1.0.tgz: helmrelease: chart does not render: chart web-0.1.0"},
		{"values not a map", uploadOf(strings.Replace(demoApp, "      values:\n        port: 8080", "      values: [1, 2]", 1), good), http.StatusUnprocessableEntity,
			"values"},
		{"plinth-secret in values", uploadOf(strings.Replace(demoApp, "port: 8080", "password: "+secretref.Ref("generated/x/y"), 1), good), http.StatusUnprocessableEntity,
			"applications[demo].spec.groups[infra].charts[web].values[password]: holds \"plinth-secret:generated/x/y\""},
		{"site document", uploadOf("apiVersion: plinth.dev/v1alpha1\nkind: Site\nmetadata: {name: lab}\nspec: {controllers: [h1]}\n---\n"+demoApp, good), http.StatusUnprocessableEntity,
			"holds exactly one Application document; this file holds a Site, 1 Application document(s)"},
	} {
		_, err := c.Do(ctx, "POST", wire.PathApps, tc.up, nil)
		if client.StatusOf(err) != tc.status || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %d %v\nwant %d containing %q", tc.name, client.StatusOf(err), err, tc.status, tc.want)
		}
	}
	if n := len(appsIn(store)); n != 0 {
		t.Fatalf("refused uploads stored %d applications", n)
	}

	// Dry run: the plan, nothing stored.
	var resp wire.AppUploadResponse
	if _, err := c.Do(ctx, "POST", wire.PathApps+"?dryRun=true", uploadOf(demoApp, good), &resp); err != nil || !resp.DryRun ||
		!strings.Contains(strings.Join(resp.Plan, "\n"), "+ chart infra/web: release web in namespace openstack from archive web-0.1.0.tgz") {
		t.Fatalf("dry run: %v %+v", err, resp)
	}
	if n := len(appsIn(store)); n != 0 {
		t.Fatal("dry run stored the application")
	}
	if _, err := c.Do(ctx, "POST", wire.PathApps, uploadOf(demoApp, good), &resp); err != nil {
		t.Fatal(err)
	}
	// Twice: 409 from the FSM, naming app update; an update of an unknown app: 404.
	_, err := c.Do(ctx, "POST", wire.PathApps, uploadOf(demoApp, good), nil)
	if client.StatusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "app update") {
		t.Fatalf("second upload: %v", err)
	}
	_, err = c.Do(ctx, "POST", wire.PathApps+"?update=true", uploadOf(strings.Replace(demoApp, "name: demo", "name: other", 1), good), nil)
	if client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("update of unknown app: %v", err)
	}
	var rec state.AppRecord
	if _, err := c.Do(ctx, "GET", wire.PathApp("demo"), nil, &rec); err != nil || rec.Status.State != api.AppUploaded || rec.Application.Spec.Groups[0].Charts[0].Release != "web" {
		t.Fatalf("get: %v %+v", err, rec)
	}
	// Lifecycle: delete is refused while applying, abort then remove... 409s carry the FSM's words.
	if _, err := c.Do(ctx, "POST", wire.PathAppAction("demo", "remove"), nil, nil); client.StatusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "never applied") {
		t.Fatalf("remove of never-applied app: %v", err)
	}
	if _, err := c.Do(ctx, "POST", wire.PathAppAction("demo", "apply"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "DELETE", wire.PathApp("demo"), nil, nil); client.StatusOf(err) != http.StatusConflict {
		t.Fatalf("delete while applying: %v", err)
	}
	// A blocking query wakes on the next change.
	idx, err := c.Do(ctx, "GET", wire.PathApp("demo"), nil, &rec)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan error, 1)
	go func() {
		var r state.AppRecord
		_, err := c.Do(ctx, "GET", client.Blocking(wire.PathApp("demo"), idx, time.Minute), nil, &r)
		if err == nil && r.Status.State != api.AppApplyFailed {
			err = &client.Error{Msg: "woke with state " + r.Status.State}
		}
		woke <- err
	}()
	if _, err := c.Do(ctx, "POST", wire.PathAppAction("demo", "abort"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("blocking get: %v", err)
	}
	if _, err := c.Do(ctx, "GET", wire.PathApp("nope"), nil, nil); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("get of unknown app: %v", err)
	}
	// History without a cluster: 409 naming kube.init.
	if _, err := c.Do(ctx, "GET", wire.PathAppHistory("demo"), nil, nil); client.StatusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "kube.init") {
		t.Fatalf("history without a cluster: %v", err)
	}
	// apply -f of an Application refuses it, pointing at app upload.
	_, err = c.Do(ctx, "POST", wire.PathApply, wire.ApplyRequest{File: "demo.yaml", YAML: demoApp}, nil)
	if err == nil || !strings.Contains(err.Error(), "Application documents are uploaded with `plinth-coordinator app upload -f FILE`") {
		t.Fatalf("apply of an application: %v", err)
	}
}

func appsIn(store *state.Store) []state.AppRecord {
	var out []state.AppRecord
	store.Read(func(v state.View) { out = v.Apps() })
	return out
}

func TestAppOverridesSetAndShow(t *testing.T) {
	c, _ := singleCoordinator(t)
	ctx := context.Background()
	doc := demoApp + `    - name: remote
      source: {oci: "oci://registry.example/charts/remote:1.0.0"}
      values: {replicas: 2}
`
	if _, err := c.Do(ctx, "POST", wire.PathApps, uploadOf(doc, map[string][]byte{"web-0.1.0.tgz": charttest.Demo(t, "web", nil)}), nil); err != nil {
		t.Fatal(err)
	}
	path := wire.PathAppOverrides("demo", "web")
	for _, bad := range []struct{ body, want string }{
		{"- a\n- b\n", "top level is a list (want a map of keys to values)"},
		{"token: " + secretref.Ref("output/x/y") + "\n", "token holds a plinth-secret: reference"},
		{"greeting: null\n", "with these overrides"},
		{strings.Repeat("#", MaxOverrideBytes+1), "larger than the limit of 1048576 bytes"},
	} {
		_, err := c.Do(ctx, "PUT", path, []byte(bad.body), nil)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("override %.30q: %v, want %q", bad.body, err, bad.want)
		}
	}
	if _, err := c.Do(ctx, "PUT", wire.PathAppOverrides("demo", "nope"), []byte("a: 1\n"), nil); client.StatusOf(err) != http.StatusNotFound {
		t.Errorf("override of unknown chart: %v", err)
	}
	if _, err := c.Do(ctx, "PUT", path, []byte("nested:\n  b: 20\nextra: yes\n"), nil); err != nil {
		t.Fatal(err)
	}
	var ov wire.AppOverrides
	raw := &strings.Builder{}
	if _, err := c.Do(ctx, "GET", path, nil, raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(raw.String()), &ov); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"greeting": "chart", "port": "application", "nested.a": "chart", "nested.b": "user", "extra": "user"}
	for k, o := range want {
		if ov.Origins[k] != o {
			t.Errorf("origin of %s: %q, want %q (all: %v)", k, ov.Origins[k], o, ov.Origins)
		}
	}
	if ov.Values["port"] != float64(8080) || ov.Values["nested"].(map[string]any)["b"] != float64(20) || ov.Note != "" {
		t.Errorf("merged values: %+v", ov)
	}
	if strings.Contains(raw.String(), secretref.Prefix) {
		t.Errorf("overrides show carries a secret reference: %s", raw)
	}
	// An OCI chart: its defaults are not known until apply, and the answer says so.
	if _, err := c.Do(ctx, "GET", wire.PathAppOverrides("demo", "remote"), nil, &ov); err != nil || !strings.Contains(ov.Note, "fetched at apply") || ov.Origins["replicas"] != "application" {
		t.Errorf("remote chart overrides: %v %+v", err, ov)
	}
	// Clear: back to chart and application values only.
	if _, err := c.Do(ctx, "DELETE", path, nil, nil); err != nil {
		t.Fatal(err)
	}
	ov = wire.AppOverrides{}
	if _, err := c.Do(ctx, "GET", path, nil, &ov); err != nil || ov.Origins["nested.b"] != "chart" || ov.Values["extra"] != nil {
		t.Errorf("after clear: %v %+v", err, ov)
	}
}
