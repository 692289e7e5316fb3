// Package membership owns liveness gossip between Plinth nodes.
//
// Every coordinator and every agent runs one Pool. Pools gossip over
// hashicorp/memberlist (SWIM): each member probes the others, and a member
// that stops answering is suspected and then declared dead. Gossip is always
// encrypted with a shared 32-byte key; packets that are not are refused.
//
// What it owns: the memberlist instance, its sockets and timers, the
// background join to seed addresses, and the stream of Events describing
// who joined, left or died.
//
// What it must never do: decide state. A "leave" Event is an observation,
// not a verdict. Turning "agent X died / came back" into a Reachable
// condition is the Raft leader coordinator's job; this package only reports.
package membership
