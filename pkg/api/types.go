// Package api defines the site manifest: the Kubernetes-style documents an operator
// writes (Site, Host), how they are decoded strictly, defaulted and validated.
//
// It owns the shape of desired state and the wording of every validation error. It must
// never perform I/O beyond reading the bytes it is given, so the coordinator, the CLI's
// --dry-run and the fuzzer all see exactly the same verdicts.
package api

import "time"

// APIVersion is the only manifest version this build understands.
const APIVersion = "plinth.dev/v1alpha1"

// Document kinds; what each means to decoding, storage, the API and the CLI is its
// row in the document kind table (kinds.go).
const (
	KindSite = "Site"
	KindHost = "Host"
)

// TypeMeta says what a document is.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ObjectMeta names a document. Generation is owned by the coordinator: it bumps on
// every spec change and is ignored on input.
type ObjectMeta struct {
	// Name identifies the document: a DNS label (lowercase letters, digits and '-').
	Name string `json:"name"`
	// Labels are the operator's own key/value pairs, stored with the document.
	Labels     map[string]string `json:"labels,omitempty"`
	Generation int64             `json:"generation,omitempty"`
}

// Site is the one document that describes a whole cloud: who the controllers are and
// what Kubernetes, Ceph, OVS and the charts should look like.
type Site struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     SiteSpec   `json:"spec"`
	Status   Status     `json:"status,omitempty"`

	// docIndex is the 1-based document this came from in the decoded file, so
	// validation errors can point at it; 0 when unknown. Not serialized.
	docIndex int
}

// SiteSpec is the desired state of a site.
type SiteSpec struct {
	// Controllers names the two hosts (by Host metadata.name) that run the coordinator
	// and the Kubernetes control plane. One is allowed for a lab or an all-in-one site.
	Controllers []string `json:"controllers"`
	// Witness optionally names a third host that votes in Raft and etcd but runs no
	// workloads, so the loss of any one controller keeps quorum.
	Witness    string          `json:"witness,omitempty"`
	Networks   []Network       `json:"networks,omitempty"`
	Policy     Policy          `json:"policy,omitempty"`
	Kubernetes *KubernetesSpec `json:"kubernetes,omitempty"`
	Ceph       *CephSpec       `json:"ceph,omitempty"`
	OVS        *OVSSpec        `json:"ovs,omitempty"`
}

// Network roles, StarlingX style.
const (
	NetworkOAM         = "oam"
	NetworkMgmt        = "mgmt"
	NetworkClusterHost = "cluster-host"
	NetworkData        = "data"
	NetworkOther       = "other"
)

// Network is declared once per site and referenced by host interfaces.
type Network struct {
	// Name is what host interfaces call the network by.
	Name string `json:"name"`
	// Role says what the network carries: oam, mgmt, cluster-host, data or other.
	Role string `json:"role"`
	// CIDR is the network's prefix, e.g. 10.0.0.0/24 (no host bits set).
	CIDR string `json:"cidr"`
	// Gateway of an oam network is the default route of the hosts that carry it,
	// unless a host declares its own.
	Gateway string `json:"gateway,omitempty"`
	// VLAN is the 802.1q ID the network is tagged with; a vlan interface that carries
	// the network and names no ID of its own takes this one.
	VLAN int `json:"vlan,omitempty"`
	// MTU of the network; an interface without its own takes the largest of its networks'.
	MTU int `json:"mtu,omitempty"`
	// Pool is the range the coordinator allocates host addresses from, for interfaces
	// that set allocate. Allocations are recorded in the replicated state, so an
	// address stays with its host when other hosts come and go.
	Pool *AddressPool `json:"pool,omitempty"`
}

// AddressPool is an inclusive range of addresses inside a network's CIDR.
type AddressPool struct {
	// Start and End are the first and last address handed out.
	Start string `json:"start"`
	End   string `json:"end"`
}

// Drift policies.
const (
	DriftReport = "report"
	DriftRepair = "repair"
)

// Policy says how the coordinator treats failures and drift.
type Policy struct {
	// Drift is "report" (raise Drifted, change nothing) or "repair" (re-apply). Default repair.
	Drift string `json:"drift,omitempty"`
	// DriftCheckSeconds is how often agents re-observe applied steps. Default 60.
	DriftCheckSeconds int `json:"driftCheckSeconds,omitempty"`
	// MaxAttempts bounds automatic retries before a step is Blocked. Default 5.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// RetryBaseSeconds is the first backoff; it doubles per attempt up to RetryMaxSeconds.
	RetryBaseSeconds int `json:"retryBaseSeconds,omitempty"`
	RetryMaxSeconds  int `json:"retryMaxSeconds,omitempty"`
}

// Host roles.
const (
	RoleController = "controller"
	RoleWorker     = "worker"
	RoleStorage    = "storage"
)

// Host is one physical machine of the site.
type Host struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     HostSpec   `json:"spec"`
	Status   Status     `json:"status,omitempty"`

	// docIndex is the 1-based document this came from in the decoded file, so
	// validation errors can point at it; 0 when unknown. Not serialized.
	docIndex int
}

// HostSpec is the desired state of one host.
type HostSpec struct {
	// Roles say what the host is for: controller, worker and/or storage (at least one).
	Roles []string `json:"roles"`
	// ManagementAddress is the IP the agent and coordinators reach this host on.
	ManagementAddress string      `json:"managementAddress"`
	Interfaces        []Interface `json:"interfaces,omitempty"`
	Routes            []Route     `json:"routes,omitempty"`
	// Rules are routing policy rules (ip rule), e.g. to send a network's traffic
	// through its own table.
	Rules []Rule `json:"rules,omitempty"`
	// Sysctls are kernel parameters by their dotted name (net.ipv4.ip_forward: "1").
	// They add to, and override, the ones Plinth sets for Kubernetes.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Hugepages reserves huge pages per page size and, optionally, NUMA node.
	Hugepages []Hugepages `json:"hugepages,omitempty"`
	// OVS overrides the site's OVS settings on this host.
	OVS *HostOVS `json:"ovs,omitempty"`
	// Labels are extra Kubernetes node labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// Interface types. Plinth configures an ethernet interface that exists already (a NIC,
// or a link made outside Plinth); it creates every other type, and deletes what it
// created once the interface leaves the manifest.
const (
	InterfaceEthernet = "ethernet"
	InterfaceBond     = "bond"
	InterfaceBridge   = "bridge"
	InterfaceVLAN     = "vlan"
	InterfaceMacvlan  = "macvlan"
	InterfaceVXLAN    = "vxlan"
)

// Interface is a host network interface Plinth configures.
type Interface struct {
	// Name is the kernel's interface name (at most 15 characters).
	Name string `json:"name"`
	// Type is ethernet (the default), bond, bridge, vlan, macvlan or vxlan.
	Type string `json:"type,omitempty"`
	// MAC matches an ethernet interface by address instead of name; on the types
	// Plinth creates it sets the address.
	MAC string `json:"mac,omitempty"`
	// MTU of the interface; unset takes the largest MTU of the networks it carries.
	MTU int `json:"mtu,omitempty"`
	// State is "up" (default) or "down".
	State string `json:"state,omitempty"`
	// Addresses in CIDR notation (10.0.0.5/24, fd00::5/64).
	Addresses []string `json:"addresses,omitempty"`
	// Networks names site networks carried on this interface.
	Networks []string `json:"networks,omitempty"`
	// Allocate takes one address from the pool of each carried network that has a
	// pool and in which this interface has no static address.
	Allocate bool `json:"allocate,omitempty"`
	// Members are the interfaces of a bond, or the ports of a bridge.
	Members []string `json:"members,omitempty"`
	// Parent is the lower interface of a vlan or macvlan, and the optional underlay
	// device of a vxlan.
	Parent string `json:"parent,omitempty"`
	// VLAN is a vlan interface's 802.1q ID; unset takes the VLAN of the network it carries.
	VLAN int `json:"vlan,omitempty"`
	// Bond, Macvlan and VXLAN hold the options of an interface of that type.
	Bond    *BondOptions    `json:"bond,omitempty"`
	Macvlan *MacvlanOptions `json:"macvlan,omitempty"`
	VXLAN   *VXLANOptions   `json:"vxlan,omitempty"`
}

// Bond modes Plinth supports.
const (
	BondLACP         = "802.3ad"
	BondActiveBackup = "active-backup"
	BondBalanceXOR   = "balance-xor"
)

// BondOptions configure a bond.
type BondOptions struct {
	// Mode is 802.3ad (default), active-backup or balance-xor.
	Mode string `json:"mode,omitempty"`
	// LACPRate is slow (default) or fast; 802.3ad only.
	LACPRate string `json:"lacpRate,omitempty"`
	// HashPolicy is layer2 (default), layer2+3, layer3+4, encap2+3 or encap3+4;
	// 802.3ad and balance-xor only.
	HashPolicy string `json:"hashPolicy,omitempty"`
	// MIIMon is the link monitoring interval in milliseconds; default 100.
	MIIMon int `json:"miimon,omitempty"`
}

// MacvlanOptions configure a macvlan.
type MacvlanOptions struct {
	// Mode is bridge (default), vepa, private or passthru.
	Mode string `json:"mode,omitempty"`
}

// VXLANOptions configure a vxlan.
type VXLANOptions struct {
	// VNI is the VXLAN network identifier, 1..16777215.
	VNI int `json:"vni"`
	// Local is the source address of the tunnel.
	Local string `json:"local,omitempty"`
	// Remote is the unicast peer or multicast group.
	Remote string `json:"remote,omitempty"`
	// Port is the UDP destination port; default 4789.
	Port int `json:"port,omitempty"`
}

// Route is a static route.
type Route struct {
	// To is the destination: "default" or a CIDR such as 10.1.0.0/16.
	To string `json:"to"`
	// Via is the gateway address.
	Via string `json:"via,omitempty"`
	// Dev is the interface the route leaves by.
	Dev string `json:"dev,omitempty"`
	// Metric orders routes to the same destination; lower wins.
	Metric int `json:"metric,omitempty"`
	// MTU is the route's path MTU.
	MTU int `json:"mtu,omitempty"`
	// Table is the routing table the route goes in; 0 for main.
	Table int `json:"table,omitempty"`
}

// Rule is a routing policy rule: packets that match every selector set look up Table.
// The family follows from and to; a rule with neither is IPv4 (use from: ::/0 for IPv6).
type Rule struct {
	// Priority orders rules and identifies this one; 1..32765.
	Priority int `json:"priority"`
	// From and To match the source and destination prefix.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// IIF and OIF match the incoming and outgoing interface by name.
	IIF string `json:"iif,omitempty"`
	OIF string `json:"oif,omitempty"`
	// FWMark matches the firewall mark.
	FWMark int `json:"fwmark,omitempty"`
	// Table is the routing table matching packets look up.
	Table int `json:"table"`
}

// Hugepages is a reservation of huge pages of one size.
type Hugepages struct {
	// Size is 2Mi or 1Gi (2048kB and 1048576kB are accepted too).
	Size string `json:"size"`
	// Count is the number of pages.
	Count int `json:"count"`
	// Node is the NUMA node; unset lets the kernel spread the pages over all nodes.
	Node *int `json:"node,omitempty"`
}

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Condition types.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionBlocked     = "Blocked"
	ConditionDegraded    = "Degraded"
	ConditionInvalidSpec = "InvalidSpec"
	ConditionReachable   = "Reachable"
	ConditionDrifted     = "Drifted"
	// ConditionFaultTolerant says whether the site survives losing any one controller.
	ConditionFaultTolerant = "FaultTolerant"
	// ConditionCertificateExpiring is True on a host whose agent or coordinator
	// certificate nears expiry without having been renewed (docs/operations.md).
	ConditionCertificateExpiring = "CertificateExpiring"
	// ConditionKubeCertificatesExpiring is True on a controller whose kubeadm
	// control-plane certificates expire within 30 days.
	ConditionKubeCertificatesExpiring = "KubeCertificatesExpiring"
	// ConditionCAExpiring is True on the site when the site CA nears expiry.
	ConditionCAExpiring = "CAExpiring"
)

// CertValidity is when one certificate is valid, as Plinth observed it: what
// `describe` shows and the expiry conditions judge. NotBefore is when it was issued
// (without the backdating for clock skew where Plinth knows better).
type CertValidity struct {
	// Name says which certificate: "agent", "coordinator", "site CA", or a file.
	Name      string    `json:"name"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
}

// Condition is a Kubernetes-style status condition.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitempty"`
}

// Status is the observed state of a Site or Host.
type Status struct {
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Conditions         []Condition `json:"conditions,omitempty"`
}

// Manifest is a decoded set of documents: at most one Site and any number of Hosts.
type Manifest struct {
	Site         *Site         `json:"site,omitempty"`
	Hosts        []Host        `json:"hosts,omitempty"`
	Applications []Application `json:"applications,omitempty"`
}
