package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// InitDriver runs kube.init on the first controller: kubeadm init with Plinth's
// configuration (external etcd, the VIP as endpoint, the coordinator's token and
// certificate key), then keeps what joining nodes need available: the bootstrap token
// and, for a control plane still to join, the uploaded certificates. It deletes the
// Plinth tokens a rotation replaced, and reports control-plane certificates that near
// expiry. Its outputs are the admin kubeconfig and the CA hash joiners pin.
type InitDriver struct{ o *options }

// NewInitDriver returns the kube.init driver.
func NewInitDriver(stateDir string, opts ...Option) *InitDriver {
	return &InitDriver{o: newOptions(stateDir, opts)}
}

// Kind implements driver.Driver.
func (d *InitDriver) Kind() string { return kubespec.KindInit }

const initConfigFile = kubeadmDir + "/init.yaml"

// Diff implements driver.Driver.
func (d *InitDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.InitInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	if err := d.o.need("kubeadm"); err != nil {
		return nil, err
	}
	docs, err := InitConfig(in, d.o.paths)
	if err != nil {
		return nil, driver.Permanent(err)
	}
	docs = docs.ForHost(d.o.profile)
	cfg, err := docs.YAML()
	if err != nil {
		return nil, driver.Permanent(err)
	}
	cs := d.o.configChanges("kubeadm init configuration", initConfigFile, cfg, in.Node)

	// An attempt marker means the last kubeadm init never returned success (killed, or
	// failed late): its later phases (uploaded config, RBAC, tokens, addons) may be
	// missing even though the API answers. No node can have joined (joins need this
	// step's outputs), so resetting and running init again is always safe.
	if d.o.attempted(d.Kind()) || !exists(d.o.paths.Join(adminConf)) || !exists(d.o.paths.Join(apiServerManifest)) {
		clean, err := d.o.cleanupChange(d.Kind(), in.Cluster.CRISocket)
		if err != nil {
			return nil, err
		}
		if clean != nil {
			cs = append(cs, *clean)
		}
		what := fmt.Sprintf("kubeadm init: control plane %s at %s", in.Node.Name, in.Cluster.Endpoint)
		if in.Note != "" {
			what += "; " + in.Note
		}
		return append(cs, driver.Change{Summary: what, Apply: d.init}), nil
	}

	c, err := d.o.client(adminConf)
	if err != nil {
		return nil, err
	}
	if ok, err := nodeRegistered(ctx, c, in.Node.Name); err != nil {
		return nil, fmt.Errorf("kube.init: the control plane at %s does not answer: %w", in.Cluster.Endpoint, err)
	} else if !ok {
		return nil, fmt.Errorf("kube.init: node %s is not registered although the control plane runs; kubelet registers it", in.Node.Name)
	}
	up, err := d.upkeep(ctx, c, in)
	if err != nil {
		return nil, err
	}
	cs = append(cs, up...)
	return append(cs, expiryChanges(d.o.paths.Join(pkiDir), in.Node.Name, d.o.now(), d.o.renewBefore)...), nil
}

// init runs kubeadm init and waits for nothing more: kubeadm itself waits until the
// control plane answers and the node is registered.
func (d *InitDriver) init(ctx context.Context) error {
	if err := d.o.markAttempt(d.Kind()); err != nil {
		return err
	}
	if err := d.o.kubeadm(ctx, "init", "--config", d.o.paths.Join(initConfigFile), "--upload-certs"); err != nil {
		return fmt.Errorf("kubeadm init (a retry cleans up first): %w", err)
	}
	return d.o.clearAttempt(d.Kind())
}

// upkeep keeps the join credentials available for nodes that have yet to join and
// removes the tokens a rotation replaced.
func (d *InitDriver) upkeep(ctx context.Context, c API, in kubespec.InitInputs) ([]driver.Change, error) {
	var pending, pendingCP []string
	for _, n := range append(append([]string(nil), in.ControlPlanes...), in.Workers...) {
		ok, err := nodeRegistered(ctx, c, n)
		if err != nil {
			return nil, err
		}
		if !ok {
			pending = append(pending, n)
			if slices.Contains(in.ControlPlanes, n) {
				pendingCP = append(pendingCP, n)
			}
		}
	}
	cfg := d.o.paths.Join(initConfigFile)
	admin := d.o.paths.Join(adminConf)
	var cs []driver.Change
	id := tokenID(in.Token)
	if len(pending) > 0 {
		if ok, err := secretExists(ctx, c, tokenSecret(id)); err != nil {
			return nil, err
		} else if !ok {
			cs = append(cs, driver.Change{
				Summary: fmt.Sprintf("create bootstrap token %s (valid %s) for nodes still to join: %s", id, in.TokenTTL, strings.Join(pending, ", ")),
				Apply: func(ctx context.Context) error {
					return d.o.kubeadm(ctx, "init", "phase", "bootstrap-token", "--config", cfg, "--kubeconfig", admin)
				}})
		}
	}
	if len(pendingCP) > 0 {
		if ok, err := secretExists(ctx, c, "kubeadm-certs"); err != nil {
			return nil, err
		} else if !ok {
			cs = append(cs, driver.Change{
				Summary: fmt.Sprintf("upload control-plane certificates (encrypted with the certificate key, kept 2h) for %s", strings.Join(pendingCP, ", ")),
				Apply: func(ctx context.Context) error {
					return d.o.kubeadm(ctx, "init", "phase", "upload-certs", "--upload-certs", "--config", cfg, "--kubeconfig", admin)
				}})
		}
	}
	ids, err := plinthTokens(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, old := range ids {
		if old == id {
			continue
		}
		cs = append(cs, driver.Change{Summary: fmt.Sprintf("delete bootstrap token %s (replaced by %s)", old, id),
			Apply: func(ctx context.Context) error { return deleteSecret(ctx, c, tokenSecret(old)) }})
	}
	return cs, nil
}

// Outputs implements driver.Outputter: the admin kubeconfig and the CA hash.
func (d *InitDriver) Outputs(context.Context, json.RawMessage) (map[string]string, error) {
	admin, err := d.o.readKubeconfig(adminConf)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(d.o.paths.Join(filepath.Join(pkiDir, "ca.crt")))
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	hash, err := certs.CACertHash(ca)
	if err != nil {
		return nil, err
	}
	return map[string]string{kubespec.OutputAdminConf: string(admin), kubespec.OutputCACertHash: hash}, nil
}
