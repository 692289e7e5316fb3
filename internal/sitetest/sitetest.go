// Package sitetest writes the manifests of Kubernetes sites that tests apply: one
// shape, so a test of the FSM, of the coordinators and a benchmark at a thousand
// hosts plan the same steps.
package sitetest

import (
	"fmt"
	"strings"
)

// Kube is the manifest of a Kubernetes site named lab: controller, the first and
// only controller, then workers, with management addresses from 172.20.0.2 on in
// that order and cluster-host addresses allocated from a pool of 3,800.
func Kube(controller string, workers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata: {name: lab}
spec:
  controllers: [%s]
  networks:
  - {name: mgmt, role: mgmt, cidr: 172.20.0.0/16, gateway: 172.20.0.1}
  - name: cluster-host
    role: cluster-host
    cidr: 172.21.0.0/16
    pool: {start: 172.21.1.1, end: 172.21.15.254}
  kubernetes:
    controlPlaneVIP: 172.21.0.10
    imageRepository: registry.local
    bundle: {version: "0.0.0-test", sha256: "0000000000000000000000000000000000000000000000000000000000000000"}
    cni: {plugin: flannel}
`, controller)
	for i, name := range append([]string{controller}, workers...) {
		role := "worker"
		if i == 0 {
			role = "controller"
		}
		n := i + 2
		fmt.Fprintf(&b, `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: %s}
spec:
  roles: [%s]
  managementAddress: 172.20.%d.%d
  interfaces: [{name: eth1, networks: [cluster-host], allocate: true}]
`, name, role, n/256, n%256)
	}
	return b.String()
}
