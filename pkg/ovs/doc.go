// Package ovs is the Open vSwitch datapath driver: the ovs.dpdk step (DPDK and PMD
// settings in the Open_vSwitch table, restarting ovs-vswitchd when DPDK must read them
// again) and the ovs.bridges step (bridges, DPDK and system ports, bonds, VLAN tags,
// internal ports). OVS runs on the host, started by its own service; Plinth prepares
// it before Kubernetes and the Neutron charts take over.
//
// Which library does what, and why:
//   - github.com/ovn-org/libovsdb does every database read and write, with models
//     generated into ./model. A change is one transaction whose every operation's
//     result is checked (ovsdb.CheckOperationResults). Reads are select transactions,
//     not a monitor cache, so a read right after our own write is never stale.
//   - github.com/digitalocean/go-openvswitch is not used by the driver: its ovsdb
//     package drops per-operation errors and its ovs package cannot set
//     datapath_type, other_config or interface options. Tests use its ovs package
//     where it fits, for ovs-vsctl reads.
//   - dpif-netdev/pmd-rxq-show, which neither library wraps, is asked of
//     ovs-vswitchd over its unixctl control socket (what ovs-appctl does, without
//     starting a process).
//
// After a change the driver waits for ovs-vswitchd to apply it (next_cfg/cur_cfg, as
// ovs-vsctl does) and checks the result: DPDK initialised, every interface with an
// ofport and no error, links up, PMD threads on the intended CPUs. An interface OVS
// rejects is reported with OVS's own message and its port removed, so ovs-vswitchd
// does not retry it forever.
//
// It must never remove what it did not create: bridges and ports it creates carry
// external_ids:plinth-owner=plinth, the other_config keys it sets are listed in the
// Open_vSwitch row's external_ids, and ports others add (Neutron's, on br-int) are
// left alone.
package ovs

// New returns the two OVS drivers, sharing one database connection.
func New(opts ...Option) (*DPDKDriver, *BridgesDriver) {
	o := newOptions(opts)
	d := &db{endpoint: o.endpoint}
	return &DPDKDriver{db: d, opts: o}, &BridgesDriver{db: d, opts: o}
}
