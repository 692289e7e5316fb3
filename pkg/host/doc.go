// Package host owns what Plinth configures and observes on the host itself, in the
// network namespace of the calling thread: the admin state and MTU of existing links,
// the IP addresses and static routes Plinth manages (the "host.network" step), and the
// Facts the agent reports (links, addresses, routes, CPUs, NUMA, memory, hugepages).
//
// It must never create, delete or rename links, never remove an address or route it
// did not add itself (ownership is kept in a state file), never switch network
// namespaces, and never start goroutines that talk netlink: which namespace is acted on
// is decided solely by the thread the caller runs on.
package host
