package api

import "slices"

// OVSSpec is the Open vSwitch datapath Plinth prepares on data hosts (hosts with an
// interface on a data network, or with spec.ovs of their own) before Kubernetes and
// the Neutron charts take over. OVS runs on the host, not in a container.
type OVSSpec struct {
	// DPDK turns on the userspace DPDK datapath (other_config:dpdk-init).
	DPDK        bool `json:"dpdk,omitempty"`
	OVSSettings `json:",inline"`
	// Bridges are created with the datapath they name (netdev unless set).
	Bridges []OVSBridge `json:"bridges,omitempty"`
}

// HostOVS overrides the site's OVS settings on one host: set fields win, a bridge of
// the same name replaces the site's bridge fields that are set, and a port of the same
// name replaces the site's port (PCI addresses and CPU lists differ per host).
type HostOVS struct {
	// DPDK overrides the site's dpdk; unset keeps it.
	DPDK        *bool `json:"dpdk,omitempty"`
	OVSSettings `json:",inline"`
	Bridges     []OVSBridge `json:"bridges,omitempty"`
}

// OVSSettings are the Open_vSwitch other_config values Plinth manages. Unset fields
// are left to OVS's own defaults.
type OVSSettings struct {
	// SocketMemMB is dpdk-socket-mem: hugepage memory preallocated per NUMA node, one
	// value per node (0 for a node without DPDK ports). A single value only covers
	// node 0, so a NIC on node 1 would get no memory: the driver refuses it on a host
	// with more nodes.
	SocketMemMB []int `json:"socketMemMB,omitempty"`
	// SocketLimitMB is dpdk-socket-limit, per NUMA node like SocketMemMB (0: no limit).
	SocketLimitMB []int `json:"socketLimitMB,omitempty"`
	// HugepageDir is dpdk-hugepage-dir, the hugetlbfs mount DPDK uses.
	HugepageDir string `json:"hugepageDir,omitempty"`
	// PMDCPUs are the CPUs reserved for the vswitch's poll-mode threads, as a Linux
	// cpulist ("2-3,18-19"); pmd-cpu-mask is derived from them and the host's CPUs.
	PMDCPUs string `json:"pmdCPUs,omitempty"`
	// PMDPerNUMA, when set, takes only this many PMD CPUs on each NUMA node that has
	// socket memory (the lowest-numbered reserved ones).
	PMDPerNUMA int `json:"pmdPerNUMA,omitempty"`
	// LcoreCPUs pin DPDK's non-PMD threads (dpdk-lcore-mask), as a cpulist.
	LcoreCPUs string `json:"lcoreCPUs,omitempty"`
	// PMDMaxSleepUs is pmd-maxsleep: how long an idle PMD may sleep (0..10000 µs), so
	// a quiet vswitch does not spin its cores at 100 %.
	PMDMaxSleepUs int `json:"pmdMaxSleepUs,omitempty"`
	// DPDKExtra is dpdk-extra: more EAL arguments.
	DPDKExtra string `json:"dpdkExtra,omitempty"`
	// VhostSockDir is vhost-sock-dir, relative to OVS's run directory.
	VhostSockDir string `json:"vhostSockDir,omitempty"`
}

// OVS datapath types.
const (
	OVSDatapathNetdev = "netdev" // userspace: DPDK, or plain netdev without it
	OVSDatapathSystem = "system" // the kernel module
)

// OVSBridge is one OVS bridge.
type OVSBridge struct {
	// Name of the bridge; a host's bridge of the same name overrides the site's.
	Name string `json:"name"`
	// Datapath is netdev (default) or system. system needs the openvswitch kernel
	// module: without it OVS accepts the bridge and never creates it.
	Datapath string    `json:"datapath,omitempty"`
	Ports    []OVSPort `json:"ports,omitempty"`
}

// OVS port and interface types.
const (
	OVSPortDPDK     = "dpdk"     // a DPDK NIC, by PCI address or devargs
	OVSPortSystem   = "system"   // an existing Linux interface
	OVSPortInternal = "internal" // a port OVS creates as a host interface
)

// OVS bond modes and LACP settings.
const (
	OVSBondActiveBackup = "active-backup"
	OVSBondBalanceSLB   = "balance-slb"
	OVSBondBalanceTCP   = "balance-tcp"
	OVSLACPActive       = "active"
	OVSLACPPassive      = "passive"
	OVSLACPOff          = "off"
)

// OVSInterface is what a port or a bond member attaches.
type OVSInterface struct {
	// Name of the port or interface in OVS (for a system port, the Linux interface).
	Name string `json:"name"`
	// Type is dpdk (default when pci or devargs is set), system (default otherwise)
	// or internal.
	Type string `json:"type,omitempty"`
	// PCI is a DPDK NIC's address (0000:03:00.0), used as its dpdk-devargs.
	PCI string `json:"pci,omitempty"`
	// Devargs are raw dpdk-devargs instead of PCI, e.g. a vdev "net_null0,no-rx=1".
	Devargs string `json:"devargs,omitempty"`
	// RxQueues is a DPDK interface's n_rxq.
	RxQueues int `json:"rxQueues,omitempty"`
	// MTU is mtu_request.
	MTU int `json:"mtu,omitempty"`
}

// OVSPort is one port of a bridge: a single interface, or a bond of several.
type OVSPort struct {
	OVSInterface `json:",inline"`
	// VLAN makes the port an access port of that VLAN (tag).
	VLAN int `json:"vlan,omitempty"`
	// Trunks limits a trunk port to these VLANs.
	Trunks []int `json:"trunks,omitempty"`
	// Bond makes the port a bond of several interfaces instead of one.
	Bond *OVSBond `json:"bond,omitempty"`
}

// OVSBond makes a port a bond of Members.
type OVSBond struct {
	// Mode is active-backup (default), balance-slb or balance-tcp (needs LACP).
	Mode string `json:"mode,omitempty"`
	// LACP is active, passive or off (default).
	LACP string `json:"lacp,omitempty"`
	// LACPTime is fast (1 s) or slow (30 s, OVS's default).
	LACPTime string `json:"lacpTime,omitempty"`
	// Members are the bonded interfaces.
	Members []OVSInterface `json:"members"`
}

// OVS defaults.
const (
	DefaultOVSDatapath = OVSDatapathNetdev
	DefaultOVSBondMode = OVSBondActiveBackup
)

// Effective returns the spec with its bridges' defaults applied (see
// OVSBridge.Effective). The planner applies them after merging a host's bridges onto
// the site's, because a host bridge's unset datapath keeps the site's.
func (o OVSSpec) Effective() OVSSpec {
	o.Bridges = slices.Clone(o.Bridges)
	for i := range o.Bridges {
		o.Bridges[i] = o.Bridges[i].Effective()
	}
	return o
}

// Effective returns the bridge with the netdev datapath unless set, and its ports
// with their interface types and bond mode; the lists are copied, never shared.
func (b OVSBridge) Effective() OVSBridge {
	setString(&b.Datapath, DefaultOVSDatapath)
	b.Ports = slices.Clone(b.Ports)
	for i := range b.Ports {
		p := &b.Ports[i]
		if p.Bond == nil {
			p.Type = OVSInterfaceType(p.OVSInterface)
		} else {
			bond := *p.Bond
			setString(&bond.Mode, DefaultOVSBondMode)
			bond.Members = slices.Clone(bond.Members)
			for j := range bond.Members {
				bond.Members[j].Type = OVSInterfaceType(bond.Members[j])
			}
			p.Bond = &bond
		}
	}
	return b
}

// OVSInterfaceType is the interface's type with the default applied: dpdk when it
// names a PCI address or devargs, system otherwise.
func OVSInterfaceType(in OVSInterface) string {
	switch {
	case in.Type != "":
		return in.Type
	case in.PCI != "" || in.Devargs != "":
		return OVSPortDPDK
	}
	return OVSPortSystem
}
