// Package host owns what Plinth configures and observes on the host itself: the
// links, memberships, addresses, routes and policy rules of the "host.network" step,
// the kernel parameters of "host.sysctl", the huge page pools of "host.hugepages",
// and the Facts the agent reports (links, addresses, routes, CPUs and their topology,
// NUMA, memory, hugepages). The steps' inputs are in pkg/host/hostspec.
//
// Network work happens in the network namespace of the calling thread, observed,
// diffed, applied and verified through netlink. Plinth creates bridges, bonds, VLANs,
// macvlans and vxlans and records what it created (and every address, route, rule and
// membership it added) in a state file: it deletes only what that file says it added,
// configures existing links but never creates, deletes or renames them, and never
// replaces a link it did not create. With a reachability probe, a run that leaves the
// host without a coordinator is undone.
//
// It must never switch network namespaces, nor start goroutines that talk netlink or
// open /proc/sys/net: which namespace is acted on is decided solely by the thread the
// caller runs on.
package host
