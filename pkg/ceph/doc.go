// Package ceph prepares an existing Ceph cluster for the cloud: drivers for the
// ceph.health, ceph.pool and ceph.user step kinds (their inputs are in
// pkg/ceph/cephspec) that observe the cluster with mon commands (JSON), diff it
// against the inputs and apply the difference. User keys come back as step outputs,
// which the coordinator seals.
//
// It owns pools, CRUSH rules it creates for a failure domain, and cephx users the
// manifest names. It must never deploy or repair Ceph daemons, never shell out to the
// ceph CLI, never delete a pool the manifest has not marked for deletion or one that
// holds RBD images, and never put a key in a log line, an error or a change summary.
//
// This package has no cgo: the librados session comes from a Dialer, which
// pkg/ceph/librados implements with go-ceph when built with -tags ceph,pacific.
package ceph
