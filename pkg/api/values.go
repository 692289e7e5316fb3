package api

// The valid values of the manifest's enumerated fields. Each list is the one home of
// its set: the validator checks against it and the JSON schema (pkg/api/schema) lists
// it as the field's enum, so `explain`, editors and Validate never disagree.
var (
	// NetworkRoles are the roles of site.spec.networks[].role.
	NetworkRoles = []string{NetworkOAM, NetworkMgmt, NetworkClusterHost, NetworkData, NetworkOther}
	// DriftPolicies are the values of site.spec.policy.drift.
	DriftPolicies = []string{DriftReport, DriftRepair}
	// HostRoles are the roles a Host may have.
	HostRoles = []string{RoleController, RoleWorker, RoleStorage}

	// InterfaceTypes are the interface types Plinth configures.
	InterfaceTypes = []string{InterfaceEthernet, InterfaceBond, InterfaceBridge, InterfaceVLAN, InterfaceMacvlan, InterfaceVXLAN}
	// InterfaceStates are the administrative states of an interface.
	InterfaceStates = []string{"up", "down"}
	// BondModes, BondLACPRates and BondHashPolicies are the Linux bond options Plinth supports.
	BondModes        = []string{BondLACP, BondActiveBackup, BondBalanceXOR}
	BondLACPRates    = []string{"slow", "fast"}
	BondHashPolicies = []string{"layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"}
	// MacvlanModes are the modes of a macvlan interface.
	MacvlanModes = []string{"bridge", "vepa", "private", "passthru"}

	// VIPProviders hold spec.kubernetes.controlPlaneVIP.
	VIPProviders = []string{VIPKeepalived, VIPKubeVIP}
	// ProxyModes are kube-proxy's modes.
	ProxyModes = []string{"nftables", "iptables", "ipvs"}
	// CNIPlugins are the pod networks Plinth installs (or, for none, leaves to the site).
	CNIPlugins = []string{CNICalico, CNIFlannel, CNINone}
	// CgroupDrivers are containerd's (and therefore the kubelet's) cgroup drivers.
	CgroupDrivers = []string{CgroupSystemd, CgroupCgroupfs}
	// Snapshotters are the containerd snapshotters Plinth accepts.
	Snapshotters = []string{"overlayfs", "native", "btrfs", "zfs", "devmapper"}

	// CephDefaultSets are the values of spec.ceph.defaults.
	CephDefaultSets = []string{CephDefaultsOpenStack, CephDefaultsNone}
	// CephFailureDomains are the CRUSH bucket types of Ceph's default type map.
	CephFailureDomains = []string{"osd", "host", "chassis", "rack", "row", "pdu", "pod", "room", "datacenter", "zone", "region", "root"}
	// CephCapKeys are the daemon types a cephx user's caps may name.
	CephCapKeys = []string{"mon", "osd", "mgr", "mds"}

	// OVSDatapaths, OVSPortTypes, OVSBondModes, OVSLACPModes and OVSLACPTimes are the
	// Open vSwitch settings Plinth supports.
	OVSDatapaths = []string{OVSDatapathNetdev, OVSDatapathSystem}
	OVSPortTypes = []string{OVSPortDPDK, OVSPortSystem, OVSPortInternal}
	OVSBondModes = []string{OVSBondActiveBackup, OVSBondBalanceSLB, OVSBondBalanceTCP}
	OVSLACPModes = []string{OVSLACPActive, OVSLACPPassive, OVSLACPOff}
	OVSLACPTimes = []string{"fast", "slow"}

	// WaitFors are the values of an application chart's wait.for.
	WaitFors = []string{WaitAll, WaitHooks}
	// Remediations are what a failed or interrupted release gets before the next attempt.
	Remediations = []string{RemediateRollback, RemediateReinstall}
	// GateNames are the fields of a group gate, one of which each gate sets (the
	// decoder refuses any other name, listing these).
	GateNames = []string{GateNodesLabelled, GateCephPools, GateCephUsers, GateDPDK, GateChart}
)
