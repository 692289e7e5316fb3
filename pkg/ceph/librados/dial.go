//go:build ceph

package librados

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"

	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
)

// Supported reports whether this binary was built with Ceph support.
const Supported = true

// Timeouts (seconds) that keep a blocking librados call from hanging a step: mount
// (connect), mon commands, OSD operations.
const (
	mountTimeout = "15"
	monOpTimeout = "30"
	osdOpTimeout = "30"
)

// Dial connects to the cluster conn describes.
func Dial(ctx context.Context, conn cephspec.Conn) (ceph.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return DialKey(conn, "")
}

// DialKey connects as conn.User; a non-empty key is used instead of any keyring
// (tests connect as a restricted user with the key a step produced).
func DialKey(conn cephspec.Conn, key string) (*Session, error) {
	user := conn.User
	if user == "" {
		user = cephspec.DefaultUser
	}
	c, err := rados.NewConnWithUser(user)
	if err != nil {
		return nil, errnoErr("new connection", err)
	}
	opts := [][2]string{
		{"client_mount_timeout", mountTimeout},
		{"rados_mon_op_timeout", monOpTimeout},
		{"rados_osd_op_timeout", osdOpTimeout},
	}
	if conn.ConfigFile != "" {
		if err := c.ReadConfigFile(conn.ConfigFile); err != nil {
			c.Shutdown()
			return nil, errnoErr("read "+conn.ConfigFile, err)
		}
	}
	if len(conn.Monitors) > 0 {
		opts = append(opts, [2]string{"mon_host", strings.Join(conn.Monitors, ",")})
	}
	if conn.Keyring != "" {
		opts = append(opts, [2]string{"keyring", conn.Keyring})
	}
	if key != "" {
		opts = append(opts, [2]string{"keyring", "/dev/null"}, [2]string{"key", key})
	}
	for _, o := range opts {
		if err := c.SetConfigOption(o[0], o[1]); err != nil {
			c.Shutdown()
			return nil, errnoErr("set "+o[0], err)
		}
	}
	if err := c.Connect(); err != nil {
		c.Shutdown()
		return nil, errnoErr("connect", err)
	}
	return &Session{conn: c}, nil
}

// Session is a connected librados handle. It is not safe for concurrent use after
// Close; pkg/ceph never shares one across goroutines.
type Session struct {
	conn *rados.Conn
}

var _ ceph.Cluster = (*Session)(nil)

// Conn is the underlying go-ceph connection, for tests.
func (s *Session) Conn() *rados.Conn { return s.conn }

// MonCommand implements ceph.Cluster.
func (s *Session) MonCommand(cmd []byte) ([]byte, error) {
	out, status, err := s.conn.MonCommand(cmd)
	if err != nil {
		ce := &ceph.CommandError{Prefix: prefix(cmd), Status: strings.TrimSpace(status)}
		if n, ok := errno(err); ok {
			ce.Errno = n
		} else {
			return nil, fmt.Errorf("%s: %w", ce.Prefix, err)
		}
		return nil, ce
	}
	return out, nil
}

// ioctx opens pool after catching up with the OSD map: a session that outlives a
// pool (deleted and created again, even by itself through a mon command) would
// otherwise address the old pool and see ENOENT.
func (s *Session) ioctx(pool string) (*rados.IOContext, error) {
	if err := s.conn.WaitForLatestOSDMap(); err != nil {
		return nil, errnoErr("wait for the latest OSD map", err)
	}
	ioctx, err := s.conn.OpenIOContext(pool)
	if err != nil {
		return nil, errnoErr("open pool "+pool, err)
	}
	return ioctx, nil
}

// RBDPoolInit implements ceph.Cluster.
func (s *Session) RBDPoolInit(pool string) error {
	ioctx, err := s.ioctx(pool)
	if err != nil {
		return err
	}
	defer ioctx.Destroy()
	return errnoErr("rbd pool init", rbd.PoolInit(ioctx, false))
}

// RBDImages implements ceph.Cluster.
func (s *Session) RBDImages(pool string) ([]string, error) {
	ioctx, err := s.ioctx(pool)
	if err != nil {
		return nil, err
	}
	defer ioctx.Destroy()
	names, err := rbd.GetImageNames(ioctx)
	if err != nil && !errors.Is(err, rbd.ErrNotFound) {
		return nil, errnoErr("list images", err)
	}
	trash, err := rbd.GetTrashList(ioctx)
	if err != nil && !errors.Is(err, rbd.ErrNotFound) {
		return nil, errnoErr("list trash", err)
	}
	for _, t := range trash {
		names = append(names, t.Name+" (in trash)")
	}
	return names, nil
}

// ObjectExists implements ceph.Cluster.
func (s *Session) ObjectExists(pool, oid string) (bool, error) {
	ioctx, err := s.ioctx(pool)
	if err != nil {
		return false, err
	}
	defer ioctx.Destroy()
	_, err = ioctx.Stat(oid)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, rados.ErrNotFound):
		return false, nil
	}
	return false, errnoErr("stat "+oid, err)
}

// Close implements ceph.Cluster.
func (s *Session) Close() {
	if s.conn != nil {
		s.conn.Shutdown()
		s.conn = nil
	}
}

// errno extracts the errno go-ceph reports (a negative return code).
func errno(err error) (syscall.Errno, bool) {
	var ec interface{ ErrorCode() int }
	if errors.As(err, &ec) {
		n := ec.ErrorCode()
		if n < 0 {
			n = -n
		}
		return syscall.Errno(n), true
	}
	return 0, false
}

// errnoErr wraps a go-ceph error so errors.Is(err, syscall.EXXX) works.
func errnoErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if n, ok := errno(err); ok {
		return fmt.Errorf("%s: %w", what, n)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func prefix(cmd []byte) string {
	var c struct {
		Prefix string `json:"prefix"`
	}
	if json.Unmarshal(cmd, &c) == nil && c.Prefix != "" {
		return c.Prefix
	}
	return "mon command"
}
