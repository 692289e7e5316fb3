package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const unitPath = "../../systemd/plinth-agent.service"

// TestUnitVerifies runs `systemd-analyze verify` on the shipped unit, with ExecStart
// pointed at a binary that exists here, and fails on anything it says about the unit
// (errors, and warnings such as unknown keys).
func TestUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed; cannot verify the unit")
	}
	src, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	const exec0 = "ExecStart=/usr/bin/plinth-agent run"
	if !strings.Contains(string(src), exec0) {
		t.Fatalf("unit no longer contains %q; update this test", exec0)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no `true` binary to stand in for plinth-agent")
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "plinth-agent.service")
	body := strings.Replace(string(src), exec0, "ExecStart="+truePath+" run", 1)
	if err := os.WriteFile(unit, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sa, "verify", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=info")
	out, err := cmd.CombinedOutput()
	var about []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "plinth-agent.service") {
			about = append(about, l)
		}
	}
	if err != nil || len(about) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
	t.Logf("systemd-analyze verify: ok\n%s", out)
}

// TestUnitSettings pins the settings the agent's behaviour depends on.
func TestUnitSettings(t *testing.T) {
	src, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Type=notify", "NotifyAccess=main", "Restart=always", "RestartSec=2s", "WatchdogSec=30s",
		"After=network-online.target", "Wants=network-online.target", "StateDirectory=plinth",
		"NoNewPrivileges=yes", "ProtectHome=yes", "PrivateTmp=yes", "WantedBy=multi-user.target",
	} {
		if !strings.Contains(string(src), "\n"+want+"\n") {
			t.Errorf("unit lacks %q", want)
		}
	}
}
