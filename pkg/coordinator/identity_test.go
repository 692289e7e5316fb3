package coordinator_test

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/freeport"
	"github.com/plinth-dev/plinth/internal/logbuf"
	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/coordinator"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

func freeAddr(t *testing.T) string { return freeport.Addr(t) }

// cluster is two real coordinators on loopback ("fast" profile): c0 initialised the
// site, c1 joined with a token. admin reaches either.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	apis   []string
	joins  []string
	admin  pki.Bundle
	admins []*client.Client // one per coordinator
}

// leader returns the index of the coordinator that is leader now.
func (c *cluster) leader() int {
	c.t.Helper()
	for i := range c.apis {
		var st wire.Status
		if _, err := c.admins[i].Do(c.ctx, "GET", wire.PathStatus, nil, &st); err != nil {
			c.t.Fatal(err)
		}
		if st.State == "Leader" {
			return i
		}
	}
	c.t.Fatal("no leader")
	return -1
}

func startCoordinator(t *testing.T, ctx context.Context, dir string, log *slog.Logger) {
	t.Helper()
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- coordinator.Run(cctx, dir, coordinator.RunOptions{Logger: log}) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("coordinator %s: %v", dir, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("coordinator %s did not stop", dir)
		}
	})
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two coordinators: skipped with -short")
	}
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PLINTH_TEST_LOGS") != "" {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	cfg := func(name string) coordinator.Config {
		return coordinator.Config{Name: name, Site: "lab", APIAddr: freeAddr(t), JoinAddr: freeAddr(t), RaftAddr: freeAddr(t),
			GossipAddr: freeAddr(t), Profile: "fast", AgentCertTTL: coordinator.Duration(time.Hour)}
	}
	c0, c1 := cfg("c0"), cfg("c1")
	adminPath := filepath.Join(dir, "admin.json")
	if err := coordinator.Init(coordinator.InitOptions{DataDir: filepath.Join(dir, "c0"), Config: c0, AdminIdentity: adminPath}); err != nil {
		t.Fatal(err)
	}
	startCoordinator(t, ctx, filepath.Join(dir, "c0"), log.With("who", "c0"))
	f, err := pki.ReadIdentityFile(adminPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, ctx: ctx, apis: []string{c0.APIAddr, c1.APIAddr}, joins: []string{c0.JoinAddr, c1.JoinAddr},
		admin: pki.Bundle{CAPEM: []byte(f.CA), CertPEM: []byte(f.Cert), KeyPEM: []byte(f.Key)}}
	for _, a := range c.apis {
		c.admins = append(c.admins, c.clientAt(c.admin, a))
	}
	tok := c.token("c1", pki.RoleCoordinator)
	c1.Peers = []string{c0.APIAddr}
	if err := coordinator.Join(ctx, coordinator.JoinOptions{DataDir: filepath.Join(dir, "c1"), Config: c1, Token: tok, JoinAddrs: []string{c0.JoinAddr}}); err != nil {
		t.Fatalf("join c1: %v", err)
	}
	startCoordinator(t, ctx, filepath.Join(dir, "c1"), log.With("who", "c1"))
	poll.Until(t, 60*time.Second, "c1 is admitted and caught up", func() error {
		_, err := c.admins[1].Do(ctx, "GET", wire.PathHosts, nil, nil)
		return err
	})
	return c
}

// apply applies a manifest through the first coordinator.
func (c *cluster) apply(yaml string) {
	c.t.Helper()
	if _, err := c.admins[0].Do(c.ctx, "POST", wire.PathApply, wire.ApplyRequest{File: "site.yaml", YAML: yaml}, nil); err != nil {
		c.t.Fatalf("apply: %v", err)
	}
}

func (c *cluster) clientAt(b pki.Bundle, addr string) *client.Client {
	c.t.Helper()
	tc, err := b.ClientTLS("")
	if err != nil {
		c.t.Fatal(err)
	}
	return client.New([]string{addr}, tc)
}

func (c *cluster) token(name, role string) string {
	c.t.Helper()
	var tok wire.TokenResponse
	poll.Until(c.t, 30*time.Second, "the cluster accepts writes", func() error {
		_, err := c.admins[0].Do(c.ctx, "POST", wire.PathTokens, wire.TokenRequest{Name: name, Role: role, TTL: time.Hour}, &tok)
		return err
	})
	return tok.Token
}

// agentID is an agent's certificate and one client per coordinator using it.
type agentID struct {
	name    string
	bundle  pki.Bundle
	serial  string
	clients []*client.Client
}

func (c *cluster) enrol(name string) agentID {
	c.t.Helper()
	tok, err := pki.ParseToken(c.token(name, pki.RoleAgent))
	if err != nil {
		c.t.Fatal(err)
	}
	key, err := pki.NewKey()
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := client.Enroll(c.ctx, c.joins, tok, key, name, nil)
	if err != nil {
		c.t.Fatalf("enrol %s: %v", name, err)
	}
	return c.identity(name, resp.CA, resp.Cert, key)
}

func (c *cluster) identity(name, ca, cert string, key crypto.Signer) agentID {
	c.t.Helper()
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	b := pki.Bundle{CAPEM: []byte(ca), CertPEM: []byte(cert), KeyPEM: keyPEM}
	id, err := b.Identity()
	if err != nil {
		c.t.Fatal(err)
	}
	a := agentID{name: name, bundle: b, serial: id.Serial}
	for _, addr := range c.apis {
		a.clients = append(a.clients, c.clientAt(b, addr))
	}
	return a
}

// renew asks for a new certificate with a's current one.
func (c *cluster) renew(a agentID) (agentID, error) {
	c.t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		c.t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, a.name, nil, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	var resp wire.CertResponse
	if _, err := a.clients[0].Do(c.ctx, "POST", wire.PathAgentRenew, wire.RenewRequest{CSR: string(csr)}, &resp); err != nil {
		return agentID{}, err
	}
	return c.identity(a.name, resp.CA, resp.Cert, key), nil
}

// config is GET /v1/agent/config as a, at coordinator i.
func (c *cluster) config(a agentID, i int) (wire.AgentConfig, error) {
	var cfg wire.AgentConfig
	_, err := a.clients[i].Do(c.ctx, "GET", wire.PathAgentConfig, nil, &cfg)
	return cfg, err
}

// refusedEverywhere waits until every coordinator refuses a with 403 naming why.
func (c *cluster) refusedEverywhere(a agentID, why string) {
	c.t.Helper()
	for i := range c.apis {
		poll.Until(c.t, 10*time.Second, fmt.Sprintf("coordinator %d refuses certificate %s", i, a.serial), func() error {
			_, err := c.config(a, i)
			if client.StatusOf(err) != 403 || !strings.Contains(err.Error(), why) {
				return fmt.Errorf("GET config: %v; want 403 saying %q", err, why)
			}
			return nil
		})
	}
}

// Only the newest certificate of an identity works once its holder has used it; a
// certificate renewed twice before either was used leaves only the last one valid.
func TestSupersededCertificatesStopWorking(t *testing.T) {
	c := newCluster(t)
	a := c.enrol("node-2")
	b, err := c.renew(a)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	// Until the new certificate is used, the old one still works: the agent may have
	// lost the answer in a crash.
	if _, err := c.config(a, 0); err != nil {
		t.Fatalf("old certificate before the new one was used: %v", err)
	}
	if _, err := c.config(b, 0); err != nil { // first use
		t.Fatalf("new certificate: %v", err)
	}
	c.refusedEverywhere(a, "superseded by certificate "+b.serial)
	if _, err := c.renew(a); client.StatusOf(err) != 403 {
		t.Fatalf("renewal with the superseded certificate: %v, want 403", err)
	}

	// Renewed twice from the same certificate, the first answer never used.
	lost, err := c.renew(b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.renew(b)
	if err != nil {
		t.Fatalf("second renewal before the first was used: %v", err)
	}
	if _, err := c.config(lost, 0); client.StatusOf(err) != 403 || !strings.Contains(err.Error(), "never confirmed") {
		t.Fatalf("the lost renewal's certificate: %v, want 403 (never confirmed)", err)
	}
	if _, err := c.config(d, 0); err != nil {
		t.Fatalf("newest certificate: %v", err)
	}
	c.refusedEverywhere(b, "superseded by certificate "+d.serial)
	if _, err := c.config(d, 1); err != nil {
		t.Fatalf("newest certificate at the follower: %v", err)
	}
}

// Deleting a host revokes its certificate on every coordinator at once (API and
// renewal), and rotates the gossip key it knew, while other hosts carry on.
func TestDeletedHostIsRevoked(t *testing.T) {
	c := newCluster(t)
	gone, stays := c.enrol("node-1"), c.enrol("node-2")
	var before wire.AgentConfig
	poll.Until(t, 20*time.Second, "the gossip key exists", func() error {
		cfg, err := c.config(gone, 1)
		if err != nil || len(cfg.GossipKey) == 0 {
			return fmt.Errorf("config: %v (key %d bytes)", err, len(cfg.GossipKey))
		}
		before = cfg
		return nil
	})
	if _, err := c.admins[1].Do(c.ctx, "DELETE", wire.PathHosts+"/node-1", nil, nil); err != nil {
		t.Fatalf("delete host: %v", err)
	}
	c.refusedEverywhere(gone, `host node-1 was deleted`)
	if _, err := c.renew(gone); client.StatusOf(err) != 403 {
		t.Fatalf("renewal by the deleted host: %v, want 403", err)
	}
	for i := range c.apis {
		if _, err := c.config(stays, i); err != nil {
			t.Fatalf("node-2 at coordinator %d after node-1 was deleted: %v", i, err)
		}
	}
	// The rotation: install, promote, finish, each held a few seconds ("fast").
	var phases []int
	poll.Until(t, 90*time.Second, "the gossip key is rotated", func() error {
		cfg, err := c.config(stays, 0)
		if err != nil {
			return err
		}
		if n := len(cfg.GossipKeys); len(phases) == 0 || phases[len(phases)-1] != n {
			phases = append(phases, n)
		}
		if bytes.Equal(cfg.GossipKey, before.GossipKey) || len(cfg.GossipKeys) != 1 {
			return fmt.Errorf("gossip keys: %d, primary changed: %v", len(cfg.GossipKeys), !bytes.Equal(cfg.GossipKey, before.GossipKey))
		}
		return nil
	})
	t.Logf("keys node-2 was told to accept, phase by phase: %v", phases)
	var evs []state.Event
	if _, err := c.admins[0].Do(c.ctx, "GET", wire.PathEvents, nil, &evs); err != nil {
		t.Fatal(err)
	}
	if !hasEvent(evs, "Deleted", "revoked") {
		t.Fatalf("no Deleted event saying the certificate was revoked in %v", evs)
	}
}

func hasEvent(evs []state.Event, reason, text string) bool {
	for _, e := range evs {
		if e.Reason == reason && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// A step record the planner did not write (here: forged into a restored snapshot)
// cannot make the server hand a secret to its host: the step is withheld from the
// step list, refused when asked for, and the refusal is a Warning event naming step,
// host and secret.
func TestForgedStepGetsNoSecret(t *testing.T) {
	c := newCluster(t)
	a := c.enrol("node-1")
	poll.Until(t, 20*time.Second, "the gossip key exists", func() error {
		cfg, err := c.config(a, 0)
		if err != nil || len(cfg.GossipKey) == 0 {
			return fmt.Errorf("config: %v", err)
		}
		return nil
	})
	var snap map[string]any
	if _, err := c.admins[0].Do(c.ctx, "GET", wire.PathSnapshot, nil, &snap); err != nil {
		t.Fatal(err)
	}
	forged := map[string]map[string]string{
		"node-1/host.network":   {"key": "plinth-secret:gossip-key"},
		"node-1/host.sysctl":    {"ca": "plinth-secret:generated/etcd-ca/lab"},
		"node-1/host.hugepages": {"admin": "plinth-secret:output/c0/kube.init/admin.conf"},
	}
	steps := snap["tables"].(map[string]any)["steps"]
	if steps == nil {
		steps = map[string]any{}
		snap["tables"].(map[string]any)["steps"] = steps
	}
	for id, inputs := range forged {
		kind := strings.TrimPrefix(id, "node-1/")
		steps.(map[string]any)[id] = map[string]any{"id": id, "host": "node-1", "kind": kind, "inputs": inputs,
			"inputsHash": "forged-" + kind, "state": "Ready"}
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admins[0].Do(c.ctx, "POST", wire.PathSnapshot, raw, nil); err != nil {
		t.Fatalf("restore: %v", err)
	}
	for i := range c.apis {
		poll.Until(t, 10*time.Second, fmt.Sprintf("coordinator %d has the forged steps and withholds them", i), func() error {
			var hosts []map[string]any
			if _, err := c.admins[i].Do(c.ctx, "GET", wire.PathSteps+"?host=node-1", nil, &hosts); err != nil || len(hosts) != len(forged) {
				return fmt.Errorf("steps of node-1: %d, %v", len(hosts), err)
			}
			var got wire.AgentSteps
			if _, err := a.clients[i].Do(c.ctx, "GET", wire.PathAgentSteps, nil, &got); err != nil {
				return err
			}
			if len(got.Steps) != 0 {
				t.Fatalf("coordinator %d handed out %d forged steps: %+v", i, len(got.Steps), got.Steps)
			}
			return nil
		})
		// A sparse delta names them withheld, so an agent holding an older copy drops it.
		var full, delta wire.AgentSteps
		at, err := a.clients[i].Do(c.ctx, "GET", wire.PathAgentSteps, nil, &full)
		if err != nil {
			t.Fatal(err)
		}
		path := client.Blocking(wire.PathAgentSteps, at, 100*time.Millisecond) + "&" + wire.QueryDelta + "=1&" + wire.QuerySparse + "=1"
		if _, err := a.clients[i].Do(c.ctx, "GET", path, nil, &delta); err != nil {
			t.Fatal(err)
		}
		if want := slices.Sorted(maps.Keys(forged)); !delta.Sparse || len(delta.Steps) != 0 || !slices.Equal(delta.Withheld, want) {
			t.Errorf("coordinator %d: sparse delta %+v; want none sent and %v withheld", i, delta, want)
		}
		for id, inputs := range forged {
			_, err := a.clients[i].Do(c.ctx, "GET", wire.PathAgentSteps+"/"+id, nil, nil)
			name := strings.TrimPrefix(inputs[firstKey(inputs)], "plinth-secret:")
			want := fmt.Sprintf("step %s on host node-1 may not resolve secret %q", id, name)
			if client.StatusOf(err) != 403 || !strings.Contains(err.Error(), want) {
				t.Errorf("coordinator %d, GET %s: %v; want 403 saying %s", i, id, err, want)
			}
		}
	}
	poll.Until(t, 10*time.Second, "a Warning event per forged step", func() error {
		var evs []state.Event
		if _, err := c.admins[0].Do(c.ctx, "GET", wire.PathEvents, nil, &evs); err != nil {
			return err
		}
		for id := range forged {
			found := false
			for _, e := range evs {
				found = found || (e.Type == state.EventWarning && e.Reason == "SecretRefused" && e.Object == "host/node-1" && strings.Contains(e.Message, "step "+id+" "))
			}
			if !found {
				return fmt.Errorf("no SecretRefused warning for %s", id)
			}
		}
		return nil
	})
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
