// Package stepkind is the one table of step kinds: for each kind its name, area,
// contract type (the inputs struct of the area's pkg/<area>/<area>spec package), what
// it does and waits for, what a host must offer to run it, and which package's
// constructor builds its driver.
//
// Everything that lists or checks step kinds reads this table: the planner refuses
// to render a kind it does not hold or inputs of another type (plan.NewStep), the
// drivers programs refuse to start unless their drivers and the table name the same
// kinds (Check), `plinth-coordinator get kinds` prints it and docs/steps.md is generated
// from it. It holds names, types and words only — never a driver — because the
// planner runs inside the coordinator's Raft FSM and must not link one
// (TestPlannerLinksNoDriver covers this package through pkg/plan).
package stepkind

//go:generate go run ./gen -o ../../docs/steps.md

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// Kind is one row of the table.
type Kind struct {
	// Name is the kind as step IDs carry it: <host>/<name>[/<object>].
	Name string `json:"name"`
	// Area is the part of the site the kind belongs to (host, containerd, ovs, ceph,
	// kubernetes); its contract is the spec package next to its driver.
	Area string `json:"area"`
	// Inputs is the contract type the planner renders and the driver decodes.
	Inputs reflect.Type `json:"-"`
	// PerObject says one step is rendered per named object (ceph.pool/<pool>,
	// kube.labels/<node>) rather than one per host.
	PerObject string `json:"perObject,omitempty"`
	// Does says in one line what a run of the step changes.
	Does string `json:"does"`
	// WaitsFor names the steps this kind depends on ("" when none).
	WaitsFor string `json:"waitsFor,omitempty"`
	// Needs is what the host must offer for the driver to run ("" when nothing
	// beyond the agent).
	Needs string `json:"needs,omitempty"`
	// Concurrent says steps of this kind on one host may run at the same time: each
	// changes only its own object through an API that serialises the rest. Others
	// run one at a time per host (their drivers share host state).
	Concurrent bool `json:"concurrent,omitempty"`
	// DriverPackage is the package whose Constructor builds the driver on the agent
	// (cmd/drivers or cmd/drivers-ceph registers it, as Program says; their tests
	// check the package).
	DriverPackage string `json:"driverPackage"`
	Constructor   string `json:"constructor"`
	// Program is the drivers program that runs the kind (pkg/driverexec); empty
	// means plinth-drivers. Ceph's run in plinth-drivers-ceph, which alone links
	// librados, so hosts without Ceph steps never load it.
	Program string `json:"program,omitempty"`
}

// RunsIn is the drivers program that runs the kind.
func (k Kind) RunsIn() string { return cmp.Or(k.Program, driverexec.Binary) }

// InputsType is the contract type's name as Go spells it: hostspec.NetworkInputs.
func (k Kind) InputsType() string { return k.Inputs.String() }

// MarshalJSON adds the contract type's name (reflect.Type has no JSON form) and the
// program that runs the kind, also when Program is left empty.
func (k Kind) MarshalJSON() ([]byte, error) {
	type plain Kind
	return json.Marshal(struct {
		plain
		Inputs  string `json:"inputs"`
		Program string `json:"program"`
	}{plain(k), k.InputsType(), k.RunsIn()})
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// kinds is the table, by area, each area in dependency order.
var kinds = []Kind{
	{
		Name: hostspec.KindNetwork, Area: "host", Inputs: typeOf[hostspec.NetworkInputs](),
		Does:          "configures the links, bonds, bridges, VLANs, addresses, routes and policy rules Plinth manages, rolling back a change after which no coordinator answers",
		Needs:         "root (CAP_NET_ADMIN) in the host's network namespace",
		DriverPackage: "pkg/host", Constructor: "NewNetworkDriver",
	},
	{
		Name: hostspec.KindSysctl, Area: "host", Inputs: typeOf[hostspec.SysctlInputs](),
		Does:          "sets kernel parameters (rendered only when the host needs some), recording the original values",
		Needs:         "a writable /proc/sys",
		DriverPackage: "pkg/host", Constructor: "NewSysctlDriver",
	},
	{
		Name: hostspec.KindHugepages, Area: "host", Inputs: typeOf[hostspec.HugepagesInputs](),
		Does:          "reserves huge pages system-wide or per NUMA node (rendered only when the host needs some)",
		Needs:         "/sys/kernel/mm/hugepages and, per node, /sys/devices/system/node",
		DriverPackage: "pkg/host", Constructor: "NewHugepagesDriver",
	},
	{
		Name: containerdspec.KindConfig, Area: "containerd", Inputs: typeOf[containerdspec.ConfigInputs](),
		Does:          "writes containerd's config and registry mirrors and restarts containerd when they changed",
		WaitsFor:      hostspec.KindNetwork,
		Needs:         "containerd and runc installed as a systemd service",
		DriverPackage: "pkg/containerd", Constructor: "NewConfigDriver",
	},
	{
		Name: containerdspec.KindImport, Area: "containerd", Inputs: typeOf[containerdspec.ImportInputs](),
		Does:          "imports the bundle's image archives the host runs into containerd's k8s.io namespace",
		WaitsFor:      containerdspec.KindConfig + ", " + hostspec.KindNetwork,
		Needs:         "a running containerd; the site bundle's image archives",
		DriverPackage: "pkg/containerd", Constructor: "NewImportDriver",
	},
	{
		Name: ovsspec.KindDPDK, Area: "ovs", Inputs: typeOf[ovsspec.DPDKInputs](),
		Does:          "sets Open vSwitch's DPDK and PMD settings, restarting ovs-vswitchd when a setting read only at start changed",
		WaitsFor:      hostspec.KindNetwork + ", " + hostspec.KindHugepages + " (when rendered)",
		Needs:         "ovsdb-server and ovs-vswitchd running (openvswitch-switch; openvswitch-switch-dpdk for DPDK)",
		DriverPackage: "pkg/ovs", Constructor: "New",
	},
	{
		Name: ovsspec.KindBridges, Area: "ovs", Inputs: typeOf[ovsspec.BridgesInputs](),
		Does:          "creates and updates OVS bridges, ports, bonds and interfaces in one OVSDB transaction",
		WaitsFor:      ovsspec.KindDPDK,
		Needs:         "ovsdb-server and ovs-vswitchd running",
		DriverPackage: "pkg/ovs", Constructor: "New",
	},
	{
		Name: cephspec.KindHealth, Area: "ceph", Inputs: typeOf[cephspec.HealthInputs](),
		Does:          "waits until the Ceph cluster answers as admin without HEALTH_ERR or down OSDs; outputs its fsid and monitors",
		Needs:         "plinth-drivers-ceph built with -tags ceph,pacific (librados); ceph.conf and the admin keyring",
		DriverPackage: "pkg/ceph", Constructor: "Client.Drivers", Program: driverexec.CephBinary,
	},
	{
		Name: cephspec.KindPool, Area: "ceph", Inputs: typeOf[cephspec.PoolInputs](), PerObject: "pool",
		Does:          "creates or updates one pool (size, PG count, application), or deletes it when asked",
		WaitsFor:      cephspec.KindHealth,
		Needs:         "as ceph.health",
		DriverPackage: "pkg/ceph", Constructor: "Client.Drivers", Program: driverexec.CephBinary,
	},
	{
		Name: cephspec.KindUser, Area: "ceph", Inputs: typeOf[cephspec.UserInputs](), PerObject: "user",
		Does:          "creates or updates one cephx user and its caps; its key is an output",
		WaitsFor:      "the ceph.pool steps of the pools it names (every pool with raw caps), else ceph.health",
		Needs:         "as ceph.health",
		DriverPackage: "pkg/ceph", Constructor: "Client.Drivers", Program: driverexec.CephBinary,
	},
	{
		Name: kubespec.KindBinaries, Area: "kubernetes", Inputs: typeOf[kubespec.BinariesInputs](),
		Does:          "installs the programs the host runs (kubeadm, kubelet, etcd, CNI plugins) from the site bundle",
		WaitsFor:      hostspec.KindNetwork,
		Needs:         "the site bundle unpacked by the install script",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewBinariesDriver",
	},
	{
		Name: kubespec.KindVIP, Area: "kubernetes", Inputs: typeOf[kubespec.VIPInputs](),
		Does:          "holds the control-plane VIP on a controller (keepalived or the kube-vip static pod)",
		WaitsFor:      hostspec.KindNetwork,
		Needs:         "keepalived, when the site's VIP provider is keepalived",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewVIPDriver",
	},
	{
		Name: kubespec.KindEtcd, Area: "kubernetes", Inputs: typeOf[kubespec.EtcdInputs](),
		Does:          "runs one external etcd member as a systemd unit",
		WaitsFor:      hostspec.KindNetwork + ", " + kubespec.KindBinaries,
		Needs:         "systemd; etcd from kube.binaries",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewEtcdDriver",
	},
	{
		Name: kubespec.KindInit, Area: "kubernetes", Inputs: typeOf[kubespec.InitInputs](),
		Does:          "runs kubeadm init on the first controller; outputs the admin kubeconfig and the CA's hash",
		WaitsFor:      "the host's runtime (network, binaries, containerd, images), its VIP and every etcd member",
		Needs:         "kubeadm and kubelet (kube.binaries), a running containerd",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewInitDriver",
	},
	{
		Name: kubespec.KindJoinControlPlane, Area: "kubernetes", Inputs: typeOf[kubespec.JoinInputs](),
		Does:          "joins the second controller to the control plane with kubeadm join",
		WaitsFor:      "the host's runtime, its VIP and etcd member, and kube.init",
		Needs:         "kubeadm and kubelet (kube.binaries), a running containerd",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewJoinControlPlaneDriver",
	},
	{
		Name: kubespec.KindJoin, Area: "kubernetes", Inputs: typeOf[kubespec.JoinInputs](),
		Does:          "joins a worker with kubeadm join",
		WaitsFor:      "the host's runtime and kube.init",
		Needs:         "kubeadm and kubelet (kube.binaries), a running containerd",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewJoinDriver",
	},
	{
		Name: kubespec.KindCNI, Area: "kubernetes", Inputs: typeOf[kubespec.CNIInputs](),
		Does:          "applies the pod network's manifest (rendered unless the site's CNI is none)",
		WaitsFor:      kubespec.KindInit,
		Needs:         "runs on the first controller with kube.init's admin kubeconfig",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewCNIDriver",
	},
	{
		Name: kubespec.KindLabels, Area: "kubernetes", Inputs: typeOf[kubespec.LabelsInputs](), PerObject: "node",
		// The first controller labels every node: one at a time, a site of a
		// thousand nodes would wait for a thousand API round trips in a row.
		Concurrent:    true,
		Does:          "applies one node's Plinth-owned labels and taints",
		WaitsFor:      "the node's kube.init or kube.join*",
		Needs:         "runs on the first controller with kube.init's admin kubeconfig",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewLabelsDriver",
	},
	{
		Name: kubespec.KindHealth, Area: "kubernetes", Inputs: typeOf[kubespec.HealthInputs](),
		Does:          "waits until the API answers through the control-plane endpoint and every node is registered and Ready",
		WaitsFor:      "kube.init, every join, kube.cni and every kube.labels",
		Needs:         "runs on the first controller with kube.init's admin kubeconfig",
		DriverPackage: "pkg/kubeinstall", Constructor: "NewHealthDriver",
	},
}

// All returns the table, by area, each area in dependency order.
func All() []Kind { return slices.Clone(kinds) }

// Names returns the kinds' names, in table order.
func Names() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.Name
	}
	return out
}

// Lookup returns the kind named name.
func Lookup(name string) (Kind, bool) {
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, false
	}
	return kinds[i], true
}

// Check compares the kinds a drivers program's registry holds with the table's kinds
// that program runs: each needs a driver and each driver such a kind. The error names
// what is missing on either side.
func Check(program string, drivers []string) error {
	var missing, extra []string
	for _, k := range kinds {
		if k.RunsIn() == program && !slices.Contains(drivers, k.Name) {
			missing = append(missing, k.Name)
		}
	}
	for _, d := range drivers {
		switch k, ok := Lookup(d); {
		case !ok:
			extra = append(extra, d+" (not in the table)")
		case k.RunsIn() != program:
			extra = append(extra, d+" (runs in "+k.RunsIn()+")")
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "no driver for "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		problems = append(problems, "drivers for kinds the table does not give "+program+": "+strings.Join(extra, ", "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("stepkind: %s: %s (register drivers in cmd/drivers or cmd/drivers-ceph, kinds in pkg/stepkind)", program, strings.Join(problems, "; "))
	}
	return nil
}

// CheckInputs reports whether inputs is of kind's contract type; the planner calls
// it for every step it renders.
func CheckInputs(kind string, inputs any) error {
	k, ok := Lookup(kind)
	if !ok {
		return fmt.Errorf("stepkind: unknown step kind %q; the kinds are %s", kind, strings.Join(Names(), ", "))
	}
	if t := reflect.TypeOf(inputs); t != k.Inputs {
		return fmt.Errorf("stepkind: %s takes %s inputs, not %v", kind, k.InputsType(), t)
	}
	return nil
}
