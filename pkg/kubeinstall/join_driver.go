package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// JoinDriver runs kube.join (a worker) and kube.join-control-plane (the second
// controller): kubeadm join with the coordinator's token, the CA hash kube.init
// reported and, for a control plane, the certificate key. A host whose kubelet is
// configured and whose Node is registered is a member already and is never joined
// again; a failed join of Plinth's is reset before the retry.
type JoinDriver struct {
	o            *options
	controlPlane bool
}

// NewJoinDriver returns the kube.join driver.
func NewJoinDriver(stateDir string, opts ...Option) *JoinDriver {
	return &JoinDriver{o: newOptions(stateDir, opts)}
}

// NewJoinControlPlaneDriver returns the kube.join-control-plane driver.
func NewJoinControlPlaneDriver(stateDir string, opts ...Option) *JoinDriver {
	return &JoinDriver{o: newOptions(stateDir, opts), controlPlane: true}
}

// Kind implements driver.Driver.
func (d *JoinDriver) Kind() string {
	if d.controlPlane {
		return kubespec.KindJoinControlPlane
	}
	return kubespec.KindJoin
}

const joinConfigFile = kubeadmDir + "/join.yaml"

// registerWait bounds how long a join waits for kubelet to register the Node.
const registerWait = 90 * time.Second

// Diff implements driver.Driver.
func (d *JoinDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.JoinInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	if in.ControlPlane != d.controlPlane {
		return nil, driver.Permanent(fmt.Errorf("%s: inputs say controlPlane=%v", d.Kind(), in.ControlPlane))
	}
	if err := d.o.need("kubeadm"); err != nil {
		return nil, err
	}
	j, err := JoinConfig(in, d.o.paths)
	if err != nil {
		return nil, driver.Permanent(err)
	}
	j = JoinForHost(j, d.o.profile)
	cfg, err := JoinYAML(j)
	if err != nil {
		return nil, driver.Permanent(err)
	}
	cs := d.o.configChanges("kubeadm join configuration", joinConfigFile, cfg, in.Node)

	if d.member() {
		ok, err := d.registered(ctx, in.Node.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: kubelet is configured but the API at %s does not confirm node %s: %w", d.Kind(), in.Cluster.Endpoint, in.Node.Name, err)
		}
		if ok {
			if d.controlPlane {
				cs = append(cs, expiryChanges(d.o.paths.Join(pkiDir), in.Node.Name, d.o.now(), d.o.renewBefore)...)
			}
			return cs, nil
		}
	}
	clean, err := d.o.cleanupChange(d.Kind(), in.Cluster.CRISocket)
	if err != nil {
		return nil, err
	}
	if clean != nil {
		cs = append(cs, *clean)
	}
	role := "worker"
	if d.controlPlane {
		role = "control plane"
	}
	return append(cs, driver.Change{
		Summary: fmt.Sprintf("kubeadm join %s as %s via %s", in.Node.Name, role, in.Cluster.Endpoint),
		Apply:   func(ctx context.Context) error { return d.join(ctx, in.Node.Name) },
	}), nil
}

// member reports whether kubeadm has configured kubelet here (and, for a control
// plane, the API server).
func (d *JoinDriver) member() bool {
	ok := exists(d.o.paths.Join(kubeletConf)) && exists(d.o.paths.Join(kubeletConfigFile))
	if d.controlPlane {
		ok = ok && exists(d.o.paths.Join(apiServerManifest))
	}
	return ok
}

// registered asks the API, with the node's own credentials, whether its Node exists.
func (d *JoinDriver) registered(ctx context.Context, name string) (bool, error) {
	c, err := d.o.client(kubeletConf)
	if err != nil {
		return false, err
	}
	return nodeRegistered(ctx, c, name)
}

func (d *JoinDriver) join(ctx context.Context, node string) error {
	if err := d.o.markAttempt(d.Kind()); err != nil {
		return err
	}
	if err := d.o.kubeadm(ctx, "join", "--config", d.o.paths.Join(joinConfigFile)); err != nil {
		return fmt.Errorf("kubeadm join (a retry cleans up first): %w", err)
	}
	deadline := time.Now().Add(registerWait)
	for {
		ok, err := d.registered(ctx, node)
		if ok {
			return d.o.clearAttempt(d.Kind())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeadm join finished but node %s did not register within %s: %v", node, registerWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
