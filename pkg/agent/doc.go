// Package agent is the per-host daemon: it enrols the host with a join token, then
// fetches this host's steps from the coordinators, executes them through the drivers
// registered for their kinds, and reports starts, results, drift and facts back.
//
// What it owns: the host's identity on disk (key, certificate, agent.json), the order
// in which its own runnable steps execute, never losing a finished step's result
// (results are written to disk before they are sent), certificate renewal, and its
// gossip membership as "agent:<host>".
//
// What it must never do: decide what to run or when a step is done — the coordinator
// plans and the agent only runs what it is handed in state Ready, Running or Failed
// past RetryAt; act on another host; or log step inputs or outputs, which may hold
// secrets (it logs step id, kind and inputs hash only).
package agent
