package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, with ExecStart
// pointed at a binary that exists here.
func TestUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: cannot verify the unit")
	}
	unit, err := os.ReadFile("../../systemd/plinth-coordinator.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "Type=notify") || !strings.Contains(string(unit), "WatchdogSec=") {
		t.Fatal("unit must be Type=notify with a watchdog")
	}
	self, _ := os.Executable()
	text := strings.Replace(string(unit), "/usr/bin/plinth-coordinator", self, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "plinth-coordinator.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "plinth-coordinator.service") {
			t.Errorf("systemd-analyze complains: %s", l)
		}
	}
}
