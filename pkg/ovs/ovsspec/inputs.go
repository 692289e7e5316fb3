// Package ovsspec is the contract between the planner and the OVS driver: the step
// kinds and the plain-data inputs the planner renders for them. It has no
// dependencies, so the coordinator's planner can import it without linking an OVSDB
// client; it must never do I/O.
package ovsspec

import (
	"github.com/plinth-dev/plinth/pkg/cpuset"
)

// Step kinds.
const (
	// KindDPDK sets the Open_vSwitch table's DPDK and PMD settings, restarting
	// ovs-vswitchd when a setting DPDK reads only at start changes.
	KindDPDK = "ovs.dpdk"
	// KindBridges creates bridges, ports, bonds and interfaces.
	KindBridges = "ovs.bridges"
)

// DPDKInputs are the ovs.dpdk step's inputs. Zero values leave OVS's defaults.
type DPDKInputs struct {
	Enabled bool `json:"enabled"`
	// SocketMemMB and SocketLimitMB have one value per NUMA node.
	SocketMemMB   []int  `json:"socketMemMB,omitempty"`
	SocketLimitMB []int  `json:"socketLimitMB,omitempty"`
	HugepageDir   string `json:"hugepageDir,omitempty"`
	// PMDCPUs are the CPUs reserved for PMD threads (a cpulist); the driver derives
	// pmd-cpu-mask from them and the host's CPU topology.
	PMDCPUs       string `json:"pmdCPUs,omitempty"`
	PMDPerNUMA    int    `json:"pmdPerNUMA,omitempty"`
	LcoreCPUs     string `json:"lcoreCPUs,omitempty"`
	PMDMaxSleepUs int    `json:"pmdMaxSleepUs,omitempty"`
	Extra         string `json:"extra,omitempty"`
	VhostSockDir  string `json:"vhostSockDir,omitempty"`
}

// BridgesInputs are the ovs.bridges step's inputs.
type BridgesInputs struct {
	Bridges []Bridge `json:"bridges"`
}

// Bridge is one bridge and the ports Plinth manages on it.
type Bridge struct {
	Name string `json:"name"`
	// Datapath is "netdev" or "system".
	Datapath string `json:"datapath"`
	Ports    []Port `json:"ports,omitempty"`
}

// Port is a port with one interface, or a bond with several.
type Port struct {
	Name       string      `json:"name"`
	Interfaces []Interface `json:"interfaces"`
	Tag        int         `json:"tag,omitempty"`
	Trunks     []int       `json:"trunks,omitempty"`
	// BondMode, LACP and LACPTime apply to bonds (two or more interfaces).
	BondMode string `json:"bondMode,omitempty"`
	LACP     string `json:"lacp,omitempty"`
	LACPTime string `json:"lacpTime,omitempty"`
}

// Interface types.
const (
	TypeDPDK     = "dpdk"
	TypeSystem   = "system"
	TypeInternal = "internal"
)

// Interface is one OVS interface.
type Interface struct {
	Name string `json:"name"`
	// Type is dpdk, system or internal.
	Type     string `json:"type"`
	Devargs  string `json:"devargs,omitempty"`
	RxQueues int    `json:"rxQueues,omitempty"`
	MTU      int    `json:"mtu,omitempty"`
}

// OVSType is the Interface table's type column for t: system interfaces have "".
func OVSType(t string) string {
	if t == TypeSystem {
		return ""
	}
	return t
}

// ParseCPUList parses a Linux cpulist ("0-3,8,10-11") into sorted, distinct CPUs;
// ok is false for a malformed or empty list.
func ParseCPUList(s string) ([]int, bool) {
	cpus, err := cpuset.Parse(s)
	return cpus, err == nil && len(cpus) > 0
}

// DefaultRunDir is where the packaged OVS service keeps db.sock and control sockets:
// the OVS steps' default, and what the agent's and the drivers programs'
// --ovs-rundir say.
const DefaultRunDir = "/var/run/openvswitch"
