package lab

import (
	"github.com/plinth-dev/plinth/pkg/atomicfile"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// record is what the lab writes to Dir/lab.json after every change, so `down` in
// another process can remove exactly what `up` made, even after a crash.
type record struct {
	Prefix string       `json:"prefix"`
	Bridge string       `json:"bridge,omitempty"`
	Hosts  []hostRecord `json:"hosts,omitempty"`
	Pids   []int        `json:"pids,omitempty"`
}

type hostRecord struct {
	Name     string `json:"name"`
	NS       string `json:"ns"`
	HostLink string `json:"hostLink"`
}

func (l *Lab) recordPath() string { return filepath.Join(l.Dir, "lab.json") }

// save writes the record; callers hold no lock.
func (l *Lab) save() error {
	l.mu.Lock()
	r := record{Prefix: l.prefix, Bridge: l.bridge}
	for _, h := range l.hosts {
		r.Hosts = append(r.Hosts, hostRecord{Name: h.Name, NS: h.NS, HostLink: h.hostLink})
		if h.Agent != nil && h.Agent.Alive() {
			r.Pids = append(r.Pids, h.Agent.Pid())
		}
	}
	for _, p := range l.services {
		if p.Alive() {
			r.Pids = append(r.Pids, p.Pid())
		}
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

// DownDir removes everything a lab recorded in dir/lab.json: its processes (by
// process group), namespaces, links and finally the directory itself.
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
		_, _ = run(ctx, "ip", "netns", "del", h.NS)
		_, _ = run(ctx, "ip", "link", "del", h.HostLink)
	}
	if r.Bridge != "" {
		_, _ = run(ctx, "ip", "link", "del", r.Bridge)
	}
	return os.RemoveAll(dir)
}
