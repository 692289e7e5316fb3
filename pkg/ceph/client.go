package ceph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
)

// SystemConfigFile is where a Ceph host keeps its cluster configuration.
const SystemConfigFile = cephspec.SystemConfigFile

// Client holds the sessions the three drivers share: one per cluster, reused
// across steps and drift checks and dropped after a transport error.
type Client struct {
	dial Dialer
	conf string
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[string]Cluster
}

// Option configures a Client.
type Option func(*Client)

// WithConfigFile sets the ceph.conf used by steps that name none and no monitors;
// default SystemConfigFile.
func WithConfigFile(path string) Option { return func(c *Client) { c.conf = path } }

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// NewClient returns a Client that opens sessions with dial.
func NewClient(dial Dialer, opts ...Option) *Client {
	c := &Client{dial: dial, conf: SystemConfigFile, log: slog.Default(), sessions: map[string]Cluster{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// resolve fills in the defaults of conn: the admin user, and the client's config
// file when conn names neither a file nor monitors.
func (c *Client) resolve(conn cephspec.Conn) cephspec.Conn {
	if conn.User == "" {
		conn.User = cephspec.DefaultUser
	}
	if conn.ConfigFile == "" && len(conn.Monitors) == 0 {
		conn.ConfigFile = c.conf
	}
	return conn
}

func sessionKey(c cephspec.Conn) string {
	return strings.Join([]string{c.ConfigFile, c.Keyring, c.User, strings.Join(c.Monitors, ",")}, "\x00")
}

// session returns a session with the cluster, dialling when there is none.
func (c *Client) session(ctx context.Context, conn cephspec.Conn) (Cluster, error) {
	conn = c.resolve(conn)
	if conn.ConfigFile != "" {
		if _, err := os.Stat(conn.ConfigFile); err != nil {
			return nil, fmt.Errorf("ceph: no cluster configuration: %w (name monitors or a configFile in the manifest)", err)
		}
	}
	k := sessionKey(conn)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sessions[k]; ok {
		return s, nil
	}
	s, err := c.dial(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("ceph: connect as client.%s (%s): %w", conn.User, describe(conn), err)
	}
	c.sessions[k] = s
	return s, nil
}

func describe(c cephspec.Conn) string {
	var parts []string
	if len(c.Monitors) > 0 {
		parts = append(parts, "monitors "+strings.Join(c.Monitors, ","))
	}
	if c.ConfigFile != "" {
		parts = append(parts, "config "+c.ConfigFile)
	}
	if c.Keyring != "" {
		parts = append(parts, "keyring "+c.Keyring)
	}
	return strings.Join(parts, ", ")
}

// transportErrnos are the failures after which a session is not trusted again.
var transportErrnos = []syscall.Errno{syscall.ETIMEDOUT, syscall.ENOTCONN, syscall.ESHUTDOWN, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNREFUSED}

// forget closes and drops the session for conn after a transport failure, so the
// next step dials afresh. Refusals keep the session.
func (c *Client) forget(conn cephspec.Conn, err error) {
	if err == nil || !slices.ContainsFunc(transportErrnos, func(n syscall.Errno) bool { return errors.Is(err, n) }) {
		return
	}
	k := sessionKey(c.resolve(conn))
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sessions[k]; ok {
		s.Close()
		delete(c.sessions, k)
	}
}

// Close ends every session.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.sessions {
		s.Close()
		delete(c.sessions, k)
	}
}

// Drivers returns the ceph.health, ceph.pool and ceph.user drivers sharing c.
func (c *Client) Drivers() (*HealthDriver, *PoolDriver, *UserDriver) {
	return &HealthDriver{c}, &PoolDriver{c}, &UserDriver{c}
}
