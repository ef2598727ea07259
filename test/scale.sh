#!/usr/bin/env bash
# make scale: a cluster's write throughput as nodes and groups are added.
# A 2-core machine cannot hold six real machines, so each node gets a small
# machine of its own: a cgroup (v1 cpu controller) capping it at
# SCALE_QUOTA of every 100 ms of CPU time. The load (redis-benchmark
# --cluster: SETs of 16-byte values at random keys, SCALE_CLIENTS
# connections) runs outside the cgroups. For each configuration
# (nodes:groups) it builds a fresh cluster as the README does (the first
# node with --bootstrap --groups G, the others with kvs join), waits until
# every group has a leader and the leaderships are spread, and takes the
# median of SCALE_ROUNDS runs. Every process and cgroup it made is removed
# when it exits, however it exits. Needs root and redis-tools.
#
#   SCALE_CONFIGS   nodes:groups pairs (default "3:1 3:3 6:1 6:6")
#   SCALE_PERIOD    the cgroups' CFS period in microseconds (default 100000)
#   SCALE_QUOTA     microseconds of CPU per period per node (default a tenth
#                   of the period: 0.1 of a core, so that six nodes and the
#                   load fit in two cores)
#   SCALE_REQUESTS  SETs per run (default 30000)
#   SCALE_CLIENTS   connections (default 120: 20 per leader of six groups)
#   SCALE_ROUNDS    runs per configuration (default 3)
#   SCALE_PORT      first client port (default 17100); node i uses
#                   SCALE_PORT+i and SCALE_PORT+100+i for Raft
#   KVS             binary (default dist/kvs)
set -u
cd "$(dirname "$0")/.."

KVS=${KVS:-dist/kvs}
CONFIGS=${SCALE_CONFIGS:-"3:1 3:3 6:1 6:6"}
PERIOD=${SCALE_PERIOD:-100000}
QUOTA=${SCALE_QUOTA:-$((PERIOD / 10))}
REQUESTS=${SCALE_REQUESTS:-30000}
CLIENTS=${SCALE_CLIENTS:-120}
ROUNDS=${SCALE_ROUNDS:-3}
PORT=${SCALE_PORT:-17100}
CG=/sys/fs/cgroup/cpu

die() { echo "scale: $*" >&2; exit 2; }
[ -x "$KVS" ] || die "no kvs binary at $KVS (make build)"
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (apt-get install redis-tools)"
command -v redis-cli >/dev/null || die "redis-cli not found (apt-get install redis-tools)"
[ -w "$CG" ] || die "$CG is not writable: the CPU caps need root and the cgroup v1 cpu controller"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvs-scale.XXXXXX")
PIDS=()
CGROUPS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  for p in "${CGROUPS[@]}"; do rmdir "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cap PID NAME: puts the process in a cgroup of its own, capped at QUOTA.
cap() {
  local dir=$CG/kvs-scale-$2
  mkdir -p "$dir" || die "cannot make $dir"
  CGROUPS+=("$dir")
  echo "$PERIOD" >"$dir/cpu.cfs_period_us"
  echo "$QUOTA" >"$dir/cpu.cfs_quota_us"
  echo "$1" >"$dir/cgroup.procs"
}

# wait_until DESC CMD...: polls CMD until it succeeds, for up to 60 s.
wait_until() {
  local desc=$1; shift
  for _ in $(seq 600); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "timed out waiting for $desc"
}

# masters PORT: how many nodes CLUSTER NODES on PORT calls master with slots.
masters() {
  redis-cli -p "$1" cluster nodes 2>/dev/null | awk '$3 ~ /master/ && NF >= 9' | wc -l
}

# ready PORT NODES GROUPS: every slot served, leaderships spread.
ready() {
  redis-cli -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  local want=$(( $2 < $3 ? $2 : $3 ))
  [ "$(masters "$1")" -ge "$want" ]
}

# run_config NODES GROUPS: prints the median SETs/s of ROUNDS runs.
run_config() {
  local nodes=$1 groups=$2 i dir rps=() base
  base=$(mktemp -d "$WORK/$nodes-$groups.XXXXXX")
  PIDS=()
  for i in $(seq 1 "$nodes"); do
    dir=$base/n$i
    mkdir -p "$dir"
    local extra=()
    if [ "$i" = 1 ]; then
      extra=(--bootstrap --groups "$groups")
    else
      extra=(--groups "$groups")
    fi
    "$KVS" serve --data-dir "$dir" --addr "127.0.0.1:$((PORT + i))" --node-id "n$i" \
      --raft-addr "127.0.0.1:$((PORT + 100 + i))" --log-level warn "${extra[@]}" >"$dir/log" 2>&1 &
    PIDS+=($!)
    cap $! "n$i"
  done
  for i in $(seq 1 "$nodes"); do
    wait_until "node $i to listen" redis-cli -p "$((PORT + i))" ping
  done
  for i in $(seq 2 "$nodes"); do
    "$KVS" join "127.0.0.1:$((PORT + 1))" "127.0.0.1:$((PORT + i))" >/dev/null ||
      die "kvs join of node $i failed"
  done
  wait_until "$nodes nodes, $groups groups, leaders spread" ready "$((PORT + 1))" "$nodes" "$groups"
  # redis-benchmark --cluster wants several masters: one group's load goes
  # to its leader directly.
  local target=(--cluster -p "$((PORT + 1))")
  if [ "$groups" = 1 ]; then
    target=(-p "$(redis-cli -p "$((PORT + 1))" cluster nodes | awk '$3 ~ /master/ {split($2, a, "[:@]"); print a[2]}')")
  fi
  for _ in $(seq 1 "$ROUNDS"); do
    local out
    out=$(redis-benchmark -h 127.0.0.1 "${target[@]}" -t set -n "$REQUESTS" \
      -c "$CLIENTS" -d 16 -r 1000000 -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1)
    rps+=("$(echo "$out" | awk '{print $2}')")
  done
  printf '%s\n' "${rps[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)]}'
  echo -n " (runs: ${rps[*]})"
  for i in "${PIDS[@]}"; do kill -9 "$i" 2>/dev/null; done
  for i in "${PIDS[@]}"; do wait "$i" 2>/dev/null; done
  PIDS=()
}

echo "kvs cluster SET throughput, each node capped at $QUOTA us of CPU per 100 ms, $CLIENTS clients, $REQUESTS SETs per run, median of $ROUNDS"
printf '%-8s %-8s %s\n' nodes groups "SETs/s"
for cfg in $CONFIGS; do
  n=${cfg%%:*} g=${cfg##*:}
  printf '%-8s %-8s %s\n' "$n" "$g" "$(run_config "$n" "$g")"
done
