package consensus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Config configures a Node. Zero timing knobs mean production defaults.
type Config struct {
	NodeID        string // raft server ID (coordinator name)
	BindAddr      string // host:port to listen on for raft (TLS)
	AdvertiseAddr string // address peers dial; defaults to the listener's address
	DataDir       string // holds the raft log (wal/), its lock and snapshots/

	// TLS is used as-is for both listening and dialing. It must carry
	// Certificates (or GetCertificate and GetClientCertificate), RootCAs,
	// ClientCAs and ClientAuth=RequireAndVerifyClientCert. Dialed peers are
	// verified against the host of their advertised address unless
	// TLS.ServerName is set.
	TLS *tls.Config

	// VerifyPeer, if set, is applied to the verified leaf certificate of
	// every peer, after the handshake on accept and on dial (e.g. to require
	// the coordinator role). A non-nil error refuses the connection.
	VerifyPeer func(*x509.Certificate) error

	FSM    raft.FSM
	Logger *slog.Logger // nil = slog.Default()

	// Witness marks this node as the witness: while it is leader it hands
	// leadership to a healthy non-witness voter.
	Witness bool
	// IsWitness tells which other servers are witnesses. It must be fast and
	// safe for concurrent use. nil = none.
	IsWitness func(id raft.ServerID) bool

	HeartbeatTimeout   time.Duration // default 1s
	ElectionTimeout    time.Duration // default max(1s, HeartbeatTimeout)
	LeaderLeaseTimeout time.Duration // default min(500ms, HeartbeatTimeout)
	CommitTimeout      time.Duration // default 50ms
	SnapshotThreshold  uint64        // default 8192
	SnapshotInterval   time.Duration // default 120s
}

const (
	snapshotsRetained = 3
	transportMaxPool  = 3
	logCacheEntries   = 512 // recent log entries kept in memory (raft.LogCache)
	transportTimeout  = 10 * time.Second
	// snapshotsDir and snapshotTmpSuffix are where raft.FileSnapshotStore keeps
	// snapshots and how it names one being written.
	snapshotsDir      = "snapshots"
	snapshotTmpSuffix = ".tmp"
)

func (c *Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// raftConfig builds the raft configuration from c.
func (c *Config) raftConfig() (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.Logger = newHCLog(c.logger(), "raft")
	if c.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = c.HeartbeatTimeout
	}
	rc.ElectionTimeout = max(rc.ElectionTimeout, rc.HeartbeatTimeout)
	if c.ElectionTimeout > 0 {
		rc.ElectionTimeout = c.ElectionTimeout
	}
	rc.LeaderLeaseTimeout = min(rc.LeaderLeaseTimeout, rc.HeartbeatTimeout)
	if c.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	}
	if c.CommitTimeout > 0 {
		rc.CommitTimeout = c.CommitTimeout
	}
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.SnapshotInterval > 0 {
		rc.SnapshotInterval = c.SnapshotInterval
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("consensus: raft config: %w", err)
	}
	return rc, nil
}

// validate checks what Open needs.
func (c *Config) validate() error {
	if c.NodeID == "" {
		return errors.New("consensus: config: NodeID is required")
	}
	if c.DataDir == "" {
		return errors.New("consensus: config: DataDir is required")
	}
	if c.BindAddr == "" {
		return errors.New("consensus: config: BindAddr is required")
	}
	if c.FSM == nil {
		return errors.New("consensus: config: FSM is required")
	}
	if c.AdvertiseAddr != "" {
		if err := checkAdvertisable(c.AdvertiseAddr); err != nil {
			return err
		}
	}
	return validateTLS(c.TLS)
}

func validateTLS(t *tls.Config) error {
	switch {
	case t == nil:
		return errors.New("consensus: config: TLS is required")
	case len(t.Certificates) == 0 && (t.GetCertificate == nil || t.GetClientCertificate == nil):
		return errors.New("consensus: config: TLS needs Certificates (or GetCertificate and GetClientCertificate)")
	case t.RootCAs == nil:
		return errors.New("consensus: config: TLS needs RootCAs")
	case t.ClientCAs == nil:
		return errors.New("consensus: config: TLS needs ClientCAs")
	case t.ClientAuth != tls.RequireAndVerifyClientCert:
		return errors.New("consensus: config: TLS needs ClientAuth=RequireAndVerifyClientCert")
	case t.InsecureSkipVerify:
		return errors.New("consensus: config: TLS must not set InsecureSkipVerify")
	}
	return nil
}

// checkAdvertisable rejects addresses peers could not dial.
func checkAdvertisable(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("consensus: advertise address %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("consensus: advertise address %q: invalid port", addr)
	}
	if host == "" {
		return fmt.Errorf("consensus: advertise address %q: missing host", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("consensus: advertise address %q: unspecified IP is not advertisable", addr)
	}
	return nil
}
