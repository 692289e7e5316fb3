package kubeinstall

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
)

// writeFile replaces path atomically (pkg/atomicfile), creating parents 0755 as
// kubeadm's own directories are.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, data, perm)
}

// sameFile reports whether path holds exactly data.
func sameFile(path string, data []byte) bool {
	cur, err := os.ReadFile(path)
	return err == nil && bytes.Equal(cur, data)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// nonEmptyDir reports whether dir exists and holds at least one entry.
func nonEmptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// missing reports whether err says a file does not exist.
func missing(err error) bool { return errors.Is(err, fs.ErrNotExist) }
