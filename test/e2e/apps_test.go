package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/charttest"
	"github.com/plinth-dev/plinth/pkg/state"
)

// The app CLI against a real coordinator process: upload a tiny chart's
// application, list it, read its status, set and show overrides, update it and
// delete it. There is no cluster: apply progress is not asserted.
func TestAppCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, _, _ := oneCoordinator(t, ctx, "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web-0.1.0.tgz"), charttest.Demo(t, "web", nil), 0o644); err != nil {
		t.Fatal(err)
	}
	app := `apiVersion: plinth.dev/v1alpha1
kind: Application
metadata:
  name: demo
spec:
  groups:
  - name: infra
    charts:
    - name: web
      source: {archive: web-0.1.0.tgz}
      values: {port: 8080}
`
	file := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(file, []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := l.CLI(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := cli("app", "upload", "-f", file, "--dry-run"); !strings.Contains(out, "+ chart infra/web: release web") {
		t.Fatalf("dry run: %s", out)
	}
	if out := cli("app", "list", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("dry run stored: %s", out)
	}
	cli("app", "upload", "-f", file)
	if out := cli("app", "list"); !strings.Contains(out, "NAME") || !strings.Contains(out, "demo") || !strings.Contains(out, "uploaded") {
		t.Fatalf("list: %s", out)
	}
	var rec state.AppRecord
	if err := json.Unmarshal([]byte(cli("app", "status", "demo", "-o", "json")), &rec); err != nil || rec.Status.State != "uploaded" || rec.Application.Metadata.Generation != 1 {
		t.Fatalf("status -o json: %v %+v", err, rec)
	}
	if out := cli("app", "status", "demo"); !strings.Contains(out, "GROUP") || !strings.Contains(out, "infra") {
		t.Fatalf("status: %s", out)
	}
	ov := filepath.Join(dir, "web.yaml")
	os.WriteFile(ov, []byte("nested:\n  b: 20\n"), 0o644)
	cli("app", "override", "set", "demo", "web", "-f", ov)
	out := cli("app", "overrides", "show", "demo", "web")
	for _, want := range []string{`greeting: "hello"  # chart`, `port: 8080  # application`, `b: 20  # user`} {
		if !strings.Contains(out, want) {
			t.Errorf("overrides show lacks %q:\n%s", want, out)
		}
	}
	os.WriteFile(ov, []byte("- not\n- a map\n"), 0o644)
	if _, err := l.CLI(ctx, "app", "override", "set", "demo", "web", "-f", ov); err == nil || !strings.Contains(err.Error(), "top level is a list") {
		t.Errorf("list overrides: %v", err)
	}
	os.WriteFile(file, []byte(strings.Replace(app, "port: 8080", "port: 9090", 1)), 0o644)
	if out := cli("app", "update", "-f", file); !strings.Contains(out, "~ chart infra/web: values changed") {
		t.Fatalf("update: %s", out)
	}
	if err := json.Unmarshal([]byte(cli("app", "status", "demo", "-o", "json")), &rec); err != nil || rec.Application.Metadata.Generation != 2 {
		t.Fatalf("after update: %v %+v", err, rec.Application.Metadata)
	}
	if _, err := l.CLI(ctx, "apply", "-f", file); err == nil || !strings.Contains(err.Error(), "app upload -f FILE") {
		t.Errorf("apply -f of an Application: %v", err)
	}
	cli("app", "delete", "demo")
	if out := cli("get", "applications", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("after delete: %s", out)
	}
}
