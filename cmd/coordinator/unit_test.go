package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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

// overrides show: block YAML, one "# origin" per leaf, that parses back to the values.
func TestWriteOriginYAML(t *testing.T) {
	vals := map[string]any{"port": float64(8080), "nested": map[string]any{"a": "x y", "list": []any{float64(1), "b"}}, "empty": map[string]any{}, "yes": true, "a b": "c"}
	origins := map[string]string{"port": "application", "nested.a": "chart", "nested.list": "user", "empty": "chart", "yes": "system", "a b": "user"}
	var b strings.Builder
	writeOriginYAML(&b, vals, origins, "", 0)
	want := "\"a b\": \"c\"  # user\nempty: {}  # chart\nnested:\n  a: \"x y\"  # chart\n  list: [1,\"b\"]  # user\nport: 8080  # application\n\"yes\": true  # system\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	var back map[string]any
	if err := yaml.Unmarshal([]byte(b.String()), &back); err != nil || back["port"] != float64(8080) || back["yes"] != true || back["a b"] != "c" {
		t.Fatalf("does not parse back: %v %v", err, back)
	}
}
