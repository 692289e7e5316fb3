package kubeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// EtcdDriver runs kube.etcd: one member of the etcd cluster the control plane uses
// (kubeadm's external-etcd topology), as the systemd unit plinth-etcd with
// certificates it issues from the coordinator-generated etcd CA.
//
// A member without data either bootstraps the cluster with its peers or, when the
// cluster already runs, adds itself (a member add) and joins it. A member the cluster
// knows to have run before but whose data is gone is refused: that needs the fenced
// recovery in docs/kubernetes.md, never an automatic rejoin.
type EtcdDriver struct{ o *options }

// NewEtcdDriver returns the kube.etcd driver.
func NewEtcdDriver(stateDir string, opts ...Option) *EtcdDriver {
	return &EtcdDriver{o: newOptions(stateDir, opts)}
}

// Kind implements driver.Driver.
func (d *EtcdDriver) Kind() string { return kubespec.KindEtcd }

// Diff implements driver.Driver.
func (d *EtcdDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.EtcdInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	if in.Member.Name == "" || in.Member.IP == "" || in.DataDir == "" || in.Binary == "" {
		return nil, driver.Permanent(fmt.Errorf("kube.etcd: inputs need member name and ip, dataDir and binary"))
	}
	ca, err := certs.ParseCA(in.CA)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.etcd: %w", err))
	}
	cl, err := d.client(ca)
	if err != nil {
		return nil, err
	}
	p := d.o.paths
	var cs []driver.Change
	if !sameFile(p.etcdFile("ca.crt"), ca.CertPEM) {
		cs = append(cs, driver.Change{Summary: "write etcd CA certificate " + p.etcdFile("ca.crt"),
			Apply: func(context.Context) error { return writeFile(p.etcdFile("ca.crt"), ca.CertPEM, 0o644) }})
	}
	for _, c := range etcdCerts(in) {
		if why := d.certProblem(ca, c); why != "" {
			cs = append(cs, driver.Change{Summary: fmt.Sprintf("issue etcd %s certificate (%s)", c.name, why),
				Apply: func(context.Context) error { return d.issue(ca, c) }})
		}
	}

	hasData := nonEmptyDir(filepath.Join(p.Join(in.DataDir), "member", "wal"))
	var boot *Bootstrap
	var add string
	if !hasData {
		if boot, add, err = d.bootstrap(ctx, cl, in); err != nil {
			return nil, err
		}
	}
	cfg, err := RenderEtcdConfig(in, p, boot)
	if err != nil {
		return nil, driver.Permanent(err)
	}
	cur, rerr := os.ReadFile(p.Join(etcdConfig))
	if rerr != nil || (hasData && withoutBootstrap(cur) != withoutBootstrap(cfg)) || (!hasData && string(cur) != string(cfg)) {
		cs = append(cs, driver.Change{Summary: "write etcd config " + p.Join(etcdConfig),
			Apply: func(context.Context) error { return writeFile(p.Join(etcdConfig), cfg, 0o644) }})
	}
	unit := RenderEtcdUnit(in, p)
	if !sameFile(p.Join(etcdUnitPath), unit) {
		cs = append(cs, driver.Change{Summary: "write unit " + etcdUnitName,
			Apply: func(context.Context) error { return writeFile(p.Join(etcdUnitPath), unit, 0o644) }})
	}
	if add != "" {
		cs = append(cs, driver.Change{Summary: fmt.Sprintf("add member %s (%s) to the running etcd cluster", in.Member.Name, add),
			Apply: func(ctx context.Context) error { return d.addMember(ctx, cl, in, add) }})
	}
	active, err := d.o.services.Running(ctx, etcdUnitName)
	if err != nil {
		return nil, err
	}
	if len(cs) > 0 || !active {
		what := "start " + etcdUnitName
		if active {
			what = "restart " + etcdUnitName + " to take the changes"
		}
		if in.Note != "" {
			what += " (" + in.Note + ")"
		}
		cs = append(cs, driver.Change{Summary: what, Apply: func(ctx context.Context) error {
			if err := d.o.services.Restart(ctx, etcdUnitName); err != nil {
				return err
			}
			return d.waitHealthy(ctx, cl, in)
		}})
		return cs, nil
	}
	if err := cl.healthy(ctx, clientURL(in.Member)); err != nil {
		return nil, fmt.Errorf("kube.etcd: member %s runs but is not healthy (does the cluster have a quorum?): %w", in.Member.Name, err)
	}
	return nil, nil
}

// client is an etcd client with a short-lived certificate issued in memory, so the
// driver can observe peers before its own certificates are written.
func (d *EtcdDriver) client(ca *certs.CA) (*etcdClient, error) {
	cert, key, err := ca.Issue(certs.Request{CommonName: "plinth-kube-etcd", Client: true}, d.o.now())
	if err != nil {
		return nil, err
	}
	return newEtcdClient(ca.CertPEM, cert, key)
}

func (d *EtcdDriver) certProblem(ca *certs.CA, c etcdCert) string {
	pem, err := os.ReadFile(d.o.paths.etcdFile(c.name + ".crt"))
	if err != nil {
		return "missing"
	}
	if !exists(d.o.paths.etcdFile(c.name + ".key")) {
		return "key missing"
	}
	if err := ca.Check(pem, c.req, d.o.now(), d.o.renewBefore); err != nil {
		return err.Error()
	}
	return ""
}

func (d *EtcdDriver) issue(ca *certs.CA, c etcdCert) error {
	cert, key, err := ca.Issue(c.req, d.o.now())
	if err != nil {
		return err
	}
	if err := writeFile(d.o.paths.etcdFile(c.name+".key"), key, 0o600); err != nil {
		return err
	}
	return writeFile(d.o.paths.etcdFile(c.name+".crt"), cert, 0o644)
}

// bootstrap decides how a member without data starts. No peer answering, or no
// leader among them, means the cluster is being created: start "new" with the
// declared members. A running cluster means "existing": add this member first unless
// it is listed, and refuse when it is listed as having run (its data was lost).
func (d *EtcdDriver) bootstrap(ctx context.Context, cl *etcdClient, in kubespec.EtcdInputs) (*Bootstrap, string, error) {
	fresh := &Bootstrap{State: "new", Members: in.Members}
	for _, m := range in.Members {
		if m.Name == in.Member.Name {
			continue
		}
		ep := clientURL(m)
		lead, err := cl.hasLeader(ctx, ep)
		if err != nil || !lead {
			continue
		}
		list, err := cl.members(ctx, ep)
		if err != nil {
			continue
		}
		self := peerURL(in.Member)
		boot := &Bootstrap{State: "existing"}
		listed := false
		for _, lm := range list {
			name := lm.Name
			if slices.Contains(lm.PeerURLs, self) {
				if len(lm.ClientURLs) > 0 {
					return nil, "", driver.Permanent(fmt.Errorf("kube.etcd: member %s (%s) has run in this cluster before but its data dir %s is empty: "+
						"it lost its data; follow the fenced recovery in docs/kubernetes.md (remove the member, then retry this step)",
						in.Member.Name, self, d.o.paths.Join(in.DataDir)))
				}
				listed, name = true, in.Member.Name
			}
			for _, u := range lm.PeerURLs {
				boot.Members = append(boot.Members, kubespec.EtcdMember{Name: name, IP: hostOf(u), PeerPort: portOf(u)})
			}
		}
		if listed {
			return boot, "", nil
		}
		boot.Members = append(boot.Members, in.Member)
		return boot, self, nil
	}
	return fresh, "", nil
}

// addMember asks the running members to add this one. etcd refuses while the
// cluster has not been fully connected for a few seconds, so it tries until
// healthWait has passed.
func (d *EtcdDriver) addMember(ctx context.Context, cl *etcdClient, in kubespec.EtcdInputs, peer string) error {
	deadline := time.Now().Add(d.o.healthWait)
	var last error
	for {
		for _, m := range in.Members {
			if m.Name == in.Member.Name {
				continue
			}
			if last = cl.addMember(ctx, clientURL(m), peer); last == nil {
				d.o.log.Info("etcd member added", "member", in.Member.Name, "peer", peer, "via", m.Name)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("add etcd member %s: no running member took it: %w", in.Member.Name, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// waitHealthy waits until the started member serves with a quorum.
func (d *EtcdDriver) waitHealthy(ctx context.Context, cl *etcdClient, in kubespec.EtcdInputs) error {
	deadline := time.Now().Add(d.o.healthWait)
	var err error
	for {
		if err = cl.healthy(ctx, clientURL(in.Member)); err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	var peers []string
	for _, m := range in.Members {
		if m.Name != in.Member.Name {
			peers = append(peers, m.Name)
		}
	}
	return fmt.Errorf("etcd member %s started but is not healthy after %s; a quorum needs its peers %v running too: %w",
		in.Member.Name, d.o.healthWait, peers, err)
}
