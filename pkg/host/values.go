package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// valueStore records, for kernel settings written through files (sysctls, hugepage
// counts), the value each had before Plinth first changed it, so that a setting
// dropped from the manifest is put back the way Plinth found it.
type valueStore struct {
	mu   sync.Mutex
	path string
}

type valuesFile struct {
	Version  int               `json:"version"`
	Original map[string]string `json:"original"`
}

func (s *valueStore) load() (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.read()
}

func (s *valueStore) read() (map[string]string, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host: read state: %w", err)
	}
	var f valuesFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, driver.Permanent(fmt.Errorf("host: state file %s is corrupt: %w", s.path, err))
	}
	if f.Original == nil {
		f.Original = map[string]string{}
	}
	return f.Original, nil
}

// update applies fn to the recorded originals and writes them durably.
func (s *valueStore) update(fn func(map[string]string)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.read()
	if err != nil {
		return err
	}
	fn(m)
	b, err := json.MarshalIndent(valuesFile{Version: 1, Original: m}, "", "  ")
	if err != nil {
		return fmt.Errorf("host: encode state: %w", err)
	}
	if err := writeAtomic(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("host: write state: %w", err)
	}
	return nil
}

// remember records original for key unless a value is recorded already.
func (s *valueStore) remember(key, original string) error {
	return s.update(func(m map[string]string) {
		if _, ok := m[key]; !ok {
			m[key] = original
		}
	})
}

func (s *valueStore) forget(key string) error {
	return s.update(func(m map[string]string) { delete(m, key) })
}

// readValue reads a kernel setting file, with whitespace runs made single spaces
// (the kernel separates multi-value sysctls with tabs).
func readValue(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return normValue(string(b)), nil
}

func normValue(s string) string { return strings.Join(strings.Fields(s), " ") }

// writeValue writes a kernel setting file the way sysctl(8) does: one write, no
// create (a missing file means the kernel has no such setting).
func writeValue(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
