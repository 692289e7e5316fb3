#!/usr/bin/env bash
# Installs the host packages Plinth's tests and lab use, idempotently.
# Only Debian packages: iproute2 (ip), nftables (partitions), iputils-ping, systemd (systemd-analyze).
set -euo pipefail
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v nft >/dev/null || need+=(nftables)
command -v ping >/dev/null || need+=(iputils-ping)
command -v systemd-analyze >/dev/null || need+=(systemd)
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
