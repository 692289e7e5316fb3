package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"
)

// Part is a component to put into a bundle and the file it is read from.
// Assemble fills in the component's SHA256 and Size.
type Part struct {
	Component
	Source string
}

// Extra is a file of the bundle that is not an installed component (install.sh).
type Extra struct {
	Path   string
	Source string
	Mode   int64
}

// Spec is everything a bundle is assembled from.
type Spec struct {
	Version           string
	PlinthVersion     string
	KubernetesVersion string
	Parts             []Part
	Extras            []Extra
}

// archiveTime is every entry's modification time, so the same inputs give the same
// archive, byte for byte.
var archiveTime = time.Unix(0, 0).UTC()

// Assemble writes the bundle archive ArchiveName(spec.Version) into outDir: every
// part and extra under TopDir(version)/, then manifest.json and SHA256SUMS computed
// while the files were copied (each source is read once). Beside it goes
// <archive>.sha256, for `sha256sum -c` on the copy a site receives. The archive is
// written to a temporary file and renamed, so a failed run leaves the old one.
// It returns the manifest and the archive's path.
func Assemble(ctx context.Context, spec Spec, outDir string) (Manifest, string, error) {
	m := Manifest{Version: spec.Version, PlinthVersion: spec.PlinthVersion, KubernetesVersion: spec.KubernetesVersion}
	for _, p := range spec.Parts {
		m.Components = append(m.Components, p.Component)
	}
	// Validate the shape before reading anything: sums are placeholders for now.
	probe := m
	probe.Components = append([]Component(nil), m.Components...)
	for i := range probe.Components {
		probe.Components[i].SHA256 = fmt.Sprintf("%064d", 0)
	}
	if err := probe.Validate(); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	for _, e := range spec.Extras {
		if err := checkPath(e.Path); err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: assemble: extra file: %w", err)
		}
		if _, isKindDir := dirKinds[path.Dir(e.Path)]; isKindDir || e.Path == ManifestFile || e.Path == SumsFile {
			return Manifest{}, "", fmt.Errorf("bundle: assemble: extra file %s would be taken for a component or the bundle's own files", e.Path)
		}
	}

	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	final := filepath.Join(outDir, ArchiveName(spec.Version))
	tmp, err := os.CreateTemp(outDir, "."+ArchiveName(spec.Version)+".tmp-*")
	if err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename this removes nothing
	defer tmp.Close()

	whole := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(tmp, whole))
	top := TopDir(spec.Version)
	sums := map[string]string{}

	dirs := map[string]bool{}
	for _, p := range spec.Parts {
		dirs[path.Dir(p.Path)] = true
	}
	for _, e := range spec.Extras {
		if d := path.Dir(e.Path); d != "." {
			dirs[d] = true
		}
	}
	if err := writeDir(tw, top); err != nil {
		return Manifest{}, "", err
	}
	for _, d := range sortedKeys(dirs) {
		if err := writeDir(tw, top+"/"+d); err != nil {
			return Manifest{}, "", err
		}
	}
	for i, p := range spec.Parts {
		if err := ctx.Err(); err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
		}
		mode := int64(0o644)
		if p.Kind == KindBinary || p.Kind == KindCNI {
			mode = 0o755
		}
		sum, size, err := writeFile(tw, top+"/"+p.Path, p.Source, mode)
		if err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: assemble %s %s: %w", p.Kind, p.Name, err)
		}
		m.Components[i].SHA256, m.Components[i].Size = sum, size
		sums[p.Path] = sum
	}
	for _, e := range spec.Extras {
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
		}
		sum, _, err := writeFile(tw, top+"/"+e.Path, e.Source, mode)
		if err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: assemble %s: %w", e.Path, err)
		}
		sums[e.Path] = sum
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	mj = append(mj, '\n')
	if err := writeBytes(tw, top+"/"+ManifestFile, mj); err != nil {
		return Manifest{}, "", err
	}
	sums[ManifestFile] = sha256Hex(mj)
	if err := writeBytes(tw, top+"/"+SumsFile, formatSums(sums)); err != nil {
		return Manifest{}, "", err
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	side := fmt.Sprintf("%s  %s\n", hex.EncodeToString(whole.Sum(nil)), filepath.Base(final))
	if err := os.WriteFile(final+".sha256", []byte(side), 0o644); err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: assemble: %w", err)
	}
	return m, final, nil
}

func header(name string, typ byte, mode, size int64) *tar.Header {
	return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: archiveTime,
		Uname: "root", Gname: "root", Format: tar.FormatPAX}
}

func writeDir(tw *tar.Writer, name string) error {
	if err := tw.WriteHeader(header(name+"/", tar.TypeDir, 0o755, 0)); err != nil {
		return fmt.Errorf("bundle: assemble: %w", err)
	}
	return nil
}

// writeFile copies src into the archive as name, returning its sum and size.
func writeFile(tw *tar.Writer, name, src string, mode int64) (string, int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", src)
	}
	if err := tw.WriteHeader(header(name, tar.TypeReg, mode, st.Size())); err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), f)
	if err != nil {
		return "", 0, fmt.Errorf("copy %s: %w", src, err)
	}
	if n != st.Size() {
		return "", 0, fmt.Errorf("%s changed size while being copied", src)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func writeBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(header(name, tar.TypeReg, 0o644, int64(len(data)))); err != nil {
		return fmt.Errorf("bundle: assemble: %w", err)
	}
	if _, err := io.Copy(tw, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("bundle: assemble: %w", err)
	}
	return nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
