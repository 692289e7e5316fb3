#!/usr/bin/env bash
# Idle agent cost: this tree's plinth-agent (drivers in plinth-drivers and, for
# Ceph's kinds, plinth-drivers-ceph: one process per step or drift pass) next to a baseline agent built from BASE (default: the
# last commit whose agent linked every driver), both enrolled with one coordinator on
# loopback, each converging a real host.sysctl step (this machine's own value, so it
# changes nothing) and then left idle. Prints binary sizes, RSS (now and peak) and
# CPU (the agent and the drivers processes it waited for) per agent, and the ratio;
# for agents with drivers programs, the drift passes in the window, the CPU of one,
# and the agent's CPU at one pass a minute.
# bench/gossipfill fills the gossip pool up to FILL+3 members (default 50, a site's
# size), so each agent is probed and pinged as often as on a site: probes spread over
# a pool's members, and among three an agent would get a third of all of them.
# Beside them runs a pair of bench/wakefloor processes exchanging the packets an idle
# gossip member does and nothing else: the floor this machine puts under the agent.
# Asserts nothing.
#
#   scripts/bench-agent.sh            IDLE=130 (seconds; two drift passes at 60 s)
#   BASE=<git ref> scripts/bench-agent.sh   (e.g. BASE=HEAD: this change alone)
#   PERF=1 scripts/bench-agent.sh      also profiles this tree's agent while idle
#   PROFILE=fast scripts/bench-agent.sh  the coordinator's timing profile (default lan,
#                                       a site's default: fast gossips 5x as often)
#   FILL=0 scripts/bench-agent.sh      no filler: a pool of the coordinator and the agents
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BASE=${BASE:-bb8786e}
IDLE=${IDLE:-130}
TAGS=${TAGS:-ceph,pacific}
PROFILE=${PROFILE:-lan}
FILL=${FILL:-47}

work=$(mktemp -d "${TMPDIR:-/tmp}/plinth-bench-agent.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench-agent: building this tree and the baseline agent ($BASE)"
mkdir -p "$work/new" "$work/base"
$GO build -o "$work/new/plinth-coordinator" ./cmd/coordinator
$GO build -o "$work/new/plinth-agent" ./cmd/agent
$GO build -tags "$TAGS" -o "$work/new/plinth-drivers" ./cmd/drivers
$GO build -tags "$TAGS" -o "$work/new/plinth-drivers-ceph" ./cmd/drivers-ceph
(cd bench && $GO build -o "$work/new/wakefloor" ./wakefloor && $GO build -o "$work/new/gossipfill" ./gossipfill)
git worktree add -q --detach "$work/base-src" "$BASE"
(cd "$work/base-src" && $GO build -tags "$TAGS" -o "$work/base/plinth-agent" ./cmd/agent)
# A baseline after the agent/drivers split runs its own drivers program.
if [ -d "$work/base-src/cmd/drivers" ]; then
  (cd "$work/base-src" && $GO build -tags "$TAGS" -o "$work/base/plinth-drivers" ./cmd/drivers)
fi
# A baseline after the Ceph split runs Ceph's kinds in plinth-drivers-ceph.
if [ -d "$work/base-src/cmd/drivers-ceph" ]; then
  (cd "$work/base-src" && $GO build -tags "$TAGS" -o "$work/base/plinth-drivers-ceph" ./cmd/drivers-ceph)
fi

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
C="$work/new/plinth-coordinator"
ID="$work/admin.json"
api=127.0.0.1:$(port) join=127.0.0.1:$(port) gossip=127.0.0.1:$(port)
"$C" init --site bench --profile "$PROFILE" --admin-identity "$ID" --name c0 --data-dir "$work/c0" \
  --api-addr "$api" --join-addr "$join" --raft-addr 127.0.0.1:$(port) --gossip-addr "$gossip" >/dev/null
"$C" serve --data-dir "$work/c0" --log-level warn 2>"$work/c0.log" &
pids+=($!)
for _ in $(seq 100); do "$C" --identity "$ID" get hosts >/dev/null 2>&1 && break; sleep 0.2; done

key=net.ipv4.ip_forward
val=$(sysctl -n "$key")
declare -A addr=([new]=127.0.0.11 [base]=127.0.0.12)
for n in new base; do
  cat >>"$work/site.yaml" <<EOF
---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata: {name: node-$n}
spec:
  roles: [worker]
  managementAddress: ${addr[$n]}
  sysctls: {$key: "$val"}
EOF
done
"$C" --identity "$ID" apply -f "$work/site.yaml" >/dev/null

# An agent with drivers programs runs them through a counting wrapper (a sh script that
# appends a line per drift pass, then execs the program), so the window's drift passes
# are counted: at 60 s a window holds two or three, and a pass costs far more than the
# agent does between passes. The wrapper's sh adds about a millisecond a pass.
counting() {
  mkdir -p "$work/$1/counted"
  cat >"$work/$1/counted/plinth-drivers" <<EOF
#!/bin/sh
for a in "\$@"; do last=\$a; done
[ "\$last" = check ] && echo >>"$work/$1/counted/passes"
exec "$work/$1/plinth-drivers" "\$@"
EOF
  chmod +x "$work/$1/counted/plinth-drivers"
  ln -sf "$work/$1/plinth-drivers-ceph" "$work/$1/counted/plinth-drivers-ceph"
  echo "--drivers $work/$1/counted/plinth-drivers"
}
passes() { if [ -f "$work/$1/counted/passes" ]; then wc -l <"$work/$1/counted/passes"; else echo 0; fi; }
for n in new base; do
  drv=
  [ -f "$work/$n/plinth-drivers" ] && drv=$(counting "$n")
  tok=$("$C" --identity "$ID" node enroll "node-$n" --ttl 10m)
  printf '%s\n' "$tok" | "$work/$n/plinth-agent" join --state-dir "$work/state-$n" --coordinator "$join" --name "node-$n" --token-file - >/dev/null
  # shellcheck disable=SC2086
  "$work/$n/plinth-agent" run --state-dir "$work/state-$n" --gossip-addr "${addr[$n]}:$(port)" --log-level warn $drv 2>"$work/agent-$n.log" &
  pids+=($!)
  eval "pid_$n=$!"
done

fa=127.0.0.13:$(port) fb=127.0.0.14:$(port)
"$work/new/wakefloor" -listen "$fa" -peer "$fb" &
pids+=($!)
pid_floor=$!
"$work/new/wakefloor" -listen "$fb" -peer "$fa" &
pids+=($!)

if [ "$FILL" -gt 0 ]; then
  "$work/new/gossipfill" -n "$FILL" -state-dir "$work/state-new" -seed "$gossip" -bind 127.0.0.15 -profile "$PROFILE" >"$work/fill.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do grep -q joined "$work/fill.log" && break; sleep 0.2; done
  grep joined "$work/fill.log" || { echo "bench-agent: the gossip filler did not join:"; cat "$work/fill.log"; exit 1; }
fi

echo "bench-agent: waiting for both hosts' steps"
for _ in $(seq 300); do
  ok=$("$C" --identity "$ID" get steps -o json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); items=d if isinstance(d,list) else d.get("items",d.get("steps",[]))
print(sum(1 for s in items if s.get("state")=="Succeeded"), len(items))' 2>/dev/null || echo "0 0")
  set -- $ok
  [ "$1" -gt 0 ] && [ "$1" = "$2" ] && break
  sleep 0.5
done
echo "bench-agent: steps succeeded: $ok; idle for ${IDLE}s"
sleep 5

ticks() { awk '{print $14+$15+$16+$17}' "/proc/$1/stat"; }
selfticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
csw() { awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ {n+=$2} END {print n}' /proc/$1/task/*/status; }
kib() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)
p0_new=$(passes new) p0_base=$(passes base)
t0_new=$(ticks "$pid_new") t0_base=$(ticks "$pid_base")
s0_new=$(selfticks "$pid_new") s0_base=$(selfticks "$pid_base")
w0_new=$(csw "$pid_new") w0_base=$(csw "$pid_base")
f0=$(selfticks "$pid_floor") fw0=$(csw "$pid_floor")
if [ -n "${PERF:-}" ]; then
  perf record -q -F 999 -g -o "$work/perf.data" -p "$pid_new" -- sleep "$IDLE" >/dev/null 2>&1 &
  perfpid=$!
fi
sleep "$IDLE"
t1_new=$(ticks "$pid_new") t1_base=$(ticks "$pid_base")
p1_new=$(passes new) p1_base=$(passes base)
s1_new=$(selfticks "$pid_new") s1_base=$(selfticks "$pid_base")
w1_new=$(csw "$pid_new") w1_base=$(csw "$pid_base")
f1=$(selfticks "$pid_floor") fw1=$(csw "$pid_floor")
if [ -n "${PERF:-}" ]; then
  wait "$perfpid" 2>/dev/null || true
  perf report -i "$work/perf.data" --children --sort symbol -g none --percent-limit ${PERF_LIMIT:-2} --stdio 2>/dev/null | grep -v "^#" | grep "%" | cut -c1-110 | head -${PERF_ROWS:-45} || true
fi

size() { stat -c %s "$1"; }
stripped() { strip -o "$work/s" "$1" && stat -c %s "$work/s"; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b/1048576}'; }
echo
printf '%-34s %16s %16s %8s\n' "" "baseline ($BASE)" "this tree" "ratio"
row() { printf '%-34s %16s %16s %8s\n' "$1" "$2" "$3" "$4"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0) printf "%.2fx", b/a; else print "-"}'; }
bs=$(stripped "$work/base/plinth-agent") ns=$(stripped "$work/new/plinth-agent")
row "plinth-agent binary (stripped)" "$(mib "$bs")" "$(mib "$ns")" "$(ratio "$bs" "$ns")"
for p in plinth-drivers plinth-drivers-ceph; do
  b=-
  [ -f "$work/base/$p" ] && b=$(mib "$(stripped "$work/base/$p")")
  row "$p binary (stripped)" "$b" "$(mib "$(stripped "$work/new/$p")")" ""
done
br=$(kib "$pid_base" VmRSS) nr=$(kib "$pid_new" VmRSS)
row "idle RSS" "$(mib $((br * 1024)))" "$(mib $((nr * 1024)))" "$(ratio "$br" "$nr")"
bh=$(kib "$pid_base" VmHWM) nh=$(kib "$pid_new" VmHWM)
row "peak RSS since start" "$(mib $((bh * 1024)))" "$(mib $((nh * 1024)))" "$(ratio "$bh" "$nh")"
# What one drivers process costs at least: a drift pass over no steps, measured as a
# child, the mean of ten (a single run varies 2-3x on a busy machine). A host without
# Ceph steps only ever starts plinth-drivers; a baseline before the Ceph split ran
# every kind in its plinth-drivers.
cost() {
  python3 - "$1" "$2" <<'PY'
import resource, subprocess, sys
runs = 10
for _ in range(runs):
    subprocess.run([sys.argv[1], "--state-dir", sys.argv[2], "--log-level", "warn", "check"], input=b'{"probes":[]}', stdout=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_maxrss, round((r.ru_utime + r.ru_stime) * 1000 / runs))
PY
}
for p in plinth-drivers plinth-drivers-ceph; do
  bmax=- bcpu=-
  if [ -f "$work/base/$p" ]; then
    read -r bmax bcpu < <(cost "$work/base/$p" "$work/state-base")
    bmax=$(mib $((bmax * 1024))) bcpu="$bcpu ms"
  fi
  read -r dmax dcpu < <(cost "$work/new/$p" "$work/state-new")
  row "one $p process: peak RSS" "$bmax" "$(mib $((dmax * 1024)))" ""
  row "one $p process: CPU" "$bcpu" "${dcpu} ms" ""
done
bc=$(awk -v t=$((t1_base - t0_base)) -v hz="$hz" -v s="$IDLE" 'BEGIN {printf "%.3f", 100*t/hz/s}')
nc=$(awk -v t=$((t1_new - t0_new)) -v hz="$hz" -v s="$IDLE" 'BEGIN {printf "%.3f", 100*t/hz/s}')
row "idle CPU, % of a core (+children)" "$bc %" "$nc %" "$(ratio "$bc" "$nc")"
bsc=$(awk -v t=$((s1_base - s0_base)) -v hz="$hz" -v s="$IDLE" 'BEGIN {printf "%.3f", 100*t/hz/s}')
nsc=$(awk -v t=$((s1_new - s0_new)) -v hz="$hz" -v s="$IDLE" 'BEGIN {printf "%.3f", 100*t/hz/s}')
row "  of which the agent itself" "$bsc %" "$nsc %" "$(ratio "$bsc" "$nsc")"
# The drift passes: how many fell in the window, the CPU of each (the drivers
# processes the agent waited for, over the passes), and what the agent costs at one
# pass a minute (its own share plus one pass's CPU every 60 s), which does not depend
# on where the window's edges fell.
bp=$((p1_base - p0_base)) np=$((p1_new - p0_new))
row "  drift passes in the window" "$bp" "$np" ""
perpass() { awk -v t="$1" -v s="$2" -v n="$3" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.0f ms", 1000*(t-s)/hz/n; else print "-"}'; }
row "  CPU per drift pass" "$(perpass $((t1_base - t0_base)) $((s1_base - s0_base)) "$bp")" "$(perpass $((t1_new - t0_new)) $((s1_new - s0_new)) "$np")" ""
atmin() { awk -v t="$1" -v s="$2" -v n="$3" -v own="$4" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.3f %%", own + 100*(t-s)/hz/n/60; else print "-"}'; }
bm=$(atmin $((t1_base - t0_base)) $((s1_base - s0_base)) "$bp" "$bsc") nm=$(atmin $((t1_new - t0_new)) $((s1_new - s0_new)) "$np" "$nsc")
row "  at one drift pass a minute" "$bm" "$nm" "$(ratio "${bm% %}" "${nm% %}")"
bw=$(awk -v n=$((w1_base - w0_base)) -v s="$IDLE" 'BEGIN {printf "%.0f/s", n/s}')
nw=$(awk -v n=$((w1_new - w0_new)) -v s="$IDLE" 'BEGIN {printf "%.0f/s", n/s}')
row "  agent's context switches" "$bw" "$nw" ""
fc=$(awk -v t=$((f1 - f0)) -v hz="$hz" -v s="$IDLE" 'BEGIN {printf "%.3f", 100*t/hz/s}')
fw=$(awk -v n=$((fw1 - fw0)) -v s="$IDLE" 'BEGIN {printf "%.0f/s", n/s}')
row "floor: bare Go, same packets" "-" "$fc %" "$(ratio "$fc" "$nsc")"
row "  floor's context switches" "-" "$fw" ""
echo
echo "Idle window ${IDLE}s after both hosts' steps succeeded; CPU counts the agent and the drivers"
echo "processes it waited for (drift passes every 60 s). Both agents gossip (lan profile) with one"
echo "coordinator on loopback (its profile: $PROFILE) in a pool of $((FILL + 3)) members (bench/gossipfill);"
echo "RSS is VmRSS/VmHWM from /proc. The floor is bench/wakefloor: one CPU, a probe out and one in"
echo "every second with their acks, a tick every second, no memberlist; its ratio is the agent"
echo "itself over the floor."
