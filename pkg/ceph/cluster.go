package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
)

// Cluster is one authenticated librados session. Implementations block; callers
// bound them with librados timeouts, not with the context.
type Cluster interface {
	// MonCommand sends one JSON mon command. A refusal is a *CommandError.
	MonCommand(cmd []byte) (out []byte, err error)
	// RBDPoolInit prepares pool for RBD images (rbd_pool_init).
	RBDPoolInit(pool string) error
	// RBDImages lists pool's images, those in its trash included.
	RBDImages(pool string) ([]string, error)
	// ObjectExists reports whether object oid exists in pool.
	ObjectExists(pool, oid string) (bool, error)
	Close()
}

// Dialer opens a session with the cluster conn describes, fully resolved (see Client).
type Dialer func(ctx context.Context, conn cephspec.Conn) (Cluster, error)

// CommandError is a mon command the cluster refused: Errno is positive (syscall.ENOENT...)
// and Status is Ceph's explanation.
type CommandError struct {
	Prefix string
	Errno  syscall.Errno
	Status string
}

func (e *CommandError) Error() string {
	if e.Status == "" {
		return fmt.Sprintf("%s: %v", e.Prefix, e.Errno)
	}
	return fmt.Sprintf("%s: %v: %s", e.Prefix, e.Errno, e.Status)
}

// Unwrap lets errors.Is(err, syscall.ENOENT) work.
func (e *CommandError) Unwrap() error { return e.Errno }

// isErrno reports whether err is a refusal with errno n.
func isErrno(err error, n syscall.Errno) bool {
	var ce *CommandError
	return errors.As(err, &ce) && ce.Errno == n
}

// cmd is one mon command: its prefix and arguments.
type cmd map[string]any

// mon runs c and decodes its JSON output into out (when not nil).
func mon(cl Cluster, c cmd, out any) error {
	c["format"] = "json"
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	res, err := cl.MonCommand(b)
	if err != nil {
		return err
	}
	if out == nil || len(res) == 0 {
		return nil
	}
	if err := json.Unmarshal(res, out); err != nil {
		return fmt.Errorf("%s: decode output: %w", c["prefix"], err)
	}
	return nil
}
