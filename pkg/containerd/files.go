package containerd

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
)

// writeFile replaces path with data atomically (pkg/atomicfile), creating parent
// directories 0755 as needed.
func writeFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("containerd: create %s: %w", dir, err)
	}
	if err := atomicfile.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	return nil
}

// readFile returns path's content, or nil when it does not exist.
func readFile(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("containerd: read %s: %w", path, err)
	}
	return b, true, nil
}

// writtenByUs reports whether path starts with this package's header.
func writtenByUs(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("containerd: read %s: %w", path, err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return false, nil // empty or unreadable first line: not ours
	}
	return strings.HasPrefix(line, ownerMark), nil
}

// removeOwned removes a hosts.toml we wrote and its directory if that is now empty.
func removeOwned(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("containerd: remove %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if entries, rerr := os.ReadDir(dir); rerr == nil && len(entries) > 0 {
			return nil // the operator keeps other files (certificates) there
		}
		return fmt.Errorf("containerd: remove %s: %w", dir, err)
	}
	return nil
}
