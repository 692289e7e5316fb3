package bundle

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Read returns the manifest of an unpacked bundle and the SHA-256 of its
// manifest.json (what a site pins in spec.kubernetes.bundle.sha256), hashing nothing
// else: for steps that need versions and sums, which Verify (run by the install
// script) has checked against the files and which each step checks again for the
// files it installs.
func Read(dir string) (Manifest, string, error) {
	p := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: read %s: %w", p, err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: %s %w: %s", p, err, Remedy)
	}
	return m, sha256Hex(data), nil
}

// ReadPinned is Read refusing a manifest whose SHA-256 is not pin (no check when
// pin is empty): a different bundle under the same version is refused, not used.
func ReadPinned(dir, pin string) (Manifest, error) {
	m, sum, err := Read(dir)
	if err != nil {
		return Manifest{}, err
	}
	if pin != "" && sum != pin {
		return Manifest{}, fmt.Errorf("bundle: %s: sha256 is %s, the site pins %s: unpack the bundle the site names, or update spec.kubernetes.bundle.sha256 (plinth-bundle show prints it)",
			filepath.Join(dir, ManifestFile), sum, pin)
	}
	return m, nil
}

// ReadArchive returns the manifest inside a bundle archive and its SHA-256,
// without verifying the rest (VerifyArchive does that).
func ReadArchive(tarPath string) (Manifest, string, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return Manifest{}, "", fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Manifest{}, "", fmt.Errorf("bundle: %s has no %s: not a Plinth bundle, or truncated: %s", tarPath, ManifestFile, Remedy)
		}
		if err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: read %s: %w: %s", tarPath, err, Remedy)
		}
		if _, rel, _ := strings.Cut(h.Name, "/"); rel != ManifestFile || h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
		if err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: read %s in %s: %w", ManifestFile, tarPath, err)
		}
		m, err := decodeManifest(data)
		if err != nil {
			return Manifest{}, "", fmt.Errorf("bundle: %s in %s %w: %s", ManifestFile, tarPath, err, Remedy)
		}
		return m, sha256Hex(data), nil
	}
}
