package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/freeport"
	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/coordinator"
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/server"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// execute runs the CLI in-process and returns what it printed.
func execute(ctx context.Context, args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func freeAddr(t *testing.T) string { return freeport.Addr(t) }

// TestIntegrationCLIAgainstCoordinator drives join, run (with its config file and the
// real drivers program, built here) and status against an in-process coordinator. The host's
// interface does not exist, so the real host.network driver fails permanently
// without changing anything on this machine.
func TestIntegrationCLIAgainstCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator: skipped with -short")
	}
	dir := t.TempDir()
	ccfg := coordinator.Config{Name: "c0", Site: "lab", APIAddr: freeAddr(t), JoinAddr: freeAddr(t),
		RaftAddr: freeAddr(t), GossipAddr: freeAddr(t), Profile: "fast"}
	cdir, adminPath := filepath.Join(dir, "c0"), filepath.Join(dir, "admin.json")
	if err := coordinator.Init(coordinator.InitOptions{DataDir: cdir, Config: ccfg, AdminIdentity: adminPath}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cctx, cstop := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- coordinator.Run(cctx, cdir, coordinator.RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	defer func() { cstop(); <-cdone }()
	admin, err := client.FromIdentityFile(adminPath)
	if err != nil {
		t.Fatal(err)
	}
	var tok wire.TokenResponse
	poll.Until(t, 20*time.Second, "coordinator accepts writes", func() error {
		_, err := admin.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: "node-1", Role: "agent"}, &tok)
		return err
	})
	hostYAML := "apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: node-1}\nspec:\n  roles: [worker]\n  managementAddress: 127.0.0.1\n  interfaces: [{name: plx-none0, mtu: 1400}]\n"
	if _, err := admin.Do(ctx, "POST", "/v1/apply", wire.ApplyRequest{File: "h.yaml", YAML: hostYAML}, nil); err != nil {
		t.Fatal(err)
	}

	stateDir := filepath.Join(dir, "agent")
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte(tok.Token+"\n"), 0o600)
	join := []string{"join", "--state-dir", stateDir, "--coordinator", ccfg.JoinAddr, "--token-file", tokFile, "--name", "node-1"}
	if out, err := execute(ctx, join...); err != nil || !strings.Contains(out, "Host node-1 enrolled") {
		t.Fatalf("join: %v\n%s", err, out)
	}
	if out, err := execute(ctx, join...); err != nil || !strings.Contains(out, "Nothing changed") {
		t.Fatalf("second join: %v\n%s", err, out)
	}
	if out, err := execute(ctx, "join", "--coordinator", ccfg.JoinAddr, "--token", "x", "--token-file", tokFile); err == nil {
		t.Fatalf("join with both --token and --token-file: no error\n%s", out)
	}

	drivers := filepath.Join(dir, "bin", driverexec.Binary)
	for _, c := range []struct{ bin, src string }{{drivers, "../drivers"}, {filepath.Join(dir, "bin", driverexec.CephBinary), "../drivers-ceph"}} {
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", c.bin, c.src).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", c.bin, err, out)
		}
	}
	if out, err := execute(ctx, "run", "--state-dir", stateDir, "--drivers", filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("run without its drivers program: %v\n%s", err, out)
	}
	conf := filepath.Join(dir, "agent.yaml")
	os.WriteFile(conf, []byte(fmt.Sprintf("stateDir: /nonexistent\ngossipAddr: %s\ngossipProfile: fast\nfactsInterval: 1s\nlogLevel: error\n", freeAddr(t))), 0o644)
	rctx, rstop := context.WithCancel(ctx)
	rdone := make(chan error, 1)
	go func() {
		// --state-dir on the command line overrides the file's stateDir.
		_, err := execute(rctx, "run", "--config", conf, "--state-dir", stateDir, "--drivers", drivers)
		rdone <- err
	}()
	// node-1 has no plx-none0: once its facts arrive the coordinator holds the step
	// (InvalidSpec), whether or not the real driver got to run it first (Blocked). A
	// step already handed out when the hold lands finishes its run, so Running is
	// passed through, not settled on.
	var rec plan.Record
	poll.Until(t, 30*time.Second, "step held by the facts checks", func() error {
		var d server.HostDetail
		if _, err := admin.Do(ctx, "GET", "/v1/hosts/node-1", nil, &d); err != nil {
			return err
		}
		if len(d.Steps) != 1 || !strings.Contains(d.Steps[0].Held, `no link named "plx-none0"`) {
			return fmt.Errorf("steps %+v", d.Steps)
		}
		if d.Steps[0].State == plan.Running {
			return fmt.Errorf("held step still running its handed-out run")
		}
		rec = d.Steps[0]
		return nil
	})
	if rec.State != plan.Pending && (rec.State != plan.Blocked || rec.LastResult == nil || !strings.Contains(rec.LastResult.Error, "plx-none0 not found")) {
		t.Fatalf("held step: %s, last result %+v", rec.State, rec.LastResult)
	}
	state := string(rec.State)

	out, err := execute(ctx, "status", "--state-dir", stateDir, "-o", "json")
	var st agent.Status
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Name != "node-1" || len(st.Steps) != 1 || st.Steps[0].State != rec.State {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	out, err = execute(ctx, "status", "--state-dir", stateDir)
	if err != nil || !strings.Contains(out, "node-1/host.network") || !strings.Contains(out, state) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if out, err = execute(ctx, "status", "--state-dir", stateDir, "-o", "yaml"); err != nil || !strings.Contains(out, "name: node-1") {
		t.Fatalf("status -o yaml: %v\n%s", err, out)
	}
	rstop()
	select {
	case err := <-rdone:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestVersionAndHelp(t *testing.T) {
	out, err := execute(context.Background(), "version")
	if err != nil || !strings.HasPrefix(out, "plinth-agent ") {
		t.Fatalf("version: %v %q", err, out)
	}
	for _, c := range []string{"join", "run", "status", "facts"} {
		out, err := execute(context.Background(), c, "--help")
		if err != nil || !strings.Contains(out, "Examples:") {
			t.Errorf("%s --help: %v\n%s", c, err, out)
		}
	}
	if out, err := execute(context.Background(), "completion", "bash"); err != nil || !strings.Contains(out, "plinth-agent") {
		t.Errorf("completion bash: %v", err)
	}
}
