package pki

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
)

// maxFileSize bounds every file this package reads.
const maxFileSize = 1 << 20

// writeFileAtomic replaces path with data, so readers see the old or the new content,
// never a mix; the temp file is created 0600, so secrets are never readable by others.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return atomicfile.WriteFile(path, data, perm)
}

// writeFileExclusive is writeFileAtomic that fails with fs.ErrExist rather than
// replace an existing file: it links the temp file into place.
func writeFileExclusive(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err // the temp name is noise
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	name := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return name, nil
}

func syncDir(dir string) error { return atomicfile.SyncDir(dir) }

// readFile reads a public file (certificates).
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	return readAll(path, f)
}

// readPrivateFile reads a file holding a secret, refusing it unless it is a regular
// file with no group or other permissions (checked on the open file, not the name).
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("read %s: permissions %04o allow group or other access, want 0600", path, perm)
	}
	return readAll(path, f)
}

func readAll(path string, r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, maxFileSize)
	}
	return b, nil
}
