package host

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// ownedFile is the state file, under the driver's state directory, that records which
// addresses and routes Plinth added and may therefore remove.
const ownedFile = "host.network.owned.json"

// addrKey identifies an owned address: the kernel name of its link and its CIDR.
type addrKey struct {
	Link string `json:"link"`
	CIDR string `json:"cidr"`
}

// routeKey identifies a route the way the kernel does for replace: destination, table
// and metric (both as the kernel stores them: table 254 for main, IPv6 metric 1024 for 0).
type routeKey struct {
	Dst    string `json:"dst"`
	Table  int    `json:"table"`
	Metric int    `json:"metric"`
}

type ownedState struct {
	Version   int        `json:"version"`
	Addresses []addrKey  `json:"addresses"`
	Routes    []routeKey `json:"routes"`
}

func (s ownedState) ownsAddr(k addrKey) bool   { return slices.Contains(s.Addresses, k) }
func (s ownedState) ownsRoute(k routeKey) bool { return slices.Contains(s.Routes, k) }

// stateStore reads and atomically rewrites the state file.
type stateStore struct {
	mu   sync.Mutex
	path string
}

func (s *stateStore) load() (ownedState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.read()
}

func (s *stateStore) read() (ownedState, error) {
	st := ownedState{Version: 1}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("host: read state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, driver.Permanent(fmt.Errorf("host: state file %s is corrupt: %w", s.path, err))
	}
	return st, nil
}

// update applies fn to the current state and writes the result durably: temp file,
// fsync, rename, fsync of the directory.
func (s *stateStore) update(fn func(*ownedState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.read()
	if err != nil {
		return err
	}
	fn(&st)
	st.Version = 1
	slices.SortFunc(st.Addresses, func(a, b addrKey) int { return cmp.Or(cmp.Compare(a.Link, b.Link), cmp.Compare(a.CIDR, b.CIDR)) })
	st.Addresses = slices.Compact(st.Addresses)
	slices.SortFunc(st.Routes, func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Metric, b.Metric))
	})
	st.Routes = slices.Compact(st.Routes)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("host: encode state: %w", err)
	}
	if err := writeAtomic(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("host: write state: %w", err)
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
