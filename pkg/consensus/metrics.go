package consensus

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Metrics is a point-in-time view of a node for export as gauges.
type Metrics struct {
	State             string // "Follower", "Candidate", "Leader", "Shutdown"
	IsLeader          bool
	Witness           bool
	Term              uint64
	LastIndex         uint64
	CommitIndex       uint64
	AppliedIndex      uint64
	LastSnapshotIndex uint64
	LeaderID          string
	LeaderAddr        string
	Voters            int       // voters in the latest configuration, this node included
	LastContact       time.Time // last contact with a leader (zero if never)
}

// Observe returns current metrics. Cheap enough for every scrape.
func (n *Node) Observe() Metrics {
	m := Metrics{State: raft.Shutdown.String(), Witness: n.cfg.Witness}
	if n.isClosed() {
		return m
	}
	st := n.raft.State()
	addr, id := n.raft.LeaderWithID()
	m.State = st.String()
	m.IsLeader = st == raft.Leader
	m.Term = n.raft.CurrentTerm()
	m.LastIndex = n.raft.LastIndex()
	m.CommitIndex = n.raft.CommitIndex()
	m.AppliedIndex = n.raft.AppliedIndex()
	m.LeaderID, m.LeaderAddr = string(id), string(addr)
	m.LastContact = n.raft.LastContact()
	if v, err := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		m.LastSnapshotIndex = v
	}
	if c, err := n.configuration(); err == nil {
		for _, s := range c.Servers {
			if s.Suffrage == raft.Voter {
				m.Voters++
			}
		}
	}
	return m
}

// LogBytesWritten is how many bytes of encoded log entries this node appended to
// its raft log since it opened (raft-wal's count; segment headers and index not
// included). Cheap enough for every scrape.
func (n *Node) LogBytesWritten() uint64 {
	return n.store.stats.Summary().Counters["log_entry_bytes_written"]
}
