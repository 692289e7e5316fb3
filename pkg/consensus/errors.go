package consensus

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ErrClosed is returned by operations on a closed Node.
var ErrClosed = errors.New("consensus: node is closed")

// NotLeaderError is returned by leader-only operations on a non-leader. The
// leader fields are empty when no leader is currently known. It unwraps to
// raft.ErrNotLeader.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "consensus: not the leader (no leader known)"
	}
	return fmt.Sprintf("consensus: not the leader (leader is %s at %s)", e.LeaderID, e.LeaderAddr)
}

func (e *NotLeaderError) Unwrap() error { return raft.ErrNotLeader }

// wrapErr turns a raft error for operation op into a consensus error.
// raft sentinels stay matchable with errors.Is.
func (n *Node) wrapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		addr, id := n.raft.LeaderWithID()
		return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("consensus: %s: %w", op, ErrClosed)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("consensus: %s: %w: %w", op, err, context.DeadlineExceeded)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("consensus: %s: outcome unknown: %w", op, err)
	default:
		return fmt.Errorf("consensus: %s: %w", op, err)
	}
}
