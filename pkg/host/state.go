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
// links, memberships, addresses, routes and rules Plinth added and may therefore remove.
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

// linkKey identifies a link Plinth created: its name and kind.
type linkKey struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// memberKey records that Plinth made Link a member of Master (both kernel names).
type memberKey struct {
	Link   string `json:"link"`
	Master string `json:"master"`
}

// ruleKey identifies a policy rule by everything Plinth sets on it.
type ruleKey struct {
	Family   int    `json:"family"`
	Priority int    `json:"priority"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	IIF      string `json:"iif,omitempty"`
	OIF      string `json:"oif,omitempty"`
	Mark     uint32 `json:"fwmark,omitempty"`
	Table    int    `json:"table"`
}

// ownedState is what Plinth added to the host and may therefore remove. Version 1
// files without links, members and rules read as owning none of them.
type ownedState struct {
	Version   int         `json:"version"`
	Addresses []addrKey   `json:"addresses"`
	Routes    []routeKey  `json:"routes"`
	Links     []linkKey   `json:"links,omitempty"`
	Members   []memberKey `json:"members,omitempty"`
	Rules     []ruleKey   `json:"rules,omitempty"`
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
	slices.SortFunc(st.Links, func(a, b linkKey) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind)) })
	st.Links = slices.Compact(st.Links)
	slices.SortFunc(st.Members, func(a, b memberKey) int { return cmp.Or(cmp.Compare(a.Link, b.Link), cmp.Compare(a.Master, b.Master)) })
	st.Members = slices.Compact(st.Members)
	slices.SortFunc(st.Rules, compareRules)
	st.Rules = slices.Compact(st.Rules)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("host: encode state: %w", err)
	}
	if err := writeAtomic(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("host: write state: %w", err)
	}
	return nil
}

func compareRules(a, b ruleKey) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Family, b.Family), cmp.Compare(a.From, b.From),
		cmp.Compare(a.To, b.To), cmp.Compare(a.IIF, b.IIF), cmp.Compare(a.OIF, b.OIF), cmp.Compare(a.Mark, b.Mark), cmp.Compare(a.Table, b.Table))
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
