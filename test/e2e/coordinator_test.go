package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/state"
	"github.com/plinth-dev/plinth/pkg/wire"
)

const siteYAML = `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: lab
spec:
  controllers: [h1]
  networks:
  - name: mgmt
    role: mgmt
    cidr: 10.99.0.0/24
`

func hostYAML(name string, n int) string {
	return fmt.Sprintf(`---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata:
  name: %s
spec:
  roles: [%s]
  managementAddress: 10.99.0.%d
  interfaces:
  - name: eth1
    addresses: [10.99.0.%d/24]
`, name, map[bool]string{true: "controller", false: "worker"}[name == "h1"], n, n)
}

func applyYAML(t *testing.T, ctx context.Context, c *client.Client, yaml string) error {
	t.Helper()
	_, err := c.Do(ctx, "POST", "/v1/apply", wire.ApplyRequest{File: "test.yaml", YAML: yaml}, nil)
	return err
}

func threeCoordinators(t *testing.T, ctx context.Context) (*lab.Lab, []*lab.Coordinator) {
	t.Helper()
	l := newLab(t)
	base := freeBase(t, 12)
	c0, err := l.InitCoordinator(ctx, "c0", "", "127.0.0.1", base, "lab")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := l.JoinCoordinator(ctx, "c1", "", "127.0.0.1", base+4, false)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.JoinCoordinator(ctx, "w", "", "127.0.0.1", base+8, true)
	if err != nil {
		t.Fatal(err)
	}
	return l, []*lab.Coordinator{c0, c1, w}
}

// exportOf reads one coordinator's own copy of the state, without the fields that
// legitimately differ (none should, once caught up).
func exportOf(ctx context.Context, l *lab.Lab, c *lab.Coordinator) (string, error) {
	cl, err := l.NodeClient(c)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	_, err = cl.Do(ctx, "GET", "/v1/snapshot", nil, &buf)
	return buf.String(), err
}

func TestCoordinatorFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, coords := threeCoordinators(t, ctx)
	cl, err := l.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := applyYAML(t, ctx, cl, siteYAML+hostYAML("h1", 11)+hostYAML("h2", 12)); err != nil {
		t.Fatal(err)
	}

	// Writers keep creating tokens while the leader is killed; every acknowledged
	// token must survive.
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var resp wire.TokenResponse
				wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
				_, err := cl.Do(wctx, "POST", "/v1/tokens", wire.TokenRequest{Name: fmt.Sprintf("w%d-%d", w, i), Role: "agent"}, &resp)
				wcancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, resp.ID)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(time.Second)
	leader, err := l.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := l.Coordinator(leader)
	old.Proc.Kill()
	killedAt := time.Now()
	t.Logf("killed leader %s", leader)

	poll.Until(t, 20*time.Second, "a new leader accepts writes", func() error {
		nl, err := l.Leader(ctx)
		if err != nil || nl == leader {
			return fmt.Errorf("leader %q: %v", nl, err)
		}
		_, err = cl.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: "after-failover", Role: "agent"}, nil)
		return err
	})
	t.Logf("first write acknowledged %s after kill -9", time.Since(killedAt).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var toks []state.TokenRecord
	if _, err := cl.Do(ctx, "GET", "/v1/tokens?consistent", nil, &toks); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, tk := range toks {
		have[tk.ID] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Errorf("acknowledged token %s lost in failover", id)
			if os.Getenv("PLINTH_E2E_DEBUG") != "" {
				for _, c := range coords {
					s, _ := exportOf(ctx, l, c)
					t.Logf("%s has it: %v", c.Name, strings.Contains(s, id))
				}
			}
		}
	}
	t.Logf("%d acknowledged writes, all present", len(acked))

	// The killed coordinator comes back and catches up: every copy of the state is equal.
	if err := l.StartCoordinator(old); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitReady(ctx, old, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "all coordinators hold the same state", func() error {
		var first string
		for _, c := range coords {
			s, err := exportOf(ctx, l, c)
			if err != nil {
				return err
			}
			if first == "" {
				first = s
			} else if s != first {
				return fmt.Errorf("%s differs", c.Name)
			}
		}
		return nil
	})
}

func TestSnapshotSaveRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, _, cl := oneCoordinator(t, ctx, siteYAML+hostYAML("h1", 11))
	file := filepath.Join(l.Dir, "snap.json")
	if out, err := l.CLI(ctx, "snapshot", "save", file); err != nil {
		t.Fatal(err, out)
	}
	if err := applyYAML(t, ctx, cl, hostYAML("h2", 12)); err != nil {
		t.Fatal(err)
	}
	if out, err := l.CLI(ctx, "snapshot", "restore", file); err != nil {
		t.Fatal(err, out)
	}
	out, err := l.CLI(ctx, "get", "hosts", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var hs []state.HostRecord
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		t.Fatal(err, out)
	}
	if len(hs) != 1 || hs[0].Name != "h1" {
		t.Fatalf("after restore want only h1, got %s", out)
	}
}

func TestTwoControllersWithoutWitnessNeedFencedRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newLab(t)
	base := freeBase(t, 8)
	c0, err := l.InitCoordinator(ctx, "c0", "", "127.0.0.1", base, "lab")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := l.JoinCoordinator(ctx, "c1", "", "127.0.0.1", base+4, false)
	if err != nil {
		t.Fatal(err)
	}
	c0cl, _ := l.NodeClient(c0)
	if err := applyYAML(t, ctx, c0cl, siteYAML+hostYAML("h1", 11)); err != nil {
		t.Fatal(err)
	}

	c1.Proc.Kill()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	err = applyYAML(t, wctx, c0cl, hostYAML("h2", 12))
	wcancel()
	if err == nil || !strings.Contains(err.Error(), "recover --force-single") {
		t.Fatalf("write without quorum: want a clear refusal naming the recovery, got %v", err)
	}
	t.Logf("refused as expected: %v", err)

	c0.Proc.Stop(5 * time.Second)
	if out, err := runBin(ctx, "plinth-coordinator", "recover", "--data-dir", c0.DataDir); err == nil || !strings.Contains(out, "--force-single") {
		t.Fatalf("recover without --force-single must refuse: %v %s", err, out)
	}
	if out, err := runBin(ctx, "plinth-coordinator", "recover", "--force-single", "--data-dir", c0.DataDir); err != nil {
		t.Fatalf("recover: %v: %s", err, out)
	}
	if err := l.StartCoordinator(c0); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitReady(ctx, c0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := applyYAML(t, ctx, c0cl, hostYAML("h2", 12)); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	// Earlier data survived recovery.
	var hs []state.HostRecord
	if _, err := c0cl.Do(ctx, "GET", "/v1/hosts", nil, &hs); err != nil || len(hs) != 2 {
		t.Fatalf("hosts after recovery: %v %v", hs, err)
	}

	// The fenced controller returns with its old data and certificate: it must not
	// disturb the recovered cluster.
	if err := l.StartCoordinator(c1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	var st wire.Status
	if _, err := c0cl.Do(ctx, "GET", "/v1/status", nil, &st); err != nil || st.Leader != "c0" {
		t.Fatalf("after the fenced peer returned: leader %q, %v", st.Leader, err)
	}
	if err := applyYAML(t, ctx, c0cl, hostYAML("h3", 13)); err != nil {
		t.Fatalf("write with the fenced peer back: %v", err)
	}
	b, _ := os.ReadFile(c0.Proc.LogPath)
	if !strings.Contains(string(b), "fenced") {
		t.Errorf("c0's log does not show the fenced peer being refused")
	}
}

func runBin(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, bin), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSecurityRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, c0, admin := oneCoordinator(t, ctx, siteYAML+hostYAML("h1", 11)+hostYAML("h2", 12))
	idf, err := pki.ReadIdentityFile(l.Identity)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(idf.CA))

	t.Run("no client certificate", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		_, err := hc.Get("https://" + c0.APIAddr() + "/v1/hosts")
		if err == nil {
			t.Fatal("request without a client certificate was served")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("certificate from another CA", func(t *testing.T) {
		other, _ := pki.NewCA("evil", time.Now())
		k, _ := pki.NewKey()
		certPEM, _, _ := other.Issue(pki.IssueRequest{Name: "admin", Role: pki.RoleAdmin, PublicKey: k.Public(), TTL: time.Hour, Now: time.Now()})
		keyPEM, _ := pki.EncodeKey(k)
		pair, _ := tls.X509KeyPair(certPEM, keyPEM)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
		resp, err := hc.Get("https://" + c0.APIAddr() + "/v1/hosts")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("foreign certificate was served: %s", resp.Status)
		}
		t.Logf("refused: %v", err)
	})

	enroll := func(name, token string) (*client.Client, error) { return enrolAs(ctx, c0, name, token) }
	newToken := func(name, ttl string) string {
		out, err := l.CLI(ctx, "node", "enroll", name, "--role", "worker", "--ttl", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	tokH1 := newToken("h1", "1h")
	agent1, err := enroll("h1", tokH1)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("agent certificate on admin endpoints", func(t *testing.T) {
		_, err := agent1.Do(ctx, "GET", "/v1/hosts", nil, nil)
		if client.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("GET /v1/hosts with an agent cert: %v", err)
		}
		err = applyYAML(t, ctx, agent1, siteYAML)
		if client.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("apply with an agent cert: %v", err)
		}
	})
	t.Run("agent reads and reports only its own host", func(t *testing.T) {
		var own wire.AgentSteps
		if _, err := agent1.Do(ctx, "GET", "/v1/agent/steps", nil, &own); err != nil || own.Host != "h1" || len(own.Steps) != 1 {
			t.Fatalf("own steps: %+v %v", own, err)
		}
		_, err := agent1.Do(ctx, "GET", "/v1/agent/steps/h2/host.network", nil, nil)
		if client.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("agent h1 reading h2's step: %v", err)
		}
		_, err = agent1.Do(ctx, "POST", "/v1/agent/result", wire.StepReport{ID: "h2/host.network", InputsHash: "x", Result: &driver.Result{}}, nil)
		if client.StatusOf(err) != http.StatusForbidden && client.StatusOf(err) != http.StatusBadRequest {
			t.Fatalf("agent h1 reporting for h2: %v", err)
		}
	})

	cases := []struct {
		name, token, as, want, reason string
	}{
		{"reused token", tokH1, "h1", "already used", "TokenUsed"},
		{"wrong host", newToken("h2", "1h"), "h9", "bound to", "WrongHost"},
		{"forged secret", forge(t, newToken("h2", "1h")), "h2", "does not match", "BadSecret"},
		{"expired", newToken("h2", "1s"), "h2", "expired", "TokenExpired"},
	}
	time.Sleep(1500 * time.Millisecond) // let the 1s token expire
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := enroll(tc.as, tc.token)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want refusal containing %q, got %v", tc.want, err)
			}
			t.Logf("refused: %v", err)
			var evs []state.Event
			if _, err := admin.Do(ctx, "GET", "/v1/events", nil, &evs); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.Reason == tc.reason {
					return
				}
			}
			t.Errorf("no %s event recorded", tc.reason)
		})
	}
}

// forge keeps a token's id but replaces its secret.
func forge(t *testing.T, s string) string {
	tok, err := pki.ParseToken(s)
	if err != nil {
		t.Fatal(err)
	}
	tok.Secret = strings.Repeat("A", len(tok.Secret))
	return tok.String()
}

func TestApplyValidationAndDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, _, _ := oneCoordinator(t, ctx, "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(siteYAML+strings.Replace(hostYAML("h1", 11), "interfaces:", "interfaces:\n  - name: eth2\n    mtu: 70000", 1)), 0o644)
	_, err := l.CLI(ctx, "apply", "-f", bad)
	if err == nil || !strings.Contains(err.Error(), "hosts[h1].spec.interfaces[0].mtu: 70000 is above 65535") || !strings.Contains(err.Error(), "bad.yaml: document 2") {
		t.Fatalf("want a field-path error, got %v", err)
	}
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(siteYAML+hostYAML("h1", 11)), 0o644)
	out, err := l.CLI(ctx, "apply", "-f", good, "--dry-run")
	if err != nil || !strings.Contains(out, "+ step h1/host.network") {
		t.Fatalf("dry run: %v %s", err, out)
	}
	if out, _ := l.CLI(ctx, "get", "hosts", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("dry run changed state: %s", out)
	}
	if out, err := l.CLI(ctx, "apply", "-f", good); err != nil || !strings.Contains(out, "+ host h1") {
		t.Fatalf("apply: %v %s", err, out)
	}
	if out, err := l.CLI(ctx, "apply", "-f", good); err != nil || !strings.Contains(out, "no changes") {
		t.Fatalf("re-apply should change nothing: %v %s", err, out)
	}
}

// Step outputs (generated keys) are sealed before they reach the Raft log: neither
// the snapshot nor the step record holds the plaintext.
func TestStepOutputsAreSealed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, c0, _ := oneCoordinator(t, ctx, siteYAML+hostYAML("h1", 11))
	agent := enrolAgent(t, ctx, l, c0, "h1")
	var steps wire.AgentSteps
	if _, err := agent.Do(ctx, "GET", "/v1/agent/steps", nil, &steps); err != nil || len(steps.Steps) != 1 {
		t.Fatalf("steps: %+v %v", steps, err)
	}
	st := steps.Steps[0]
	const secret = "AQD-very-secret-cephx-key=="
	rep := wire.StepReport{ID: st.ID, InputsHash: st.InputsHash, Result: &driver.Result{Outputs: map[string]string{"key": secret}}}
	if _, err := agent.Do(ctx, "POST", "/v1/agent/result", rep, nil); err != nil {
		t.Fatal(err)
	}
	snap, err := exportOf(ctx, l, c0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(snap, secret) {
		t.Fatal("plaintext output found in the replicated state")
	}
	if !strings.Contains(snap, `"output/h1/host.network/key"`) || !strings.Contains(snap, `"key":"sealed"`) {
		t.Fatalf("sealed output not recorded: %s", snap)
	}
	// The Raft log's segments (and everything else raft keeps) hold no plaintext.
	var logBytes int
	err = filepath.WalkDir(filepath.Join(c0.DataDir, "raft"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".wal") {
			logBytes += len(b)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("plaintext output found in %s", p)
		}
		return nil
	})
	if err != nil || logBytes == 0 {
		t.Fatalf("read the Raft log on disk: %d bytes of segments, %v", logBytes, err)
	}
}
