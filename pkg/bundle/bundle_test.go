package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallSpec is a bundle of the real shape (every pinned component and both debs)
// made of small files, each with distinct content.
func smallSpec(t *testing.T) Spec {
	t.Helper()
	src := t.TempDir()
	spec := Spec{Version: "0.1.0+git7.abc1234", PlinthVersion: "0.1.0+git7.abc1234", KubernetesVersion: DefaultPins.Kubernetes}
	comps := append(DebComponents(spec.PlinthVersion), DefaultPins.Components()...)
	for i, c := range comps {
		p := filepath.Join(src, fmt.Sprintf("%02d-%s", i, c.Name))
		if err := os.WriteFile(p, []byte(strings.Repeat(c.Name+" content\n", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		spec.Parts = append(spec.Parts, Part{Component: c, Source: p})
	}
	inst := filepath.Join(src, "install.sh")
	if err := os.WriteFile(inst, []byte("#!/bin/sh\necho install\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec.Extras = []Extra{{Path: InstallScript, Source: inst, Mode: 0o755}}
	return spec
}

func assemble(t *testing.T) (Spec, Manifest, string) {
	t.Helper()
	spec := smallSpec(t)
	m, tarPath, err := Assemble(context.Background(), spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return spec, m, tarPath
}

// unpack extracts an archive with the real tar, as the install script does, and
// returns the bundle's top directory.
func unpack(t *testing.T, tarPath, version string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xf", tarPath, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf: %v\n%s", err, out)
	}
	return filepath.Join(dir, TopDir(version))
}

func TestAssembleVerifyRoundTrip(t *testing.T) {
	spec, m, tarPath := assemble(t)
	if got, want := len(m.Components), len(spec.Parts); got != want {
		t.Fatalf("manifest has %d components, want %d", got, want)
	}
	if _, err := VerifyArchive(tarPath); err != nil {
		t.Fatalf("VerifyArchive: %v", err)
	}
	dir := unpack(t, tarPath, spec.Version)
	got, err := Verify(dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.Version != spec.Version || len(got.Components) != len(m.Components) {
		t.Fatalf("Verify returned %+v", got)
	}
	r, sum, err := Read(dir)
	if err != nil || r.Version != spec.Version || sum != sha256Hex(read(t, filepath.Join(dir, ManifestFile))) {
		t.Fatalf("Read = %v, %s, %v", r.Version, sum, err)
	}
	if r, asum, err := ReadArchive(tarPath); err != nil || r.KubernetesVersion != DefaultPins.Kubernetes || asum != sum {
		t.Fatalf("ReadArchive = %v, %s, %v", r.KubernetesVersion, asum, err)
	}
	if _, err := ReadPinned(dir, sum); err != nil {
		t.Fatalf("ReadPinned with the right pin: %v", err)
	}
	if _, err := ReadPinned(dir, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "the site pins 0000") {
		t.Fatalf("ReadPinned with a wrong pin = %v", err)
	}
	// The sums file is what `sha256sum -c` reads on a host.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--quiet", "-c", SumsFile)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c: %v\n%s", err, out)
		}
	}
	// Same inputs, same archive.
	_, again, err := Assemble(context.Background(), spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(tarPath)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Fatal("assembling the same inputs twice gave different archives")
	}
	side, err := os.ReadFile(tarPath + ".sha256")
	if err != nil || !strings.HasSuffix(string(side), "  "+ArchiveName(spec.Version)+"\n") {
		t.Fatalf("sidecar sum %q, %v", side, err)
	}
}

// rewriteManifest edits manifest.json and updates its SHA256SUMS line, so that
// only the edit itself is wrong.
func rewriteManifest(t *testing.T, dir string, edit func(*Manifest)) {
	t.Helper()
	m, _, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(&m)
	mj, _ := json.MarshalIndent(m, "", "  ")
	write(t, filepath.Join(dir, ManifestFile), mj)
	sums, err := parseSums(read(t, filepath.Join(dir, SumsFile)))
	if err != nil {
		t.Fatal(err)
	}
	sums[ManifestFile] = sha256Hex(mj)
	write(t, filepath.Join(dir, SumsFile), formatSums(sums))
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDirRefuses(t *testing.T) {
	spec, _, tarPath := assemble(t)
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string
	}{
		{"corrupted byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "bin/kubelet")
			b := read(t, p)
			b[3] ^= 0xff
			write(t, p, b)
		}, []string{"bin/kubelet: sha256 is ", "SHA256SUMS expects", "the manifest expects", Remedy}},
		{"missing file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "cni/bridge"))
		}, []string{"cni/bridge: is missing (listed in SHA256SUMS)", "cni/bridge: is missing (cni bridge in the manifest)"}},
		{"truncated manifest", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			b := read(t, p)
			write(t, p, b[:len(b)/2])
		}, []string{"manifest.json: is truncated", "manifest.json: sha256 is "}},
		{"manifest missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ManifestFile))
		}, []string{"manifest.json: is missing"}},
		{"path traversal in SHA256SUMS", func(t *testing.T, dir string) {
			p := filepath.Join(dir, SumsFile)
			write(t, p, append(read(t, p), []byte(strings.Repeat("a", 64)+"  ../../etc/passwd\n")...))
		}, []string{`SHA256SUMS: line 22: path "../../etc/passwd" escapes the bundle directory`}},
		{"absolute path in SHA256SUMS", func(t *testing.T, dir string) {
			p := filepath.Join(dir, SumsFile)
			write(t, p, append(read(t, p), []byte(strings.Repeat("a", 64)+"  /etc/passwd\n")...))
		}, []string{`path "/etc/passwd" is absolute`}},
		{"path traversal in manifest", func(t *testing.T, dir string) {
			rewriteManifest(t, dir, func(m *Manifest) { m.Components[3].Path = "bin/../../x" })
		}, []string{`components[3] (kubeadm).path: path "bin/../../x" is not clean`}},
		{"wrong size", func(t *testing.T, dir string) {
			rewriteManifest(t, dir, func(m *Manifest) { m.Components[2].Size = 7 })
		}, []string{"bin/kubelet: size is 48 bytes, the manifest expects 7 (file truncated or changed)"}},
		{"extra file in a component dir", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "bin/evil"), []byte("x"))
		}, []string{"bin/evil: is not listed in SHA256SUMS", "bin/evil: is in bin/ but not in the manifest"}},
		{"extra file at the top", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "notes.txt"), []byte("x"))
		}, []string{"notes.txt: is not listed in SHA256SUMS"}},
		{"symlink", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "bin/kubectl"))
			if err := os.Symlink("/usr/bin/true", filepath.Join(dir, "bin/kubectl")); err != nil {
				t.Fatal(err)
			}
		}, []string{"bin/kubectl: is a L"}},
		{"bad sums line", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, SumsFile), []byte("nonsense\n"))
		}, []string{`SHA256SUMS: line 1: "nonsense" is not`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := unpack(t, tarPath, spec.Version)
			tc.damage(t, dir)
			_, err := Verify(dir)
			var ve *VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify = %v, want a *VerifyError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// tarWith writes an archive with the given entries (type, name, content).
func tarWith(t *testing.T, entries ...tar.Header) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := []byte("x")
		if h.Typeflag == tar.TypeReg {
			h.Size = 1
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	write(t, p, buf.Bytes())
	return p
}

func TestVerifyArchiveRefuses(t *testing.T) {
	spec, _, good := assemble(t)
	data := read(t, good)

	corrupt := filepath.Join(t.TempDir(), "corrupt.tar")
	c := bytes.Clone(data)
	i := bytes.Index(c, []byte("kube-proxy content"))
	c[i] ^= 0x20
	write(t, corrupt, c)

	truncated := filepath.Join(t.TempDir(), "truncated.tar")
	write(t, truncated, data[:len(data)/2])

	top := TopDir(spec.Version) + "/"
	cases := []struct {
		name, tar string
		want      []string
	}{
		{"corrupted byte", corrupt, []string{"images/kube-proxy.tar: sha256 is", Remedy}},
		{"truncated archive", truncated, []string{"is not a complete tar archive", "SHA256SUMS: is missing"}},
		{"path traversal", tarWith(t, tar.Header{Typeflag: tar.TypeReg, Name: top + "../../etc/cron.d/x", Mode: 0o644}),
			[]string{`escapes the bundle directory`}},
		{"entry outside the top dir", tarWith(t, tar.Header{Typeflag: tar.TypeDir, Name: top, Mode: 0o755}, tar.Header{Typeflag: tar.TypeReg, Name: "other/x", Mode: 0o644}),
			[]string{"other/x: is outside the archive's top directory"}},
		{"symlink entry", tarWith(t, tar.Header{Typeflag: tar.TypeSymlink, Name: top + "bin/kubelet", Linkname: "/etc/shadow"}),
			[]string{`bin/kubelet: is a symlink in the archive`}},
		{"not a bundle", tarWith(t, tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644}),
			[]string{"outside the archive's top directory", "manifest.json: is missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyArchive(tc.tar)
			if err == nil {
				t.Fatal("VerifyArchive accepted a broken archive")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	_, good, _ := assemble(t)
	cases := []struct {
		name string
		edit func(*Manifest)
		want string
	}{
		{"bad version", func(m *Manifest) { m.Version = "../x" }, `version: bundle version "../x" is not valid`},
		{"unknown kind", func(m *Manifest) { m.Components[0].Kind = "rpm" }, `components[0] (plinth-agent).kind: "rpm" is not valid`},
		{"wrong dir", func(m *Manifest) { m.Components[2].Path = "cni/kubelet" }, "not directly in bin/"},
		{"bad sha", func(m *Manifest) { m.Components[2].SHA256 = "abc" }, "sha256: \"abc\" is not 64"},
		{"image without ref", func(m *Manifest) { m.Components[len(m.Components)-1].Image = "" }, "images (and only images) name the reference"},
		{"binary with ref", func(m *Manifest) { m.Components[2].Image = "registry.local/x:1" }, "images (and only images) name the reference"},
		{"duplicate", func(m *Manifest) { m.Components[3] = m.Components[2] }, `a second binary named "kubelet"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := good
			m.Components = append([]Component(nil), good.Components...)
			tc.edit(&m)
			if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFind(t *testing.T) {
	_, m, _ := assemble(t)
	c, err := m.Find(KindBinary, "kubelet")
	if err != nil || c.Path != "bin/kubelet" || c.Version != DefaultPins.Kubernetes {
		t.Fatalf("Find kubelet = %+v, %v", c, err)
	}
	img, err := m.Find(KindImage, "kube-proxy")
	if err != nil || img.Image != "registry.local/kube-proxy:v1.37.2" || img.Path != "images/kube-proxy.tar" {
		t.Fatalf("Find kube-proxy = %+v, %v", img, err)
	}
	if _, err := m.Find(KindBinary, "kube-proxy"); err == nil || !strings.Contains(err.Error(), `no binary component "kube-proxy"`) {
		t.Fatalf("Find of a missing binary = %v", err)
	}
	if n := len(m.OfKind(KindImage)); n != 8 {
		t.Fatalf("%d images, want 8", n)
	}
	if img, err := m.Find(KindImage, FlannelImage); err != nil || img.Image != "registry.local/flannel:v0.28.10" {
		t.Fatalf("Find flannel = %+v, %v", img, err)
	}
}

// TestBuiltBundle checks the bundle `make bundle` wrote, if PLINTH_BUNDLE names it
// (a path relative to the repository, or absolute).
func TestBuiltBundle(t *testing.T) {
	p := os.Getenv("PLINTH_BUNDLE")
	if p == "" {
		t.Skip("PLINTH_BUNDLE is not set (e.g. PLINTH_BUNDLE=dist/plinth-bundle-<version>.tar)")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join("..", "..", p) // relative to the repository, where make bundle writes it
	}
	m, err := VerifyArchive(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(DefaultPins.Components(), DebComponents(m.PlinthVersion)...) {
		got, err := m.Find(want.Kind, want.Name)
		if err != nil {
			t.Error(err)
			continue
		}
		if got.Version != want.Version || got.Path != want.Path || got.Image != want.Image {
			t.Errorf("%s %s: got %+v, want %+v", want.Kind, want.Name, got, want)
		}
		if got.Size == 0 {
			t.Errorf("%s is empty", got.Path)
		}
	}
	t.Logf("bundle %s: %d components verified", m.Version, len(m.Components))
}
