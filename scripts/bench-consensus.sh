#!/usr/bin/env bash
# Leader failover time and write throughput/latency: Plinth's 3-member coordinator
# cluster against a 3-member etcd cluster on loopback, in one run. Prints figures,
# asserts nothing. Needs root only to install etcd (Debian package etcd-server).
#
#   scripts/bench-consensus.sh [flags for bench/consensus, e.g. -runs 5 -duration 5s]
#
# The benchmark is its own Go module (bench/go.mod), so the etcd client never enters
# Plinth's go.mod. Everything goes into one scratch directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

# etcd server: Debian's etcd-server (3.4). Installed once, never started as a service
# by us; the benchmark starts its own members on free loopback ports.
ETCD=${ETCD:-/usr/bin/etcd}
if [ ! -x "$ETCD" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "bench-consensus: $ETCD missing; run as root or: apt-get install etcd-server" >&2
    exit 1
  fi
  echo "bench-consensus: installing etcd-server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d (where present) keeps the packaged service from starting.
  apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
fi

. scripts/bench-scratch.sh bench-consensus "$@"

echo "bench-consensus: building plinth-coordinator and the benchmark"
$GO build -o "$work/bin/plinth-coordinator" ./cmd/coordinator
(cd bench && $GO build -o "$work/bin/bench-consensus" ./consensus)

bench_run "$work/bin/bench-consensus" -bin "$work/bin" -etcd "$ETCD" -dir "$work" "$@"
