#!/usr/bin/env bash
# Whole-site figures on one machine with pkg/lab's booted hosts (systemd-nspawn, Plinth
# installed by the site bundle's install.sh): rootfs build, host boot and install
# times, lab up -> every host enrolled, apply -> Site Ready (first apply and a
# one-address change), agent RSS and CPU while idle, memory per host, and how fast a
# killed agent is marked unreachable. Prints figures, asserts nothing. Needs root
# (systemd-nspawn, network namespaces, veth pairs, a bridge) and the site bundle.
#
#   scripts/bench-lab.sh [flags for bench/lab, e.g. -idle 30s -kill-runs 3 -cold-rootfs -v]
#   scripts/bench-lab.sh -kube -manifest examples/lab/site.yaml   (make bench-kube)
#
# It runs `make bundle` first (cached: under a minute when warm) and benchmarks the
# newest dist/plinth-bundle-*.tar; PLINTH_BUNDLE=FILE skips the build and uses FILE.
# The benchmark lives in the bench module (bench/go.mod). The CLI, the benchmark and
# the lab go into one scratch directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

if [ "$(id -u)" != 0 ]; then
  echo "bench-lab: needs root (systemd-nspawn, network namespaces, veth pairs, a bridge)" >&2
  exit 1
fi
for tool in ip nft systemd-nspawn; do
  command -v "$tool" >/dev/null || { echo "bench-lab: needs $tool; see scripts/install-deps.sh" >&2; exit 1; }
done

bundle=${PLINTH_BUNDLE:-}
if [ -z "$bundle" ]; then
  echo "bench-lab: make bundle (cached: under a minute when warm)"
  t0=$EPOCHREALTIME
  make --no-print-directory GO="$GO" bundle
  echo "bench-lab: make bundle took $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}') s"
  bundle=$(ls -t dist/plinth-bundle-*.tar 2>/dev/null | head -n1)
  [ -n "$bundle" ] || { echo "bench-lab: make bundle left no dist/plinth-bundle-*.tar" >&2; exit 1; }
fi
bundle=$(realpath "$bundle")

work=$(mktemp -d "${TMPDIR:-/tmp}/plinth-bench-lab.XXXXXX")
pid=
# mounts_under DIR: mount points at or below DIR, deepest first.
mounts_under() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
cleanup() {
  # The benchmark takes its lab down on exit or interrupt; this covers the case where
  # it was itself killed: the booted hosts outlive it, and -cleanup removes the
  # hosts, namespaces, links and bridge its lab.json records.
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  for rec in "$work"/plinth-bench-lab-*/lab/lab.json; do
    [ -e "$rec" ] || continue
    "$work/bin/bench-lab" -cleanup "$(dirname "$rec")" || true
  done
  # Never rm -rf across a mount: a host's overlay root, or the /dev a killed rootfs
  # build bind-mounted, would be walked into.
  local m
  for m in $(mounts_under "$work"); do umount -l "$m" 2>/dev/null || true; done
  if [ -n "$(mounts_under "$work")" ]; then
    echo "bench-lab: kept $work: still mounted below it:" $(mounts_under "$work") >&2
    return
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench-lab: building plinth-coordinator (the lab's CLI), runc-lab and the benchmark"
$GO build -o "$work/bin/plinth-coordinator" ./cmd/coordinator
$GO build -o "$work/bin/runc-lab" ./cmd/runc-lab
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
"$work/bin/bench-lab" -bin "$work/bin" -bundle "$bundle" -dir "$work" "$@" &
pid=$!
wait "$pid"
