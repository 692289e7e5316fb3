#!/bin/bash
# The lab's one-node Ceph cluster, created inside a booted lab host by the Debian
# packages' own systemd units (ceph-mon@, ceph-mgr@, ceph-osd@). Run as root
# inside the host by pkg/lab/labceph; never on a real site, where Ceph exists
# before Plinth does.
#
# usage: bootstrap.sh IP ID
#   IP  the host's management address: mon host, public and cluster address
#   ID  the mon and mgr id (the host's name)
#
# Idempotent and resumable: every piece is made only if missing (a piece whose
# making was cut short is made again), every unit is enabled and started only if
# it is not already. Each change is printed as a line "changed: ..."; a run on a
# host that has the cluster prints none.
set -euo pipefail
IP=${1:?usage: bootstrap.sh IP ID}
ID=${2:?usage: bootstrap.sh IP ID}
CONF=/etc/ceph/ceph.conf
ADMIN=/etc/ceph/ceph.client.admin.keyring
MON=/var/lib/ceph/mon/ceph-$ID
MGR=/var/lib/ceph/mgr/ceph-$ID
OSD=/var/lib/ceph/osd/ceph-0
MON_ADDRS="[v2:$IP:3300,v1:$IP:6789]"
TMP=$(mktemp -d /var/lib/ceph/tmp/labceph.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
chown ceph:ceph "$TMP"

changed() { echo "changed: $*"; }
fail() { echo "labceph: $*" >&2; exit 1; }
# cli runs the ceph CLI as client.admin, waiting up to 60 s for the monitor.
cli() { ceph --connect-timeout 60 "$@"; }
# unit enables and starts a unit unless it is both already.
unit() {
  if ! systemctl -q is-enabled "$1" 2>/dev/null || ! systemctl -q is-active "$1"; then
    systemctl -q enable --now "$1"
    changed "$1 enabled and started"
  fi
}

# 1. Configuration: one node, memstore OSD, cephx. The mgr modules a lab does
#    not use are not loaded (they cost CPU on a small machine); the always-on
#    ones stay.
if [ ! -s "$CONF" ]; then
  FSID=$(cat /proc/sys/kernel/random/uuid)
  cat > "$TMP/ceph.conf" <<CONF
# The lab's one-node cluster (pkg/lab/labceph); never a real site's.
[global]
fsid = $FSID
mon host = $MON_ADDRS
mon initial members = $ID
public addr = $IP
cluster addr = $IP
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.05
mgr initial modules =
mgr disabled modules = alerts influx insights iostat localpool mirroring nfs osd_perf_query osd_support prometheus restful selftest snap_schedule stats telegraf test_orchestrator zabbix diskprediction_local dashboard cephadm rook k8sevents

[osd]
osd objectstore = memstore
memstore device bytes = 1073741824
# memstore writes its data to the OSD dir only when the store is unmounted,
# which a fast shutdown skips: without this a restarted OSD has lost its PGs.
osd fast shutdown = false
CONF
  install -m 0644 "$TMP/ceph.conf" "$CONF"
  changed "$CONF written (fsid $FSID)"
fi
FSID=$(ceph-conf -c "$CONF" --lookup fsid)
HAVE=$(ceph-conf -c "$CONF" --lookup mon_host)
[ "$HAVE" = "$MON_ADDRS" ] || fail "$CONF has mon host $HAVE, not $MON_ADDRS: this host's cluster was made for another address (remove /etc/ceph and /var/lib/ceph/*/ceph-* to start over)"

# 2. The admin keyring, where Ceph's clients (and Plinth's agent) look by default.
if [ ! -s "$ADMIN" ]; then
  ceph-authtool --create-keyring "$TMP/admin.keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  install -m 0600 "$TMP/admin.keyring" "$ADMIN"
  changed "$ADMIN written"
fi

# 3. The monitor: its store is made once, as the ceph user; "done" marks a
#    finished mkfs (a store without it is made again).
if [ ! -e "$MON/done" ]; then
  systemctl -q stop "ceph-mon@$ID" 2>/dev/null || true
  rm -rf "$MON"
  install -d -o ceph -g ceph -m 0750 "$MON"
  ceph-authtool --create-keyring "$TMP/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$TMP/mon.keyring" --import-keyring "$ADMIN" >/dev/null
  monmaptool --create --fsid "$FSID" --addv "$ID" "$MON_ADDRS" "$TMP/monmap" >/dev/null
  chown ceph:ceph "$TMP/mon.keyring" "$TMP/monmap"
  ceph-mon --cluster ceph --mkfs -i "$ID" --monmap "$TMP/monmap" --keyring "$TMP/mon.keyring" --setuser ceph --setgroup ceph
  install -o ceph -g ceph -m 0644 /dev/null "$MON/done"
  changed "mon.$ID created"
fi
unit ceph.target
unit ceph-mon.target
unit "ceph-mon@$ID"

# 4. The manager, with its key from the monitor.
if [ ! -s "$MGR/keyring" ]; then
  install -d -o ceph -g ceph -m 0750 "$MGR"
  cli auth get-or-create "mgr.$ID" mon 'allow profile mgr' osd 'allow *' mds 'allow *' -o "$TMP/mgr.keyring"
  install -o ceph -g ceph -m 0600 "$TMP/mgr.keyring" "$MGR/keyring"
  changed "mgr.$ID created"
fi
unit ceph-mgr.target
unit "ceph-mgr@$ID"

# 5. One memstore OSD, osd.0. Its "ready" file, written last by ceph-osd --mkfs
#    (after the cluster registered it), marks a finished OSD; anything short of
#    it is removed, from the cluster too, and made again.
if [ ! -e "$OSD/ready" ]; then
  systemctl -q disable --now ceph-osd@0 2>/dev/null || true
  if cli osd ls | grep -x 0 >/dev/null; then # (not -q: an early exit would fail the pipe)
    cli osd purge 0 --yes-i-really-mean-it
  fi
  rm -rf "$OSD"
  install -d -o ceph -g ceph -m 0750 "$OSD"
  OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
  SECRET=$(ceph-authtool --gen-print-key)
  ceph-authtool --create-keyring "$OSD/keyring" --name osd.0 --add-key "$SECRET" >/dev/null
  chown ceph:ceph "$OSD/keyring"
  N=$(echo "{\"cephx_secret\": \"$SECRET\"}" | cli osd new "$OSD_UUID" 0 -i -)
  [ "$N" = 0 ] || fail "ceph osd new $OSD_UUID 0 returned '$N', want 0"
  # (its stderr always has a line of a first load of the empty store)
  ceph-osd --cluster ceph -i 0 --mkfs --osd-uuid "$OSD_UUID" --setuser ceph --setgroup ceph 2>"$TMP/mkfs.err" ||
    { cat "$TMP/mkfs.err" >&2; fail "ceph-osd --mkfs of osd.0 failed"; }
  chown -R ceph:ceph "$OSD"
  changed "osd.0 created (memstore)"
fi
unit ceph-osd.target
unit ceph-osd@0
