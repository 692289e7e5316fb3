package api

import (
	"fmt"
	"strings"
	"testing"
)

// hostYAML renders one Host document of the example site.
func hostYAML(name, roles string, n int) string {
	return fmt.Sprintf(`apiVersion: plinth.dev/v1alpha1
kind: Host
metadata:
  name: %[1]s
spec:
  roles: [%[2]s]
  managementAddress: 10.0.0.%[3]d
  interfaces:
  - name: eno1
    mac: "52:54:00:00:00:%[3]d"
    addresses: [10.0.0.%[3]d/24]
    networks: [mgmt]
  - name: eno2
    mtu: 9000
    addresses: [10.0.1.%[3]d/24, "fd00:10::%[3]d/64"]
    networks: [cluster, data]
  routes:
  - {to: default, via: 10.0.0.1}
  - {to: 172.16.0.0/12, via: 10.0.1.1, metric: 100, table: 10}
  labels:
    topology.kubernetes.io/zone: a
`, name, roles, n)
}

// exampleYAML is a complete valid site: 2 controllers, a witness, 3 workers. The Site is
// document 1, ctl-0..1 are 2..3, wit-0 is 4, compute-0..2 are 5..7.
var exampleYAML = `# Example site; this comment-only preamble is not a document.
---
apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: lab1
spec:
  controllers: [ctl-0, ctl-1]
  witness: wit-0
  networks:
  - {name: oam, role: oam, cidr: 192.168.10.0/24, gateway: 192.168.10.1}
  - {name: mgmt, role: mgmt, cidr: 10.0.0.0/24, vlan: 100}
  - {name: cluster, role: cluster-host, cidr: 10.0.1.0/24, vlan: 101, mtu: 9000}
  - {name: data, role: data, cidr: "fd00:10::/64", vlan: 102, mtu: 9000}
  policy: {drift: report, maxAttempts: 3}
  kubernetes:
    version: v1.37.2
    controlPlaneVIP: 10.0.1.10
  ceph:
    pools: [{name: volumes, size: 3}, {name: images}]
  ovs: {dpdk: true}
` + strings.Join([]string{"",
	hostYAML("ctl-0", "controller", 11),
	hostYAML("ctl-1", "controller", 12),
	hostYAML("wit-0", "controller", 13),
	hostYAML("compute-0", "worker, storage", 21),
	hostYAML("compute-1", "worker, storage", 22),
	hostYAML("compute-2", "worker", 23),
}, "---\n")

// example decodes exampleYAML, failing the test if that does not work.
func example(t *testing.T) *Manifest {
	t.Helper()
	m, err := Decode("site.yaml", []byte(exampleYAML))
	if err != nil {
		t.Fatalf("Decode(example): %v", err)
	}
	return m
}

// findError reports whether errs holds an error at path whose message contains msg.
func findError(errs ErrorList, path, msg string) bool {
	for _, e := range errs {
		if e.Path == path && strings.Contains(e.Msg, msg) {
			return true
		}
	}
	return false
}
