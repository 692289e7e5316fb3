package kubeinstall

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// Attempt markers: Plinth writes one before it runs kubeadm init or join and removes
// it once the node is in the cluster. A marker is how a retry knows that the leftovers
// of a failed run are Plinth's to clean up; leftovers without one are someone else's,
// and Plinth refuses to touch them.
func (o *options) markerPath(kind string) string {
	return filepath.Join(o.stateDir, "kube", kind+".attempt")
}

func (o *options) markAttempt(kind string) error {
	return writeFile(o.markerPath(kind), []byte(o.now().UTC().Format(time.RFC3339)+"\n"), 0o600)
}

func (o *options) clearAttempt(kind string) error {
	if err := os.Remove(o.markerPath(kind)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (o *options) attempted(kind string) bool { return exists(o.markerPath(kind)) }

// leftovers lists what a kubeadm run leaves on a host.
func (o *options) leftovers() []string {
	var out []string
	for _, p := range []string{apiServerManifest, kubeletConf, kubeletConfigFile, adminConf, filepath.Join(pkiDir, "ca.crt")} {
		if exists(o.paths.Join(p)) {
			out = append(out, o.paths.Join(p))
		}
	}
	return out
}

// cleanupChange undoes a failed kubeadm run of Plinth's, or refuses when the leftovers
// are not Plinth's. It keeps the kube-vip manifest (kube.vip's, in the directory
// kubeadm reset empties) and never touches etcd: Plinth's etcd lives in its own unit,
// data dir and /etc/plinth/etcd, which kubeadm reset does not know about.
func (o *options) cleanupChange(kind, criSocket string) (*driver.Change, error) {
	left := o.leftovers()
	if len(left) == 0 && !o.attempted(kind) {
		return nil, nil
	}
	if !o.attempted(kind) {
		return nil, driver.Permanent(fmt.Errorf("%s: this host already has Kubernetes state Plinth did not create (%v) "+
			"and it is not a working member of the cluster; remove it (kubeadm reset) and retry the step", kind, left))
	}
	return &driver.Change{
		Summary: fmt.Sprintf("clean up after a failed %s (kubeadm reset; kube-vip manifest and etcd kept)", kind),
		Apply:   func(ctx context.Context) error { return o.reset(ctx, criSocket) },
	}, nil
}

func (o *options) reset(ctx context.Context, criSocket string) error {
	vip := o.paths.Join(vipManifest)
	saved, verr := os.ReadFile(vip)
	if _, err := o.run.Run(ctx, nil, "kubeadm", "reset", "--force", "--cri-socket", criSocket); err != nil {
		return fmt.Errorf("kubeadm reset: %w", err)
	}
	if verr == nil {
		if err := writeFile(vip, saved, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// kubeadm runs kubeadm with the host's environment.
func (o *options) kubeadm(ctx context.Context, args ...string) error {
	_, err := o.run.Run(ctx, nil, "kubeadm", args...)
	return err
}

// readKubeconfig reads a kubeconfig under the root.
func (o *options) readKubeconfig(path string) ([]byte, error) {
	b, err := os.ReadFile(o.paths.Join(path))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", o.paths.Join(path), err)
	}
	return b, nil
}

// configChanges keeps Plinth's kubeadm file (0600: it holds the token and key) and
// the node's kubelet patch current.
func (o *options) configChanges(what, file string, cfg []byte, n kubespec.Node) []driver.Change {
	var cs []driver.Change
	path := o.paths.Join(file)
	if !sameFile(path, cfg) {
		cs = append(cs, driver.Change{Summary: "write " + what + " " + path,
			Apply: func(context.Context) error { return writeFile(path, cfg, 0o600) }})
	}
	if name, data := KubeletPatch(n); name != "" {
		pp := o.paths.Join(filepath.Join(patchesDir, name))
		if !sameFile(pp, data) {
			cs = append(cs, driver.Change{Summary: fmt.Sprintf("write kubelet patch %s (reserve CPUs %s for the vswitch)", pp, n.ReservedCPUs),
				Apply: func(context.Context) error { return writeFile(pp, data, 0o644) }})
		}
	}
	return cs
}

// need checks that a host binary exists; its absence is permanent.
func (o *options) need(bin string) error {
	if o.lookPath == nil {
		return nil
	}
	if _, err := o.lookPath(bin); err != nil {
		return driver.Permanent(fmt.Errorf("%s is not installed on this host (the site ships it with kubelet; see docs/kubernetes.md): %w", bin, err))
	}
	return nil
}

// client reaches the API server with a kubeconfig from the host.
func (o *options) client(path string) (API, error) {
	kc, err := o.readKubeconfig(path)
	if err != nil {
		return nil, err
	}
	return o.clients(kc)
}
