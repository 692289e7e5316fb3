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

// Read returns the manifest of an unpacked bundle without hashing anything: for
// steps that only need versions and sums (which Verify, run by the install script,
// has already checked against the files).
func Read(dir string) (Manifest, error) {
	p := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return Manifest{}, fmt.Errorf("bundle: read %s: %w", p, err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		return Manifest{}, fmt.Errorf("bundle: %s %w: %s", p, err, Remedy)
	}
	return m, nil
}

// ReadArchive returns the manifest inside a bundle archive without verifying the
// rest (VerifyArchive does both).
func ReadArchive(tarPath string) (Manifest, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return Manifest{}, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Manifest{}, fmt.Errorf("bundle: %s has no %s: not a Plinth bundle, or truncated: %s", tarPath, ManifestFile, Remedy)
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("bundle: read %s: %w: %s", tarPath, err, Remedy)
		}
		if _, rel, _ := strings.Cut(h.Name, "/"); rel != ManifestFile || h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
		if err != nil {
			return Manifest{}, fmt.Errorf("bundle: read %s in %s: %w", ManifestFile, tarPath, err)
		}
		m, err := decodeManifest(data)
		if err != nil {
			return Manifest{}, fmt.Errorf("bundle: %s in %s %w: %s", ManifestFile, tarPath, err, Remedy)
		}
		return m, nil
	}
}
