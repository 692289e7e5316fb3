package main

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/plinth-dev/plinth/pkg/agent"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/librados"
	"github.com/plinth-dev/plinth/pkg/containerd"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/host"
	"github.com/plinth-dev/plinth/pkg/hostprofile"
	"github.com/plinth-dev/plinth/pkg/kubeinstall"
	"github.com/plinth-dev/plinth/pkg/ovs"
)

// OVS driver flags. cobra adds pflag.CommandLine to the root's persistent flags, so
// they live here with the drivers instead of in every command's flag set.
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
func registry(stateDir string, hp hostprofile.Profile, log *slog.Logger) (*driver.Registry, error) {
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
	return driver.NewRegistry(
		host.NewNetworkDriver(dir, host.WithLogger(log), reach),
		host.NewSysctlDriver(dir, host.WithLogger(log), reach),
		host.NewHugepagesDriver(dir, host.WithLogger(log)),
		kubeinstall.NewBinariesDriver(dir, bundle.DefaultRoot, kube...),
		kubeinstall.NewVIPDriver(dir, kube...),
		kubeinstall.NewEtcdDriver(dir, kube...),
		kubeinstall.NewInitDriver(dir, kube...),
		kubeinstall.NewJoinControlPlaneDriver(dir, kube...),
		kubeinstall.NewJoinDriver(dir, kube...),
		kubeinstall.NewCNIDriver(dir, kube...),
		kubeinstall.NewLabelsDriver(dir, kube...),
		kubeinstall.NewHealthDriver(dir, kube...),
		containerd.NewConfigDriver(dir, ctrd...),
		containerd.NewImportDriver(ctrd...),
		ovsDPDK, ovsBridges,
		cephHealth, cephPool, cephUser,
	)
}
