package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/server"
)

// AdminCertTTL is the lifetime of the admin identity written by init.
const AdminCertTTL = 365 * 24 * time.Hour

// InitOptions are the inputs of `plinth-coordinator init`.
type InitOptions struct {
	DataDir string
	Config  Config
	// AdminIdentity is where the operator's identity file is written (0600).
	AdminIdentity string
}

// Init creates the site CA, this coordinator's identity, the data key and the admin
// identity, and marks this coordinator as the one that bootstraps the cluster.
// It refuses to run twice on the same data dir.
func Init(o InitOptions) error {
	cfg := o.Config
	cfg.Bootstrap = true
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Site == "" {
		return errors.New("coordinator: init: --site is required")
	}
	p := Paths(o.DataDir)
	if _, err := os.Stat(p.Config()); err == nil {
		return fmt.Errorf("coordinator: init: %s already holds a coordinator (%s exists); refusing to overwrite it", o.DataDir, p.Config())
	}
	if err := os.MkdirAll(p.PKI(), 0o700); err != nil {
		return fmt.Errorf("coordinator: init: %w", err)
	}
	now := time.Now()
	ca, err := pki.NewCA(cfg.Site, now)
	if err != nil {
		return err
	}
	if err := ca.Save(p.PKI()); err != nil {
		return err
	}
	own, err := issue(ca, cfg.Name, pki.RoleCoordinator, cfg.ips(), server.CoordinatorCertTTL, now)
	if err != nil {
		return err
	}
	if err := own.Save(p.PKI(), bundleName); err != nil {
		return err
	}
	key, err := pki.NewDataKey()
	if err != nil {
		return err
	}
	if err := pki.SaveDataKey(p.DataKey(), key); err != nil {
		return err
	}
	admin, err := issue(ca, "admin", pki.RoleAdmin, nil, AdminCertTTL, now)
	if err != nil {
		return err
	}
	if err := pki.NewIdentityFile([]string{cfg.APIAddr}, admin).Write(o.AdminIdentity); err != nil {
		return err
	}
	return cfg.save(o.DataDir)
}

func issue(ca *pki.CA, name, role string, ips []net.IP, ttl time.Duration, now time.Time) (pki.Bundle, error) {
	k, err := pki.NewKey()
	if err != nil {
		return pki.Bundle{}, err
	}
	certPEM, _, err := ca.Issue(pki.IssueRequest{Name: name, Role: role, IPs: ips, PublicKey: k.Public(), TTL: ttl, Now: now})
	if err != nil {
		return pki.Bundle{}, err
	}
	keyPEM, err := pki.EncodeKey(k)
	if err != nil {
		return pki.Bundle{}, err
	}
	return pki.Bundle{CAPEM: ca.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// JoinOptions are the inputs of `plinth-coordinator join`.
type JoinOptions struct {
	DataDir string
	Config  Config
	Token   string
	// JoinAddrs are the join ports ("ip:port") of existing coordinators.
	JoinAddrs []string
}

// Join enrols this coordinator with a token from `node enroll NAME --role coordinator`
// (or witness), and writes everything `serve` needs to be admitted to the cluster.
func Join(ctx context.Context, o JoinOptions) error {
	cfg := o.Config
	cfg.Bootstrap = false
	if err := cfg.validate(); err != nil {
		return err
	}
	p := Paths(o.DataDir)
	if _, err := os.Stat(p.Config()); err == nil {
		return fmt.Errorf("coordinator: join: %s already holds a coordinator (%s exists)", o.DataDir, p.Config())
	}
	tok, err := pki.ParseToken(o.Token)
	if err != nil {
		return fmt.Errorf("coordinator: join: %w", err)
	}
	if tok.Role != pki.RoleCoordinator {
		return fmt.Errorf("coordinator: join: token is for role %q; create one with `plinth-coordinator node enroll %s --role coordinator`", tok.Role, cfg.Name)
	}
	if tok.Name != cfg.Name {
		return fmt.Errorf("coordinator: join: token is bound to %q, but this coordinator is named %q (--name)", tok.Name, cfg.Name)
	}
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	resp, err := client.Enroll(ctx, o.JoinAddrs, tok, key, cfg.Name, cfg.ips())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.PKI(), 0o700); err != nil {
		return fmt.Errorf("coordinator: join: %w", err)
	}
	caCert, err := pki.ParseCert([]byte(resp.CA))
	if err != nil {
		return err
	}
	caKey, err := pki.ParseKey([]byte(resp.CAKey))
	if err != nil {
		return err
	}
	if err := (&pki.CA{Cert: caCert, Key: caKey, CertPEM: []byte(resp.CA)}).Save(p.PKI()); err != nil {
		return err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	if err := (pki.Bundle{CAPEM: []byte(resp.CA), CertPEM: []byte(resp.Cert), KeyPEM: keyPEM}).Save(p.PKI(), bundleName); err != nil {
		return err
	}
	if err := pki.SaveDataKey(p.DataKey(), resp.DataKey); err != nil {
		return err
	}
	cfg.Peers = resp.Config.Coordinators
	cfg.Site = caCert.Subject.Organization[0]
	return cfg.save(o.DataDir)
}
