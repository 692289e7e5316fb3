// Package consensus replicates the Plinth coordinator's state between the two
// HA controllers and the optional witness voter, using hashicorp/raft.
//
// It owns:
//   - the Raft log and stable store (DataDir/wal, hashicorp/raft-wal, under an
//     exclusive lock on DataDir/lock; a raft-boltdb DataDir/raft.db of an
//     earlier version is migrated on open) and the snapshot store
//     (DataDir/snapshots, 3 retained);
//   - the mutually authenticated TLS transport between voters: every
//     connection, accepted or dialed, must present a certificate chained to
//     the configured CA and pass the optional VerifyPeer check;
//   - leader-loss detection on a closed connection (leaderloss.go), so a
//     crashed leader is replaced in one election round;
//   - leadership observation (LeaderCh/WatchLeadership) and the witness's
//     hand-off of leadership to a healthy non-witness voter;
//   - operator-fenced single-node recovery (RecoverSingle).
//
// It must never:
//   - interpret commands: the FSM supplied by the caller does that;
//   - bootstrap or recover on its own: those are explicit caller/operator
//     decisions (Bootstrap, RecoverSingle);
//   - speak plaintext or skip peer verification;
//   - touch files outside DataDir, or export metrics itself (Observe returns
//     values for the server to export);
//   - panic: failures are returned as errors prefixed "consensus:".
//
// Goroutines started here are owned by a Node (or its stream layer) and are
// stopped by Node.Close.
package consensus
