#!/usr/bin/env bash
# Builds the Kubernetes binaries Plinth's tests run (kubeadm, kube-apiserver,
# kube-controller-manager, kubectl) from the Go module proxy, and caches them by version
# under ${PLINTH_CACHE:-$HOME/.cache/plinth}/k8s/VERSION. Builds only what is missing.
# --all also builds kubelet, kube-scheduler and kube-proxy (the site bundle's full set,
# scripts/build-bundle.sh) into the same directory.
#
# Why a scratch module: k8s.io/kubernetes needs a replace line per staging repo, which
# must never enter Plinth's go.mod. Usage: scripts/build-k8s.sh [--all] [VERSION]
# (default v1.37.2). Prints the cache directory on its last line.
set -euo pipefail
CMDS="kubeadm kube-apiserver kube-controller-manager kubectl"
if [ "${1:-}" = "--all" ]; then
  CMDS="$CMDS kube-scheduler kubelet kube-proxy"
  shift
fi
KV=${1:-${PLINTH_K8S_VERSION:-v1.37.2}}
CACHE=${PLINTH_CACHE:-$HOME/.cache/plinth}
OUT=$CACHE/k8s/$KV

missing=()
for c in $CMDS; do [ -x "$OUT/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$OUT"; exit 0; fi

mkdir -p "$CACHE/k8s"
# One builder at a time per cache; a second caller waits, then finds the binaries.
exec 9>"$CACHE/k8s/.build.lock"
flock 9
missing=()
for c in $CMDS; do [ -x "$OUT/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$OUT"; exit 0; fi

echo "build-k8s: building ${missing[*]} $KV (cold: several minutes on 2 cores)" >&2
SV="v0.${KV#v1.}" # v1.37.2 -> staging v0.37.2
W=$(mktemp -d "${TMPDIR:-/tmp}/plinth-k8sbins.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W"
GM=$(go mod download -json "k8s.io/kubernetes@$KV" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "module local/k8sbins"
  echo
  echo "go $(awk '/^go /{print $2; exit}' "$GM")"
  echo
  echo "require k8s.io/kubernetes $KV"
  echo
  echo "replace ("
  grep -E '^\s+k8s.io/[a-z0-9-]+ v0\.0\.0$' "$GM" | awk -v sv="$SV" '{print "\t" $1 " => " $1 " " sv}'
  echo ")"
} >go.mod
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in $CMDS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  printf ')\n'
} >tools.go
GOFLAGS=-mod=mod go mod tidy >&2

MIN=$(echo "$KV" | cut -d. -f2)
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF="$LDF -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=$MIN -X $p.gitTreeState=clean"
done
PKGS=()
for c in "${missing[@]}"; do PKGS+=("k8s.io/kubernetes/cmd/$c"); done
mkdir -p "$W/out"
CGO_ENABLED=0 go build -p 2 -trimpath -ldflags="$LDF" -o "$W/out/" "${PKGS[@]}" >&2
mkdir -p "$OUT"
for c in "${missing[@]}"; do mv -f "$W/out/$c" "$OUT/$c"; done
echo "$OUT"
