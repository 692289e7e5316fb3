package main

import (
	"cmp"
	"os"
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/agentid"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/containerd"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/driverprog"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/kubeinstall"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/ovs"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
)

// drivers is the one place plinth-drivers constructs a step kind's driver, keyed by
// the kind in pkg/stepkind's table (TestDriversMatchStepKinds keeps both the same).
func drivers(o driverprog.Options) map[string]driver.Driver {
	dir := filepath.Join(o.StateDir, "drivers")
	runDir := cmp.Or(o.OVSRunDir, os.Getenv("OVS_RUNDIR"), ovs.DefaultRunDir)
	ovsDPDK, ovsBridges := ovs.New(ovs.WithRunDir(runDir), ovs.WithLogger(o.Log))
	// Network and sysctl changes after which no coordinator answers are rolled back.
	reach := host.WithReachability(host.TCPProbe(func() ([]string, error) {
		id, err := agentid.Load(o.StateDir)
		return id.Coordinators, err
	}))
	kube := []kubeinstall.Option{kubeinstall.WithLogger(o.Log), kubeinstall.WithHostProfile(o.HostProfile)}
	ctrd := []containerd.Option{containerd.WithLogger(o.Log), containerd.WithPaths(containerd.Paths{RuncBinary: o.HostProfile.RuncBinary})}
	return map[string]driver.Driver{
		hostspec.KindNetwork:          host.NewNetworkDriver(dir, host.WithLogger(o.Log), reach),
		hostspec.KindSysctl:           host.NewSysctlDriver(dir, host.WithLogger(o.Log), reach),
		hostspec.KindHugepages:        host.NewHugepagesDriver(dir, host.WithLogger(o.Log)),
		containerdspec.KindConfig:     containerd.NewConfigDriver(dir, ctrd...),
		containerdspec.KindImport:     containerd.NewImportDriver(dir, ctrd...),
		ovsspec.KindDPDK:              ovsDPDK,
		ovsspec.KindBridges:           ovsBridges,
		kubespec.KindBinaries:         kubeinstall.NewBinariesDriver(dir, bundle.DefaultRoot, kube...),
		kubespec.KindVIP:              kubeinstall.NewVIPDriver(dir, kube...),
		kubespec.KindEtcd:             kubeinstall.NewEtcdDriver(dir, kube...),
		kubespec.KindInit:             kubeinstall.NewInitDriver(dir, kube...),
		kubespec.KindJoinControlPlane: kubeinstall.NewJoinControlPlaneDriver(dir, kube...),
		kubespec.KindJoin:             kubeinstall.NewJoinDriver(dir, kube...),
		kubespec.KindCNI:              kubeinstall.NewCNIDriver(dir, kube...),
		kubespec.KindLabels:           kubeinstall.NewLabelsDriver(dir, kube...),
		kubespec.KindHealth:           kubeinstall.NewHealthDriver(dir, kube...),
	}
}
