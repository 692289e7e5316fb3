package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/pflag"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/ceph/librados"
	"github.com/plinth-dev/plinth/pkg/containerd"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/host/hostspec"
	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/kubeinstall"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/ovs"
	"github.com/plinth-dev/plinth/pkg/ovs/ovsspec"
	"github.com/plinth-dev/plinth/pkg/stepkind"
)

// OVS driver flags, added to the command line with the rest (main.go).
var (
	ovsRunDir = pflag.String("ovs-rundir", orEnv("OVS_RUNDIR", ovs.DefaultRunDir), "Open vSwitch run directory (db.sock, ovs-vswitchd's control socket)")
)

// Ceph driver flags. The driver links librados only when built with -tags
// ceph,pacific (make build); otherwise its steps fail saying so.
var (
	cephConf = pflag.String("ceph-conf", ceph.SystemConfigFile, "ceph.conf for Ceph steps whose manifest names no configFile or monitors")
)

func orEnv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// registry holds the drivers this agent can run; their state lives under
// stateDir/drivers. hp is what this kind of machine forces on containerd and kubeadm.
// It refuses to start an agent whose drivers and the step kind table disagree.
func registry(stateDir string, hp hostprofile.Profile, log *slog.Logger) (*driver.Registry, error) {
	byKind := drivers(stateDir, hp, log)
	ds := make([]driver.Driver, 0, len(byKind))
	for _, k := range stepkind.Names() {
		d, ok := byKind[k]
		if !ok {
			continue
		}
		if d.Kind() != k {
			return nil, fmt.Errorf("agent: the driver registered for %s runs %s", k, d.Kind())
		}
		ds = append(ds, d)
	}
	if err := stepkind.Check(slices.Collect(maps.Keys(byKind))); err != nil {
		return nil, err
	}
	return driver.NewRegistry(ds...)
}

// drivers is the one place a step kind's driver is constructed, keyed by the kind
// in pkg/stepkind's table (TestDriversMatchStepKinds keeps both the same).
func drivers(stateDir string, hp hostprofile.Profile, log *slog.Logger) map[string]driver.Driver {
	dir := filepath.Join(stateDir, "drivers")
	ovsOpts := []ovs.Option{ovs.WithRunDir(*ovsRunDir), ovs.WithLogger(log)}
	ovsDPDK, ovsBridges := ovs.New(ovsOpts...)
	// Network and sysctl changes after which no coordinator answers are rolled back.
	reach := host.WithReachability(host.TCPProbe(func() ([]string, error) {
		id, err := agent.LoadIdentity(stateDir)
		return id.Coordinators, err
	}))
	cephOpts := []ceph.Option{ceph.WithConfigFile(*cephConf), ceph.WithLogger(log)}
	cephHealth, cephPool, cephUser := ceph.NewClient(librados.Dial, cephOpts...).Drivers()
	kube := []kubeinstall.Option{kubeinstall.WithLogger(log), kubeinstall.WithHostProfile(hp)}
	ctrd := []containerd.Option{containerd.WithLogger(log), containerd.WithPaths(containerd.Paths{RuncBinary: hp.RuncBinary})}
	return map[string]driver.Driver{
		hostspec.KindNetwork:          host.NewNetworkDriver(dir, host.WithLogger(log), reach),
		hostspec.KindSysctl:           host.NewSysctlDriver(dir, host.WithLogger(log), reach),
		hostspec.KindHugepages:        host.NewHugepagesDriver(dir, host.WithLogger(log)),
		containerdspec.KindConfig:     containerd.NewConfigDriver(dir, ctrd...),
		containerdspec.KindImport:     containerd.NewImportDriver(ctrd...),
		ovsspec.KindDPDK:              ovsDPDK,
		ovsspec.KindBridges:           ovsBridges,
		cephspec.KindHealth:           cephHealth,
		cephspec.KindPool:             cephPool,
		cephspec.KindUser:             cephUser,
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
