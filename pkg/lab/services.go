package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"
)

// HostService prepares something a lab host needs before its agent starts (an OVS
// database, a Ceph cluster on a controller...). It returns extra flags for the
// agent's `run`, and may start processes with l.StartService. A service that cannot
// run on this machine returns ErrServiceUnavailable (wrapped with the reason) and the
// lab goes on without it.
type HostService func(ctx context.Context, l *Lab, h *Host, spec HostSpec) (agentArgs []string, err error)

// ErrServiceUnavailable marks a service this machine cannot run; the lab says so and
// continues.
var ErrServiceUnavailable = fmt.Errorf("lab: service unavailable on this machine")

var (
	servicesMu   sync.Mutex
	hostServices []namedService
)

type namedService struct {
	name string
	fn   HostService
}

// RegisterHostService adds a service every lab host gets, in registration order.
// Call it from an init function of the file that implements the service.
func RegisterHostService(name string, fn HostService) {
	servicesMu.Lock()
	defer servicesMu.Unlock()
	hostServices = append(hostServices, namedService{name, fn})
}

func registeredServices() []namedService {
	servicesMu.Lock()
	defer servicesMu.Unlock()
	return append([]namedService(nil), hostServices...)
}

// StartService starts a long-running process for a host service inside namespace ns;
// Down stops it after the agents and before the coordinators.
func (l *Lab) StartService(name, ns, bin string, args ...string) (*Proc, error) {
	p, err := startProc(l.Detach, name, filepath.Join(l.Dir, "logs", "service-"+sanitize(name)+".log"), ns, bin, args...)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.services = append(l.services, p)
	l.mu.Unlock()
	return p, l.save()
}

// OnDown registers cleanup to run in Down after services stop (unmounts, temp files).
// It is not recorded: a crashed lab's `down` removes namespaces and the directory only.
func (l *Lab) OnDown(fn func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleanups = append(l.cleanups, fn)
}

func (l *Lab) stopServices(ctx context.Context) {
	l.mu.Lock()
	svcs := append([]*Proc(nil), l.services...)
	cleanups := append([]func(context.Context){}, l.cleanups...)
	l.mu.Unlock()
	for i := len(svcs) - 1; i >= 0; i-- {
		svcs[i].Stop(3 * time.Second)
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i](ctx)
	}
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	return string(b)
}
