#!/usr/bin/env bash
# Builds the offline site bundle, dist/plinth-bundle-<version>.tar (make bundle): the
# Plinth packages from `make packages`, and everything else built from the Go module
# proxy at the versions pkg/bundle pins (`plinth-bundle pins`): Kubernetes, etcd, the
# CNI plugins, CoreDNS, and the bundle's own small programs (deploy/bundle: pause,
# hello, imgbuild; flanneld in its own module, from flannel's packages), then the
# image archives. Every part is cached by version (upstream)
# or by content (ours, images) under ${PLINTH_CACHE:-$HOME/.cache/plinth}, so a warm
# run only re-assembles and verifies the archive. Each phase prints its name, elapsed
# seconds and "cached" or "built"; long builds print a line every 30 s and keep
# their output in $PLINTH_CACHE/logs/.
#
# Why scratch modules: upstream programs bring their own dependency graphs (and
# Kubernetes a replace line per staging repo), which must never enter Plinth's go.mod.
#
# --parts builds and caches every part but Plinth's own packages (make bundle-parts:
# make test runs it beside the Go tests) and writes no archive.
#
# Environment: BUNDLE_VERSION (default: the packages' Debian version), DEB_VERSION
# (which dist/plinth-*_<v>_amd64.deb to take; default: the newest), DIST (default dist).
set -euo pipefail
cd "$(dirname "$0")/.."
PARTS_ONLY=0
case "${1:-}" in
  --parts) PARTS_ONLY=1 ;;
  "") ;;
  *) echo "usage: $0 [--parts]" >&2; exit 2 ;;
esac
REPO=$PWD
CACHE=${PLINTH_CACHE:-$HOME/.cache/plinth}
DIST=${DIST:-dist}
LOGS=$CACHE/logs
mkdir -p "$CACHE" "$LOGS" "$DIST"
DIST=$(realpath "$DIST")

# One bundle build at a time per cache.
exec 8>"$CACHE/.bundle.lock"
flock 8

T0=$EPOCHREALTIME
PHASE="" PT=""
begin() { PHASE=$1 PT=$EPOCHREALTIME; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }
done_() { printf 'bundle: %-12s %7ss  %s\n' "$PHASE" "$(since "$PT")" "$1"; }
die() { echo "bundle: $PHASE: $*" >&2; exit 1; }

# logged LOG CMD...: runs CMD with its output in LOG, a progress line every 30 s,
# and the log's tail on failure.
logged() {
  local log=$1; shift
  "$@" >"$log" 2>&1 &
  local pid=$! n=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if ((n % 30 == 0)); then printf 'bundle: %-12s %7ss  building... (log: %s)\n' "$PHASE" "$(since "$PT")" "$log"; fi
  done
  if ! wait "$pid"; then
    tail -n 30 "$log" >&2
    die "build failed (full log: $log)"
  fi
}

W=$(mktemp -d "${TMPDIR:-/tmp}/plinth-bundle.XXXXXX")
trap 'rm -rf "$W"' EXIT

# --- the bundle tool, and the pinned versions from pkg/bundle (their one home)
begin tool
before=$(sha256sum bin/plinth-bundle 2>/dev/null || true)
go build -o bin/plinth-bundle ./cmd/plinth-bundle
[ "$before" = "$(sha256sum bin/plinth-bundle)" ] && done_ cached || done_ built
PB=$REPO/bin/plinth-bundle
while IFS='=' read -r k v; do
  [[ $k =~ ^[A-Z_]+$ && $v =~ ^[0-9A-Za-z.+~_-]+$ ]] || die "unexpected pin line: $k=$v"
  printf -v "PIN_$k" '%s' "$v"
done < <("$PB" pins)
REG=$PIN_IMAGE_REGISTRY

# --- Kubernetes: scripts/build-k8s.sh owns that build and its cache
begin kubernetes
K8S=$CACHE/k8s/$PIN_KUBERNETES
K8S_CMDS="kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy"
have=1
for c in $K8S_CMDS; do [ -x "$K8S/$c" ] || have=0; done
if ((have)); then done_ "cached $PIN_KUBERNETES"; else
  logged "$LOGS/k8s-$PIN_KUBERNETES.log" ./scripts/build-k8s.sh --all "$PIN_KUBERNETES"
  done_ "built $PIN_KUBERNETES"
fi

# upstream NAME VERSION "MODULE..." "OUT=PKG..." [LDFLAGS]: builds each PKG of a
# scratch module requiring MODULE@VERSION into $CACHE/NAME/VERSION/OUT, unless cached.
# The cache directory appears only once every program is built.
upstream() {
  local name=$1 version=$2 mods=$3 outs=$4 ldf="-s -w ${5:-}"
  local dst=$CACHE/$name/$version
  begin "$name"
  if [ -d "$dst" ]; then done_ "cached $version"; return; fi
  local m=$W/src-$name tmp
  mkdir -p "$m" "$CACHE/$name"
  {
    echo "module local/${name}bin"; echo; echo "go 1.26"; echo
    for mod in $mods; do echo "require $mod $version"; done
  } >"$m/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for o in $outs; do printf '\t_ "%s"\n' "${o#*=}"; done
    printf ')\n'
  } >"$m/tools.go"
  tmp=$(mktemp -d "$CACHE/$name/.tmp-XXXXXX")
  chmod 755 "$tmp"
  build_all() {
    cd "$m"
    GOFLAGS="-mod=mod -buildvcs=false" go mod tidy
    for o in $outs; do
      CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -p 2 -trimpath -ldflags="$ldf" -o "$tmp/${o%%=*}" "${o#*=}"
    done
  }
  logged "$LOGS/$name-$version.log" build_all
  mv -T "$tmp" "$dst"
  done_ "built $version"
}

upstream etcd "$PIN_ETCD" "go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3" \
  "etcd=go.etcd.io/etcd/server/v3 etcdctl=go.etcd.io/etcd/etcdctl/v3"
CNIP=github.com/containernetworking/plugins
upstream cni "$PIN_CNI_PLUGINS" "$CNIP" \
  "bridge=$CNIP/plugins/main/bridge host-local=$CNIP/plugins/ipam/host-local loopback=$CNIP/plugins/main/loopback portmap=$CNIP/plugins/meta/portmap" \
  "-X $CNIP/pkg/utils/buildversion.BuildVersion=$PIN_CNI_PLUGINS"
upstream coredns "$PIN_COREDNS" "github.com/coredns/coredns" "coredns=github.com/coredns/coredns"

# --- our own small programs (deploy/bundle), cached by the hash of their sources
begin programs
key=$( (cd deploy/bundle && find . -path ./flanneld -prune -o -type f -print0 | sort -z | xargs -0 sha256sum; go version) | sha256sum | cut -c1-16)
OWN=$CACHE/bundle-programs/$key
if [ -d "$OWN" ]; then done_ cached; else
  mkdir -p "$CACHE/bundle-programs"
  tmp=$(mktemp -d "$CACHE/bundle-programs/.tmp-XXXXXX")
  chmod 755 "$tmp"
  build_own() {
    cd "$REPO/deploy/bundle"
    for p in pause hello imgbuild; do
      CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$tmp/$p" "./$p"
    done
  }
  logged "$LOGS/bundle-programs.log" build_own
  mv -T "$tmp" "$OWN"
  done_ built
fi

# --- flanneld (deploy/bundle/flanneld, its own module requiring flannel at the pin),
# cached by the flannel version and the hash of its sources
begin flannel
key=$( (cd deploy/bundle/flanneld && find . -type f -print0 | sort -z | xargs -0 sha256sum; go version) | sha256sum | cut -c1-16)
FLN=$CACHE/flannel/$PIN_FLANNEL-$key
if [ -d "$FLN" ]; then done_ "cached $PIN_FLANNEL"; else
  grep -Eq "^(require)?[[:space:]]*github.com/flannel-io/flannel $PIN_FLANNEL\$" deploy/bundle/flanneld/go.mod ||
    die "deploy/bundle/flanneld/go.mod does not require github.com/flannel-io/flannel $PIN_FLANNEL (the pin)"
  mkdir -p "$CACHE/flannel"
  tmp=$(mktemp -d "$CACHE/flannel/.tmp-XXXXXX")
  chmod 755 "$tmp"
  build_flanneld() {
    cd "$REPO/deploy/bundle/flanneld"
    CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -p 2 -trimpath -ldflags='-s -w' -o "$tmp/flanneld" .
  }
  logged "$LOGS/flannel-$PIN_FLANNEL.log" build_flanneld
  mv -T "$tmp" "$FLN"
  done_ "built $PIN_FLANNEL"
fi

# --- image archives, cached by the hash of everything that goes into each
begin images
mkdir -p "$CACHE/images"
command -v nft >/dev/null || die "kube-proxy's image needs /usr/sbin/nft and its libraries from this host: apt-get install nftables"
NFT="$(command -v nft)=/usr/sbin/nft"
for l in $(ldd "$(command -v nft)" | grep -o '/[^ ]*lib[^ ]*\.so[^ ]*'); do NFT="$NFT $(readlink -f "$l")=$l"; done
declare -A IMG_PATH
built=0 cached=0
# image NAME TAG ENTRYPOINT FILE...
image() {
  local name=$1 tag=$2 ep=$3; shift 3
  local ref=$REG/$name:$tag k
  k=$( {
    echo "$ref $ep $*"
    sha256sum "$OWN/imgbuild"
    for f in "$@"; do sha256sum "${f%%=*}"; done
  } | sha256sum | cut -c1-16)
  local out=$CACHE/images/$name-$tag-$k.tar
  if [ -f "$out" ]; then cached=$((cached + 1)); else
    local args=(-o "$out" -ref "$ref")
    [ "$ep" = - ] || args+=(-entrypoint "$ep")
    "$OWN/imgbuild" "${args[@]}" "$@" || die "imgbuild $ref failed"
    built=$((built + 1))
  fi
  IMG_PATH[$name]=$out
}
image pause "$PIN_PAUSE" /usr/local/bin/pause "$OWN/pause"
for c in kube-apiserver kube-controller-manager kube-scheduler; do image "$c" "$PIN_KUBERNETES" - "$K8S/$c"; done
# shellcheck disable=SC2086 # NFT is a list of SRC=DEST words
image kube-proxy "$PIN_KUBERNETES" - "$K8S/kube-proxy" $NFT
image coredns "$PIN_COREDNS" /usr/local/bin/coredns "$CACHE/coredns/$PIN_COREDNS/coredns"
image hello "$PIN_HELLO" /usr/local/bin/hello "$OWN/hello"
image flannel "$PIN_FLANNEL" /usr/local/bin/flanneld "$FLN/flanneld"
if ((built)); then done_ "built $built, cached $cached"; else done_ "cached $cached"; fi
if ((PARTS_ONLY)); then
  printf 'bundle: %-12s %7ss  %s\n' total "$(since "$T0")" "parts cached under $CACHE"
  exit 0
fi

# --- the Plinth packages from make packages
begin packages
if [ -z "${DEB_VERSION:-}" ]; then
  newest=$(ls -t "$DIST"/plinth-agent_*_amd64.deb 2>/dev/null | head -n1 || true)
  [ -n "$newest" ] || die "no $DIST/plinth-agent_<version>_amd64.deb: run make packages first"
  DEB_VERSION=${newest##*/plinth-agent_}
  DEB_VERSION=${DEB_VERSION%_amd64.deb}
fi
for p in plinth-agent plinth-coordinator; do
  [ -f "$DIST/${p}_${DEB_VERSION}_amd64.deb" ] || die "no $DIST/${p}_${DEB_VERSION}_amd64.deb: run make packages (VERSION=$DEB_VERSION)"
done
done_ "found $DEB_VERSION"

# --- stage (symlinks into the cache), assemble, verify
begin assemble
S=$W/stage
mkdir -p "$S/bin" "$S/cni" "$S/images" "$S/debs"
for c in kubelet kubeadm kubectl; do ln -s "$K8S/$c" "$S/bin/$c"; done
for c in etcd etcdctl; do ln -s "$CACHE/etcd/$PIN_ETCD/$c" "$S/bin/$c"; done
for c in bridge host-local loopback portmap; do ln -s "$CACHE/cni/$PIN_CNI_PLUGINS/$c" "$S/cni/$c"; done
for n in "${!IMG_PATH[@]}"; do ln -s "${IMG_PATH[$n]}" "$S/images/$n.tar"; done
for p in plinth-agent plinth-coordinator; do ln -s "$DIST/${p}_${DEB_VERSION}_amd64.deb" "$S/debs/"; done
note=""
if [ -f deploy/install.sh ]; then ln -s "$REPO/deploy/install.sh" "$S/install.sh"; else note=" (no deploy/install.sh yet: bundle has no install.sh)"; fi
"$PB" assemble --from "$S" --out "$DIST" ${BUNDLE_VERSION:+--version "$BUNDLE_VERSION"} >"$W/assemble.out" || die "assemble failed"
TAR=$(sed -n 's/^wrote \(.*\): bundle .*/\1/p' "$W/assemble.out")
done_ "built $(du -m "$TAR" | cut -f1) MiB$note"

begin verify
"$PB" verify "$TAR" >/dev/null
done_ ok

printf 'bundle: %-12s %7ss  %s\n' total "$(since "$T0")" "$TAR"
"$PB" show "$TAR"
