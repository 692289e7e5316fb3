package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args        []string
		cmd, bundle string
	}{
		{[]string{"--root", "/run/runc", "--log", "/x/log.json", "create", "--bundle", "/b", "id"}, "create", "/b"},
		{[]string{"run", "-b", "/b2", "id"}, "run", "/b2"},
		{[]string{"--root=/r", "create", "--bundle=/b3", "id"}, "create", "/b3"},
		{[]string{"--root", "/r", "state", "id"}, "state", ""},
		{[]string{"--root", "/r", "delete", "--force", "id"}, "delete", ""},
	} {
		cmd, bundle := parse(c.args)
		if cmd != c.cmd || bundle != c.bundle {
			t.Errorf("parse(%q) = %q %q, want %q %q", c.args, cmd, bundle, c.cmd, c.bundle)
		}
	}
}

func TestClampConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	in := `{"ociVersion":"1.0.2","process":{"args":["/pause"],"oomScoreAdj":-998,"cwd":"/"},"root":{"path":"rootfs"}}`
	if err := os.WriteFile(p, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := clampBundle([]string{"--root", "/r", "create", "--bundle", dir, "x"}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		OCIVersion string `json:"ociVersion"`
		Process    struct {
			Args        []string `json:"args"`
			OOMScoreAdj *int     `json:"oomScoreAdj"`
			Cwd         string   `json:"cwd"`
		} `json:"process"`
		Root struct{ Path string } `json:"root"`
	}
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Process.OOMScoreAdj == nil || *got.Process.OOMScoreAdj != 0 || got.Process.Cwd != "/" || got.Root.Path != "rootfs" || got.OCIVersion != "1.0.2" {
		t.Errorf("clamped config wrong: %s", b)
	}
	// positive values and other commands are left alone
	pos := `{"process":{"oomScoreAdj":500}}`
	_ = os.WriteFile(p, []byte(pos), 0o600)
	_ = clampBundle([]string{"run", "-b", dir, "x"})
	if b, _ := os.ReadFile(p); string(b) != pos {
		t.Errorf("positive value changed: %s", b)
	}
	neg := `{"process":{"oomScoreAdj":-5}}`
	_ = os.WriteFile(p, []byte(neg), 0o600)
	_ = clampBundle([]string{"state", "x"})
	if b, _ := os.ReadFile(p); string(b) != neg {
		t.Errorf("state changed the config: %s", b)
	}
}
