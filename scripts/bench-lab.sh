#!/usr/bin/env bash
# Whole-site figures on one machine with pkg/lab: apply -> Site Ready (first apply and
# a one-address change), agent RSS and CPU while idle, and how fast a kill -9'd agent
# is marked unreachable. Prints figures, asserts nothing. Needs root (the lab creates
# network namespaces, veth pairs and a bridge) and iproute2.
#
#   scripts/bench-lab.sh [flags for bench/lab, e.g. -idle 30s -kill-runs 3 -v]
#
# The benchmark lives in the bench module (bench/go.mod). Binaries and the lab go
# into one scratch directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

if [ "$(id -u)" != 0 ]; then
  echo "bench-lab: needs root (network namespaces, veth pairs, a bridge)" >&2
  exit 1
fi
command -v ip >/dev/null || { echo "bench-lab: needs iproute2 (ip); see scripts/install-deps.sh" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/plinth-bench-lab.XXXXXX")
pid=
cleanup() {
  # The benchmark takes its lab down on exit or interrupt; this covers the case where
  # it was itself killed: its processes die with it (Pdeathsig), and -cleanup removes
  # the namespaces, links and bridge its lab.json records.
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  for rec in "$work"/plinth-bench-lab-*/lab/lab.json; do
    [ -e "$rec" ] || continue
    "$work/bin/bench-lab" -cleanup "$(dirname "$rec")" || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench-lab: building plinth-coordinator, plinth-agent and the benchmark"
$GO build -o "$work/bin/plinth-coordinator" ./cmd/coordinator
$GO build -o "$work/bin/plinth-agent" ./cmd/agent
if ! (cd bench && $GO build -o "$work/bin/bench-lab" ./lab 2>"$work/build.err"); then
  # bench/go.mod lags the root go.mod (a dependency bump there): build against a
  # scratch copy that go may update, leaving bench/go.mod and go.sum untouched.
  if grep -qE 'go mod tidy|updates to go.mod needed|missing go.sum entry' "$work/build.err"; then
    echo "bench-lab: bench/go.mod is out of date with ../go.mod; building with a scratch copy (run 'cd bench && go mod tidy' to fix)" >&2
    mkdir -p "$work/mod"
    cp bench/go.mod "$work/mod/go.mod"
    cp bench/go.sum "$work/mod/go.sum"
    (cd bench && $GO build -modfile="$work/mod/go.mod" -mod=mod -o "$work/bin/bench-lab" ./lab)
  else
    cat "$work/build.err" >&2
    exit 1
  fi
fi

# Run in the background and wait, so the traps fire on Ctrl-C while it runs.
"$work/bin/bench-lab" -bin "$work/bin" -dir "$work" "$@" &
pid=$!
wait "$pid"
