// Command plinth-drivers runs the agent's step drivers (host networking, containerd,
// OVS-DPDK, the Kubernetes bootstrap) for one operation and exits; Ceph's run in
// plinth-drivers-ceph. plinth-agent starts it for each step run and each drift pass
// (pkg/driverexec), so the daemon that idles on every host never holds the drivers'
// code and state; operators do not run it by hand.
//
//	plinth-drivers [flags] hello|run|check   < request.json > reply.json
package main

import (
	"github.com/plinth-dev/plinth/pkg/driverexec"
	"github.com/plinth-dev/plinth/pkg/driverprog"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { driverprog.Exit(driverexec.Binary, version, drivers) }
