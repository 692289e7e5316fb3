// Package cephtest starts a throwaway single-node Ceph cluster (one mon, one mgr,
// one OSD on a sparse file or in memory) from Debian's packages, for tests and the
// lab. It follows shared/recipes/micro-ceph.md: cephx on, everything under one short
// directory (admin sockets have a 107-byte path limit), unique ports.
//
// It owns the daemons it starts and the directory it makes, and removes both in
// Stop. It must never touch a cluster it did not start, nor /etc/ceph.
package cephtest
