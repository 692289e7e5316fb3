#!/bin/sh
# bench-helm: pkg/helmrelease installing 20 small charts (one by one and in
# parallel) vs the helm CLI installing the same charts one by one, and the time to
# detect and recover a release left pending-upgrade by a killed process, against one
# real kube-apiserver (internal/apiservertest). The CLI is built once from the Go
# module proxy at the SDK's version and cached. Figures, not assertions.
# BENCHTIME=3x (default) is the rounds of each; Go runs one warm-up round first.
set -eu
cd "$(dirname "$0")/.."
version=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
cache=${PLINTH_CACHE:-$HOME/.cache/plinth}/helm/$version
if [ ! -x "$cache/helm" ]; then
	echo "building the helm CLI $version from the module proxy into $cache (a few minutes)" >&2
	mkdir -p "$cache"
	tmp=$(mktemp -d)
	# Outside any module, so that the CLI is built from its own go.mod.
	(cd "$tmp" && GOFLAGS= GOBIN="$cache" go install "helm.sh/helm/v4/cmd/helm@$version")
	rm -rf "$tmp"
fi
"$cache/helm" version --short
cd bench
PLINTH_HELM_CLI="$cache/helm" go test -run '^$' -bench 'Install20|StuckRecovery' -benchtime "${BENCHTIME:-3x}" -timeout 30m ./helm/
