#!/usr/bin/env bash
# Installs the host packages Plinth's tests and lab use, idempotently.
# Only Debian packages: iproute2 (ip), nftables (partitions), iputils-ping, systemd (systemd-analyze),
# containerd and runc (pkg/containerd's daemon tests), Open vSwitch with DPDK (pkg/ovs),
# Ceph Pacific daemons, CLIs and librados/librbd headers (pkg/ceph), etcd-server and
# unshare (pkg/kubeinstall's etcd and kubeadm tests; the Kubernetes binaries themselves
# come from scripts/build-k8s.sh, `make k8s-bins`).
set -euo pipefail
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v nft >/dev/null || need+=(nftables)
command -v ping >/dev/null || need+=(iputils-ping)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
# Open vSwitch, its DPDK build and the DPDK drivers pkg/ovs's tests use (the dpdk
# package only recommends them): the mempool driver, net_null and net_af_packet.
command -v ovs-vsctl >/dev/null || need+=(openvswitch-switch)
[ -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ] || need+=(openvswitch-switch-dpdk)
for pmd in mempool-ring net-null net-af-packet; do
  ls /usr/lib/*/dpdk/pmds-*/librte_${pmd//-/_}.so.23 >/dev/null 2>&1 || need+=(librte-${pmd}23)
done
# Ceph (pkg/ceph): mon, mgr and OSD daemons for the test cluster and the lab, the
# ceph/rbd CLIs, and librados/librbd headers plus a C compiler for go-ceph (cgo,
# make build's -tags ceph,pacific).
command -v ceph-mon >/dev/null || need+=(ceph-mon)
command -v ceph-mgr >/dev/null || need+=(ceph-mgr)
command -v ceph-osd >/dev/null || need+=(ceph-osd)
command -v ceph >/dev/null || need+=(ceph-common)
[ -e /usr/include/rados/librados.h ] || need+=(librados-dev)
[ -e /usr/include/rbd/librbd.h ] || need+=(librbd-dev)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v etcd >/dev/null || need+=(etcd-server)
command -v unshare >/dev/null || need+=(util-linux)
# kube.vip's keepalived provider (pkg/kubeinstall's VIP failover test): keepalived,
# curl for its API check, openssl for the test's API stand-in.
command -v keepalived >/dev/null || need+=(keepalived)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
# Booted lab hosts (pkg/nspawn): systemd-nspawn and debootstrap for the cached rootfs.
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v debootstrap >/dev/null || need+=(debootstrap)
# Debian packages (make packages, packaging/'s tests): strip for the binaries, lintian.
command -v strip >/dev/null || need+=(binutils)
command -v lintian >/dev/null || need+=(lintian)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
