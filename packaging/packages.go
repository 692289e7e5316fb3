package main

import (
	"path/filepath"

	"github.com/plinth-dev/plinth/pkg/driverexec"
)

// The Debian packages Plinth ships: everything a package says about itself is in this
// table. Files come from the repository: the binary from the build directory, the unit
// from systemd/, config and the maintainer script templates from packaging/debian/.

const (
	maintainer = "Plinth maintainers <plinth-dev@users.noreply.github.com>"
	homepage   = "https://github.com/plinth-dev/plinth"
	arch       = "amd64"
	section    = "admin"
	priority   = "optional"
	// unitDir is where packaged systemd units go (Debian: never /etc, never /lib).
	unitDir = "/usr/lib/systemd/system"
	binDir  = "/usr/bin"
	// libexecDir holds programs a package's binary runs, not operators.
	libexecDir = driverexec.DefaultDir
)

// conffile is a default configuration file, owned by dpkg as a conffile.
type conffile struct {
	Src string // under packaging/debian/
	Dst string // absolute path on the host
}

// pkg is one Debian binary package.
type pkg struct {
	Name   string
	Binary string // file name in the build directory, installed in binDir
	// Helpers are programs Binary runs (file names in the build directory),
	// installed in libexecDir.
	Helpers []string
	Unit    string // file name in systemd/, installed in unitDir
	// StateDir is the service's state (identity, keys, data): created 0700 by
	// postinst, removed by purge. It matches the unit's StateDirectory=.
	StateDir string
	// StartNote says in postinst's header what starts the service.
	StartNote string
	Conffiles []conffile
	// Depends lists what the package needs besides the shared libraries its binary
	// links (those are added from the ELF file, see shlibs).
	Depends    []string
	Recommends []string
	Suggests   []string
	Summary    string
	// Description is the extended description: paragraphs separated by blank lines.
	Description string
}

var packages = []pkg{
	{
		Name:   "plinth-agent",
		Binary: "plinth-agent",
		// The agent runs its steps in plinth-drivers and plinth-drivers-ceph
		// (pkg/driverexec), so the daemon does not hold the drivers' code while the
		// host is idle.
		Helpers:   driverexec.Programs(),
		Unit:      "plinth-agent.service",
		StateDir:  "/var/lib/plinth",
		StartNote: "`plinth-agent join` writes the identity the unit's ConditionPathExists waits for",
		Conffiles: []conffile{{Src: "agent.yaml", Dst: "/etc/plinth/agent.yaml"}},
		// What the agent's steps run or configure: containerd with runc, nftables
		// and conntrack (kube-proxy), iproute2 and kmod (host networking), mount's
		// losetup and mount (kubeadm preflight for the kubelet), systemd (units).
		Depends: []string{
			"containerd", "runc", "nftables", "conntrack", "iproute2", "kmod", "mount",
			"ca-certificates", "systemd",
		},
		// Hosts without OVS or Ceph steps need neither; the ceph CLI helps operators
		// on storage hosts. keepalived (with curl for its API check) holds the
		// control-plane VIP on controllers. The DPDK build of ovs-vswitchd only fits
		// DPDK hosts.
		Recommends: []string{"openvswitch-switch", "ceph-common", "keepalived", "curl"},
		Suggests:   []string{"openvswitch-switch-dpdk"},
		Summary:    "Plinth host agent: converges this host to the site manifest",
		Description: `plinth-agent runs on every host of a Plinth site. It enrols with a one-time
token, gossips liveness, reports host facts and runs the steps the
coordinators plan for this host (host networking, containerd, Open vSwitch
with DPDK, Ceph pools and users, the Kubernetes bootstrap) idempotently:
observe, diff, apply, verify.

The service stays inactive until the host is enrolled with plinth-agent
join. Settings: /etc/plinth/agent.yaml. State: /var/lib/plinth.`,
	},
	{
		Name:      "plinth-coordinator",
		Binary:    "plinth-coordinator",
		Unit:      "plinth-coordinator.service",
		StateDir:  "/var/lib/plinth-coordinator",
		StartNote: "`plinth-coordinator init` or `join` first, then the operator enables the unit",
		// The coordinator reads no configuration file: its settings are flags and
		// what init/join wrote to its data directory, so it has no conffile.
		Depends: []string{"ca-certificates", "systemd"},
		Summary: "Plinth coordinator: replicated site state, planner and mTLS API",
		Description: `plinth-coordinator runs on the two controllers and the witness of a Plinth
site. It keeps the declared site in Raft, plans each host's steps and serves
the mTLS API the agents and operators use. The same binary is the operator's
command line client (apply, get, describe, node enroll).

The service is started after plinth-coordinator init (first controller) or
join. State: /var/lib/plinth-coordinator.`,
	},
}

// program is one executable a package installs.
type program struct {
	Name string // file name in the build directory
	Dst  string // absolute path on the host
}

// programs are p's executables: Binary, then its helpers.
func (p pkg) programs() []program {
	out := []program{{p.Binary, filepath.Join(binDir, p.Binary)}}
	for _, h := range p.Helpers {
		out = append(out, program{h, filepath.Join(libexecDir, h)})
	}
	return out
}

// shlibs maps a shared library the binaries link (ELF DT_NEEDED) to the Debian
// package and minimum version providing it on bookworm, as dpkg-shlibdeps computes
// them; a library missing here fails the build, naming it.
var shlibs = map[string]string{
	"libc.so.6":     "libc6 (>= 2.34)",
	"librados.so.2": "librados2 (>= 16.2.15+ds)",
	"librbd.so.1":   "librbd1 (>= 16.2.6+ds)",
}
