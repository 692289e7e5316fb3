// Package hostspec is the contract between the planner and the host drivers: the
// host.network, host.sysctl and host.hugepages step kinds and the plain-data inputs
// the planner renders for them, and the facts agents report about their hosts.
//
// It is kept apart from pkg/host so that the planner, which runs inside the
// coordinator's Raft FSM, renders host steps without linking netlink. It imports no
// driver and must never do I/O; pkg/host validates these inputs against the kernel.
package hostspec

// Step kinds.
const (
	KindNetwork   = "host.network"
	KindSysctl    = "host.sysctl"
	KindHugepages = "host.hugepages"
)

// NetworkInputs is what the planner renders for a host.network step: the complete
// desired set of links, addresses, routes and policy rules Plinth manages on one host.
type NetworkInputs struct {
	Links  []LinkSpec  `json:"links,omitempty"`
	Routes []RouteSpec `json:"routes,omitempty"`
	Rules  []RuleSpec  `json:"rules,omitempty"`
}

// Link kinds Plinth creates, owns and deletes again. The empty kind is a link that
// exists already (a NIC, a veth made by someone else): Plinth configures it but never
// creates or deletes it.
const (
	LinkBridge  = "bridge"
	LinkBond    = "bond"
	LinkVLAN    = "vlan"
	LinkMacvlan = "macvlan"
	LinkVXLAN   = "vxlan"
)

// LinkSpec is one link to configure. An existing link (Kind "") is found by Name or,
// when set, by MAC; a link of another kind is found by Name and created if missing,
// with MAC (if set) as its address.
type LinkSpec struct {
	Name string `json:"name"`
	MAC  string `json:"mac,omitempty"`
	// Kind is "" for an existing link, or bridge, bond, vlan, macvlan or vxlan.
	Kind string `json:"kind,omitempty"`
	// MTU 0 leaves the MTU alone.
	MTU int `json:"mtu,omitempty"`
	// Up true brings the link up, false sets it down.
	Up bool `json:"up"`
	// Addresses in CIDR notation; Plinth adds missing ones and removes the ones it added
	// earlier that are no longer listed, never others.
	Addresses []string `json:"addresses,omitempty"`
	// Master names the bond or bridge this link is a member of.
	Master string `json:"master,omitempty"`
	// Parent names the lower link of a vlan or macvlan, or a vxlan's underlay device.
	Parent  string     `json:"parent,omitempty"`
	VLANID  int        `json:"vlanId,omitempty"`
	Bond    *BondSpec  `json:"bond,omitempty"`
	Macvlan string     `json:"macvlanMode,omitempty"`
	VXLAN   *VXLANSpec `json:"vxlan,omitempty"`
}

// BondSpec holds a bond's mode and options, in the kernel's spelling.
type BondSpec struct {
	Mode       string `json:"mode"`                 // 802.3ad, active-backup, balance-xor
	LACPRate   string `json:"lacpRate,omitempty"`   // slow, fast
	HashPolicy string `json:"hashPolicy,omitempty"` // layer2, layer3+4, ...
	MIIMon     int    `json:"miimon,omitempty"`
}

// VXLANSpec holds a vxlan's tunnel parameters.
type VXLANSpec struct {
	VNI    int    `json:"vni"`
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"` // unicast peer or multicast group
	Port   int    `json:"port,omitempty"`
}

// RouteSpec is one static route. Dst "default" or a CIDR.
type RouteSpec struct {
	Dst     string `json:"dst"`
	Gateway string `json:"gateway,omitempty"`
	Dev     string `json:"dev,omitempty"`
	Metric  int    `json:"metric,omitempty"`
	MTU     int    `json:"mtu,omitempty"`
	Table   int    `json:"table,omitempty"`
}

// RuleSpec is one routing policy rule; every selector set must match for the rule to
// send a packet to Table. From and To are CIDRs; with neither the rule is IPv4.
type RuleSpec struct {
	Priority int    `json:"priority"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	IIF      string `json:"iif,omitempty"`
	OIF      string `json:"oif,omitempty"`
	FWMark   int    `json:"fwmark,omitempty"`
	Table    int    `json:"table"`
}

// SysctlInputs is what the planner renders for a host.sysctl step.
type SysctlInputs struct {
	Sysctls []SysctlSpec `json:"sysctls"`
}

// SysctlSpec is one kernel parameter by its dotted name.
type SysctlSpec struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Optional skips a key this kernel does not have (e.g. net.bridge.* without
	// br_netfilter) instead of failing.
	Optional bool `json:"optional,omitempty"`
}

// HugepagesInputs is what the planner renders for a host.hugepages step.
type HugepagesInputs struct {
	Pages []HugepageSpec `json:"pages"`
}

// HugepageSpec reserves Count pages of SizeKB, on NUMA node Node or, when Node is
// nil, system-wide.
type HugepageSpec struct {
	SizeKB int  `json:"sizeKB"`
	Node   *int `json:"node,omitempty"`
	Count  int  `json:"count"`
}
