#!/bin/sh
# bench-helm: pkg/helmrelease installing 20 small charts vs the helm CLI installing
# the same charts one by one, against one real kube-apiserver (internal/apiservertest),
# ratio printed. The CLI is built once from the Go module proxy at the SDK's version
# and cached. Figures, not assertions.
set -eu
cd "$(dirname "$0")/.."
version=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
cache=${PLINTH_CACHE:-$HOME/.cache/plinth}/helm/$version
if [ ! -x "$cache/helm" ]; then
	echo "building the helm CLI $version from the module proxy into $cache" >&2
	mkdir -p "$cache"
	tmp=$(mktemp -d)
	(cd "$tmp" && GOFLAGS= GOBIN="$cache" go install "helm.sh/helm/v4/cmd/helm@$version")
	rm -rf "$tmp"
fi
cd bench
PLINTH_HELM_CLI="$cache/helm" go test -run '^$' -bench Install20 -benchtime "${BENCHTIME:-3x}" ./helm/
