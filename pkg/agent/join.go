package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/pki"
)

// JoinOptions are the inputs of `plinth-agent join`.
type JoinOptions struct {
	StateDir string
	Name     string
	Token    string
	// JoinAddrs are the coordinators' enrolment addresses (ip:port, port 7441 by default).
	JoinAddrs []string
	// IPs are optional IP SANs for the agent certificate.
	IPs []net.IP
	// Force enrols again even if a valid identity exists.
	Force bool
	// SourceIP, if set, is the local address to enrol from (a host with several
	// addresses may want its management one); nil lets the kernel choose.
	SourceIP net.IP
}

// ErrAlreadyEnrolled is returned (wrapped) by Join when the host already holds a
// valid identity for the same name and Force is not set. Callers may treat it as
// success: nothing was changed.
var ErrAlreadyEnrolled = errors.New("already enrolled")

// Join enrols this host with a one-time token: it generates the host's key (which
// never leaves StateDir/pki, mode 0600), has the coordinators sign it, and records
// the certificate, the coordinators and the gossip key for Run.
func Join(ctx context.Context, o JoinOptions) error {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if len(o.JoinAddrs) == 0 {
		return errors.New("agent: join: no coordinator join address given (--coordinator ip:7441)")
	}
	tok, err := pki.ParseToken(o.Token)
	if err != nil {
		return fmt.Errorf("agent: join: token: %w", err)
	}
	if tok.Role != pki.RoleAgent {
		return fmt.Errorf("agent: join: token is for role %q, not agent; coordinators join with `plinth-coordinator join`", tok.Role)
	}
	if tok.Name != o.Name {
		return fmt.Errorf("agent: join: token is bound to host %q, but this host is named %q: pass --name %s or create a token for %s with `plinth-coordinator node enroll %s`", tok.Name, o.Name, tok.Name, o.Name, o.Name)
	}
	if err := checkEnrolled(o); err != nil {
		return err
	}
	if tok.Expired(time.Now()) {
		return fmt.Errorf("agent: join: token expired at %s; create a new one with `plinth-coordinator node enroll %s`", tok.Expires.Format(time.RFC3339), tok.Name)
	}
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	resp, err := client.EnrollFrom(ctx, o.SourceIP, o.JoinAddrs, tok, key, o.Name, o.IPs)
	if err != nil {
		if client.StatusOf(err) == 0 {
			return fmt.Errorf("agent: join: %w (--coordinator takes the coordinators' enrolment addresses, port 7441 by default)", err)
		}
		return fmt.Errorf("agent: join: %w", err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return fmt.Errorf("agent: join: %w", err)
	}
	if err := saveBundle(o.StateDir, pki.Bundle{CAPEM: []byte(resp.CA), CertPEM: []byte(resp.Cert), KeyPEM: keyPEM}); err != nil {
		return fmt.Errorf("agent: join: %w", err)
	}
	if err := saveGossipKey(o.StateDir, resp.Config.GossipKey); err != nil {
		return err
	}
	id := agentid.Identity{Name: o.Name, Coordinators: resp.Config.Coordinators, GossipSeeds: resp.Config.GossipSeeds}
	if len(id.Coordinators) == 0 {
		return errors.New("agent: join: enrolled, but the coordinators sent no API addresses; check `plinth-coordinator members`")
	}
	return id.Save(o.StateDir)
}

// checkEnrolled refuses to replace a valid identity unless forced.
func checkEnrolled(o JoinOptions) error {
	if o.Force {
		return nil
	}
	id, err := agentid.Load(o.StateDir)
	if err != nil {
		return nil // not enrolled (or unreadable): enrol afresh
	}
	b, err := LoadBundle(o.StateDir)
	if err != nil {
		return nil
	}
	cert, err := pki.ParseCert(b.CertPEM)
	if err != nil || !time.Now().Before(cert.NotAfter) {
		return nil
	}
	if id.Name != o.Name || cert.Subject.CommonName != o.Name {
		return fmt.Errorf("agent: join: %s is enrolled as %q; pass --force to enrol it as %q instead", o.StateDir, id.Name, o.Name)
	}
	return fmt.Errorf("agent: join: %s is %w as %q (certificate valid until %s); pass --force to enrol again", o.StateDir, ErrAlreadyEnrolled, id.Name, cert.NotAfter.Format(time.RFC3339))
}
