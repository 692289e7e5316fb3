package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/bundle"
)

// stage lays out small stand-in files as scripts/build-bundle.sh stages the real ones.
func stage(t *testing.T) string {
	t.Helper()
	s := t.TempDir()
	for _, c := range append(bundle.DebComponents("0.2.0+git3.def5678"), bundle.DefaultPins.Components()...) {
		p := filepath.Join(s, filepath.FromSlash(c.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("stand-in "+c.Name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s, bundle.InstallScript), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

func TestAssembleVerifyCorrupt(t *testing.T) {
	s, out := stage(t), t.TempDir()
	if msg, err := run(t, "assemble", "--from", s, "--out", out); err != nil {
		t.Fatalf("assemble: %v\n%s", err, msg)
	}
	tarPath := filepath.Join(out, bundle.ArchiveName("0.2.0+git3.def5678"))
	msg, err := run(t, "verify", tarPath)
	if err != nil || !strings.Contains(msg, "bundle 0.2.0+git3.def5678 verified: 19 components") {
		t.Fatalf("verify = %v\n%s", err, msg)
	}

	msg, err = run(t, "show", "-o", "json", tarPath)
	var sh shown
	if err != nil || json.Unmarshal([]byte(msg), &sh) != nil || len(sh.ManifestSHA256) != 64 || sh.Manifest.PlinthVersion != "0.2.0+git3.def5678" {
		t.Fatalf("show -o json = %v\n%s", err, msg)
	}
	if msg, err = run(t, "show", tarPath); err != nil || !strings.Contains(msg, "registry.local/kube-proxy:v1.37.2") {
		t.Fatalf("show = %v\n%s", err, msg)
	}

	// One flipped byte in the archive's copy of kubeadm is refused, naming the file.
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("stand-in kubeadm"))
	data[i+9] ^= 0x01
	bad := filepath.Join(t.TempDir(), "copy.tar")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, "verify", bad)
	if err == nil {
		t.Fatal("verify accepted a corrupted bundle")
	}
	for _, want := range []string{"bin/kubeadm: sha256 is", "SHA256SUMS expects", "re-copy the bundle from the build host"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}
}

func TestAssembleRefusesBadStage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(s string)
		want   string
	}{
		{"missing component", func(s string) { os.Remove(filepath.Join(s, "cni/portmap")) }, "assemble: cni portmap:"},
		{"unlisted file", func(s string) { os.WriteFile(filepath.Join(s, "bin/extra"), nil, 0o755) }, "bin/extra in the staging directory is not a bundle component"},
		{"two deb versions", func(s string) {
			os.WriteFile(filepath.Join(s, "debs/plinth-agent_0.3.0_amd64.deb"), nil, 0o644)
		}, "holds packages of two versions"},
		{"no coordinator deb", func(s string) {
			os.Remove(filepath.Join(s, "debs/plinth-coordinator_0.2.0+git3.def5678_amd64.deb"))
		}, "has no plinth-coordinator package"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := stage(t)
			tc.damage(s)
			_, err := run(t, "assemble", "--from", s, "--out", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("assemble = %v, want %q", err, tc.want)
			}
		})
	}
}
