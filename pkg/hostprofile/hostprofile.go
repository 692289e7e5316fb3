// Package hostprofile names what a kind of machine forces on the software Plinth
// runs there, so that the forcing is one explicit, documented setting of the host
// (agent.yaml's hostProfile) and never a default for real hosts.
//
// Plain data only: the agent's wiring turns a profile into driver options, and the lab
// (pkg/nspawn) installs the files a profile refers to. It must never do I/O.
package hostprofile

import (
	"fmt"
	"sort"
	"strings"
)

// Profile is what one kind of machine needs.
type Profile struct {
	Name string
	// Why says, for `--help` and docs, what the machine lacks.
	Why string
	// RuncBinary replaces runc in containerd's CRI runtime (empty: runc on PATH).
	RuncBinary string
	// AllowCgroupV1 lets kubelet start on a cgroup v1 host (KubeletConfiguration
	// failCgroupV1: false); Kubernetes 1.35+ refuses v1 otherwise.
	AllowCgroupV1 bool
	// PreflightIgnores are kubeadm preflight checks the machine cannot pass.
	PreflightIgnores []string
	// KubeProxyKeepsConntrack stops kube-proxy writing the conntrack sysctls, which
	// are machine-wide and read-only on such a host.
	KubeProxyKeepsConntrack bool
	// KubeletEvictionHard replaces kubelet's hard eviction thresholds: lab hosts'
	// root filesystems are directories on the machine's one disk, shared with
	// everything else it runs, so kubelet's defaults (nodefs under 10 %, imagefs
	// under 15 % free) would evict the lab's pods over space other work took.
	KubeletEvictionHard map[string]string
}

// RuncLab is where the lab installs its runc wrapper (cmd/runc-lab) in every host.
const RuncLab = "/usr/local/sbin/runc-lab"

// NspawnLab is a lab host booted with systemd-nspawn on a cgroup v1 machine without
// CAP_SYS_RESOURCE (pkg/nspawn): runc cannot lower oom_score_adj, cgroups are v1,
// kubeadm's system checks and the ip_forward file check fail, and the conntrack
// sysctls belong to the machine.
var NspawnLab = Profile{
	Name:                    "nspawn-lab",
	Why:                     "lab hosts booted with systemd-nspawn on a cgroup v1 machine without CAP_SYS_RESOURCE",
	RuncBinary:              RuncLab,
	AllowCgroupV1:           true,
	PreflightIgnores:        []string{"SystemVerification", "FileContent--proc-sys-net-ipv4-ip_forward"},
	KubeProxyKeepsConntrack: true,
	KubeletEvictionHard: map[string]string{
		"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
	},
}

var known = map[string]Profile{NspawnLab.Name: NspawnLab}

// Lookup returns the named profile; "" is a real host, which needs none.
func Lookup(name string) (Profile, error) {
	if name == "" {
		return Profile{}, nil
	}
	if p, ok := known[name]; ok {
		return p, nil
	}
	return Profile{}, fmt.Errorf("host profile %q is unknown; valid profiles are %s (or none, for a real host)", name, strings.Join(Names(), ", "))
}

// Names lists the known profiles, sorted.
func Names() []string {
	out := make([]string, 0, len(known))
	for n := range known {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
