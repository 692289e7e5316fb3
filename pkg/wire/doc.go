// Package wire is the coordinator API's vocabulary: the request and response bodies,
// the reports an agent sends about its steps, the enrolment messages and the paths
// they travel on. The server, the client, the agent and the operator CLI all import
// it, so each message has one definition both ends agree on.
//
// It owns the JSON shape of what crosses the network (field names, paths) and must
// never have effects, nor import Raft, Prometheus, pkg/server or pkg/state: the agent
// links it, and the agent must not link the coordinator. Changing a field name or a
// path here breaks agents of the previous release, so don't.
//
// Two kinds of value cross the wire but are defined elsewhere, because packages below
// this one need them too: driver.Result (what a run of a step produced, carried
// unchanged from the driver through StepReport and the FSM command into
// plan.Record.LastResult) and plan.Record/plan.State (a step as the state keeps it).
// The state's own records (hosts, events, tokens, and the host detail built from
// them) stay in pkg/state and pkg/server, because pkg/state links Raft.
package wire
