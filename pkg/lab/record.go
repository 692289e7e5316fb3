package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
	"github.com/plinth-dev/plinth/pkg/nspawn"
)

// record is what the lab writes to Dir/lab.json after every change, so `down` in
// another process can remove exactly what `up` made, even after a crash.
type record struct {
	Prefix string       `json:"prefix"`
	Bridge string       `json:"bridge,omitempty"`
	Guard  string       `json:"guard,omitempty"`
	Hosts  []hostRecord `json:"hosts,omitempty"`
	Pids   []int        `json:"pids,omitempty"`
	Owner  *owner       `json:"owner,omitempty"`
}

type hostRecord struct {
	Name     string `json:"name"`
	NS       string `json:"ns"`
	HostLink string `json:"hostLink"`
	// MachineDir holds the booted host's own record (nspawn.Load).
	MachineDir string `json:"machineDir,omitempty"`
}

func (l *Lab) recordPath() string { return filepath.Join(l.Dir, "lab.json") }

// save writes the record; callers hold no lock.
func (l *Lab) save() error {
	l.mu.Lock()
	r := record{Prefix: l.prefix, Bridge: l.bridge, Guard: l.guard, Owner: l.owner}
	for _, h := range l.hosts {
		hr := hostRecord{Name: h.Name, NS: h.NS, HostLink: h.link}
		if h.Machine != nil {
			hr.MachineDir = h.Machine.Config().MachineDir
		}
		r.Hosts = append(r.Hosts, hr)
	}
	for _, c := range l.coords {
		if c.Proc != nil && c.Proc.Alive() {
			r.Pids = append(r.Pids, c.Proc.Pid())
		}
	}
	l.mu.Unlock()
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.recordPath(), b, 0o644)
}

// Exists reports whether dir holds a lab record (a lab that is up or half up).
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "lab.json"))
	return err == nil
}

// DownDir removes everything a lab recorded in dir/lab.json: its booted hosts, its
// processes (by process group), namespaces, links, the forward guard and finally the
// directory itself.
func DownDir(ctx context.Context, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "lab.json"))
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("lab: %s/lab.json: %w", dir, err)
	}
	var errs []error
	for _, h := range r.Hosts {
		if h.MachineDir == "" {
			continue
		}
		m, err := nspawn.Load(h.MachineDir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = removeMachine(ctx, m)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h.Name, err))
		}
	}
	for _, pid := range r.Pids {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range r.Pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	for _, h := range r.Hosts {
		deleteHostLinks(ctx, h.NS, h.HostLink)
	}
	removeNetwork(ctx, r.Bridge, r.Guard)
	if len(errs) > 0 {
		return fmt.Errorf("lab: down: %w (kept %s)", errors.Join(errs...), dir)
	}
	return os.RemoveAll(dir)
}
