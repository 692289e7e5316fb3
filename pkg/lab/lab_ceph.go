package lab

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/ceph/cephtest"
)

// The Ceph host service starts a one-node Ceph cluster (mon, mgr, one memstore OSD)
// inside CephHost's namespace, bound to its lab IP, and points that host's agent at
// the cluster's ceph.conf with --ceph-conf; the ceph.* steps of examples/lab/site.yaml
// run there against a real cluster.
//
// When the cluster cannot run here (Ceph packages missing) or the lab's agent was
// built without Ceph support (TAGS= make build, or plain go build as the end-to-end
// tests do), the service says so (ErrServiceUnavailable) and starts the agent with
// --ceph-skip: its Ceph steps succeed reporting "skipped: ..." in their outputs and
// the demo still reaches Ready. As for OVS, the same site.yaml must work on every
// lab machine; which part really ran is visible in each step's outputs.
func init() { RegisterHostService("ceph", cephService) }

// CephHost is the lab host that runs the Ceph cluster and the ceph.* steps.
const CephHost = "controller-0"

// cephPort is the mon's msgr2 port inside CephHost's namespace (msgr1 is the next,
// daemons take the 90 after those); nothing else listens there in a lab namespace.
const cephPort = 6800

func cephService(ctx context.Context, l *Lab, h *Host, _ HostSpec) ([]string, error) {
	if h.Name != CephHost {
		return nil, nil
	}
	err := CephAvailable(l.agentBin())
	if err == nil {
		err = l.EnableCeph(ctx, h)
	}
	if err != nil {
		h.AgentArgs = append(h.AgentArgs, "--ceph-skip", "no Ceph cluster in this lab: "+err.Error())
		return nil, fmt.Errorf("%w: %v", ErrServiceUnavailable, err)
	}
	return nil, nil
}

// CephAvailable says why the lab cannot run Ceph steps for real with agentBin, or nil.
func CephAvailable(agentBin string) error {
	if err := cephtest.Available(); err != nil {
		return err
	}
	if !builtWithCeph(agentBin) {
		return fmt.Errorf("%s was built without Ceph support (make build sets -tags ceph,pacific)", agentBin)
	}
	return nil
}

// builtWithCeph reads the agent binary's build settings for the ceph tag.
func builtWithCeph(bin string) bool {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "ceph") {
			return true
		}
	}
	return false
}

// cephDir is where the lab's Ceph cluster keeps everything; admin socket paths must
// stay under 107 bytes, so a long lab directory falls back to a short one in /tmp.
func (l *Lab) cephDir() (string, error) {
	dir := filepath.Join(l.Dir, "ceph")
	if len(dir) <= 60 {
		return dir, nil
	}
	d, err := os.MkdirTemp("/tmp", "ceph")
	if err != nil {
		return "", err
	}
	return d, os.Remove(d) // cephtest wants to create it
}

// EnableCeph starts the cluster in h's namespace and sets h's agent flags to use it
// (replacing a --ceph-skip). A running agent must be restarted to see them.
func (l *Lab) EnableCeph(ctx context.Context, h *Host) error {
	dir, err := l.cephDir()
	if err != nil {
		return fmt.Errorf("lab: ceph on %s: %w", h.Name, err)
	}
	l.OnDown(func(context.Context) { _ = os.RemoveAll(dir) })
	c, err := cephtest.Start(ctx, cephtest.Options{
		Store: cephtest.Memstore, IP: h.IP, Port: cephPort, Dir: dir,
		Wrap: []string{"ip", "netns", "exec", h.NS},
		Spawn: func(name string, argv []string) (func(), error) {
			p, err := l.StartService("ceph "+name+" "+h.Name, h.NS, argv[0], argv[1:]...)
			if err != nil {
				return nil, err
			}
			return p.Kill, nil
		},
	})
	if err != nil {
		return fmt.Errorf("lab: ceph on %s: %w", h.Name, err)
	}
	args := h.AgentArgs[:0]
	for i := 0; i < len(h.AgentArgs); i++ {
		if h.AgentArgs[i] == "--ceph-skip" || h.AgentArgs[i] == "--ceph-conf" {
			i++ // and its value
			continue
		}
		args = append(args, h.AgentArgs[i])
	}
	h.AgentArgs = append(args, "--ceph-conf", c.ConfigFile)
	return l.save()
}

// CephConfig is the lab cluster's ceph.conf (with the admin keyring beside it), for
// tests that check what the steps did; empty when the lab runs no cluster.
func (l *Lab) CephConfig() string {
	h := l.Host(CephHost)
	if h == nil {
		return ""
	}
	if i := slices.Index(h.AgentArgs, "--ceph-conf"); i >= 0 && i+1 < len(h.AgentArgs) {
		return h.AgentArgs[i+1]
	}
	return ""
}
