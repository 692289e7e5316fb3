#!/usr/bin/env bash
# Site scale: a real 3-member coordinator cluster on loopback and N real agents
# (simulated drivers and facts) in one process; apply -> Site Ready, a change to
# every host and to one, at N = 100, 300, 1000 by default, and the same shape as an
# Ansible play at N = 200. Prints figures, asserts nothing.
#
#   scripts/bench-scale.sh [flags for bench/scale, e.g. -n 100,300 -ansible 0]
#
# Needs root only to install Debian's ansible-core for the comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

if ! command -v ansible-playbook >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "bench-scale: installing ansible-core"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends ansible-core >/dev/null
  else
    echo "bench-scale: ansible-playbook missing (apt-get install ansible-core): the comparison is skipped" >&2
  fi
fi

. scripts/bench-scratch.sh bench-scale "$@"

echo "bench-scale: building plinth-coordinator and the benchmark"
$GO build -o "$work/bin/plinth-coordinator" ./cmd/coordinator
(cd bench && $GO build -o "$work/bin/bench-scale" ./scale)

# A thousand agents hold a few thousand sockets and files.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
bench_run "$work/bin/bench-scale" -bin "$work/bin" -dir "$work" "$@"
