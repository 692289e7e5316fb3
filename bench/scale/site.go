package main

import (
	"fmt"
	"strings"
)

// hostName is host i of the simulated site: two controllers, then workers.
func hostName(i int) string {
	switch i {
	case 0, 1:
		return fmt.Sprintf("ctl-%d", i)
	}
	return fmt.Sprintf("w-%04d", i-2)
}

// mgmtAddr is host i's management address (172.20.0.0/16; never configured on
// this machine: the simulated drivers touch nothing).
func mgmtAddr(i int) string { return fmt.Sprintf("172.20.%d.%d", i/250, 2+i%250) }

// change is what a later manifest adds: with all, a sysctl on every host; one is
// a host that gets a further sysctl of its own (-1: none).
type change struct {
	all bool
	one int
}

// manifest is the site of n hosts: a Kubernetes cluster over every host, so each
// host runs the chain a real site does — host.network → host.sysctl,
// host.hugepages → containerd.config → images.import, kube.binaries → kube.init or
// kube.join* → kube.labels/<node> (on the first controller) → kube.health — with
// external etcd and the VIP on the controllers.
func manifest(n int, ch change) string {
	var b strings.Builder
	b.WriteString(`apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: scale
spec:
  controllers: [ctl-0, ctl-1]
  networks:
  - name: mgmt
    role: mgmt
    cidr: 172.20.0.0/16
    gateway: 172.20.0.1
  - name: cluster-host
    role: cluster-host
    cidr: 172.21.0.0/16
    pool: {start: 172.21.1.1, end: 172.21.15.254}
  kubernetes:
    controlPlaneVIP: 172.21.0.10
    imageRepository: registry.local
    bundle: {version: "0.0.0-scale", sha256: "` + strings.Repeat("0", 64) + `"}
    cni: {plugin: flannel}
`)
	for i := range n {
		role := "worker"
		if i < 2 {
			role = "controller"
		}
		extra := ""
		if ch.all {
			extra += "\n    net.core.somaxconn: \"4096\""
		}
		if ch.one == i {
			extra += "\n    net.ipv4.tcp_keepalive_time: \"600\""
		}
		fmt.Fprintf(&b, `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata:
  name: %s
spec:
  roles: [%s]
  managementAddress: %s
  interfaces:
  - name: eth1
    networks: [cluster-host]
    allocate: true
  sysctls:
    net.ipv4.ip_forward: "1"%s
  hugepages:
  - {size: 2Mi, count: 8}
`, hostName(i), role, mgmtAddr(i), extra)
	}
	return b.String()
}
