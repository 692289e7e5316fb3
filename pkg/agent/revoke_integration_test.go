package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/logbuf"
	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/coordinator"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/membership"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// TestIntegrationDeletedHostLeavesGossip runs a real coordinator and two real agents:
// deleting node-1 rotates the gossip key; node-2 follows the rotation and stays in
// the pool, node-1 (whose certificate is now refused) is cut off from it.
func TestIntegrationDeletedHostLeavesGossip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and two agents: skipped with -short")
	}
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PLINTH_TEST_LOGS") != "" {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir := t.TempDir()
	adminPath := filepath.Join(dir, "admin.json")
	ccfg := coordinator.Config{Name: "c0", Site: "lab", APIAddr: freeAddr(t), JoinAddr: freeAddr(t), RaftAddr: freeAddr(t),
		GossipAddr: freeAddr(t), Profile: "fast"}
	cdir := filepath.Join(dir, "coordinator")
	if err := coordinator.Init(coordinator.InitOptions{DataDir: cdir, Config: ccfg, AdminIdentity: adminPath}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(name string, f func(context.Context) error) {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f(rctx) }()
		t.Cleanup(func() {
			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("%s did not stop", name)
			}
		})
	}
	run("coordinator", func(ctx context.Context) error {
		return coordinator.Run(ctx, cdir, coordinator.RunOptions{Logger: log.With("who", "coordinator")})
	})
	admin, err := client.FromIdentityFile(adminPath)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := driver.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := map[string]string{}
	for _, name := range []string{"node-1", "node-2"} {
		var tok wire.TokenResponse
		poll.Until(t, 20*time.Second, "coordinator accepts writes", func() error {
			_, err := admin.Do(ctx, "POST", wire.PathTokens, wire.TokenRequest{Name: name, Role: "agent", TTL: time.Hour}, &tok)
			return err
		})
		stateDir[name] = filepath.Join(dir, name)
		if err := Join(ctx, JoinOptions{StateDir: stateDir[name], Name: name, Token: tok.Token, JoinAddrs: []string{ccfg.JoinAddr}}); err != nil {
			t.Fatalf("join %s: %v", name, err)
		}
		cfg := Config{StateDir: stateDir[name], GossipAddr: freeAddr(t), GossipProfile: "fast", FactsInterval: time.Second,
			Logger: log.With("who", name), Drivers: reg}
		run(name, func(ctx context.Context) error { return Run(ctx, cfg) })
	}
	oldKey, err := LoadGossipKey(stateDir["node-2"])
	if err != nil || len(oldKey) == 0 {
		t.Fatalf("node-2's gossip key: %v", err)
	}
	// An observer in the pool, with whatever key the pool uses, reports states.
	observe := func(key []byte) map[string]string {
		p, err := membership.Start(ctx, membership.Config{Name: "observer", Role: membership.RoleAgent, BindAddr: "127.0.0.1:0",
			Key: key, Seeds: []string{ccfg.GossipAddr}, Profile: membership.ProfileFast, Logger: log.With("who", "observer")})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out := map[string]string{}
		poll.True(t, 10*time.Second, "the observer joins the pool", func() bool {
			for _, m := range p.Members() {
				out[m.Name] = m.State
			}
			return out["coordinator:c0"] == membership.StateAlive
		})
		time.Sleep(time.Second) // let the member list settle after the join
		for _, m := range p.Members() {
			out[m.Name] = m.State
		}
		return out
	}
	poll.Until(t, 30*time.Second, "both agents gossip", func() error {
		if s := observe(oldKey); s["agent:node-1"] != membership.StateAlive || s["agent:node-2"] != membership.StateAlive {
			return fmt.Errorf("members %v", s)
		}
		return nil
	})

	if _, err := admin.Do(ctx, "DELETE", wire.PathHosts+"/node-1", nil, nil); err != nil {
		t.Fatalf("delete node-1: %v", err)
	}
	b, err := LoadBundle(stateDir["node-1"])
	if err != nil {
		t.Fatal(err)
	}
	tc, err := b.ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New([]string{ccfg.APIAddr}, tc).Do(ctx, "GET", wire.PathAgentConfig, nil, nil); client.StatusOf(err) != 403 {
		t.Fatalf("node-1's certificate after the delete: %v, want 403", err)
	}
	var newKey []byte
	poll.Until(t, 90*time.Second, "node-2 follows the rotation; node-1 is cut off", func() error {
		k, err := LoadGossipKey(stateDir["node-2"])
		if err != nil {
			return err
		}
		if bytes.Equal(k, oldKey) {
			return fmt.Errorf("node-2 still has the old key")
		}
		newKey = k
		s := observe(newKey)
		if s["agent:node-2"] != membership.StateAlive || s["agent:node-1"] == membership.StateAlive {
			return fmt.Errorf("members with the new key: %v", s)
		}
		return nil
	})
	if k, _ := LoadGossipKey(stateDir["node-1"]); !bytes.Equal(k, oldKey) {
		t.Fatal("the deleted node-1 learnt the new gossip key")
	}
}
