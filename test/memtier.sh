#!/usr/bin/env bash
# make memtier: the reference performance page's workload against one kvs
# mode. It starts dist/kvs, waits until it answers (in cluster mode, until
# all three nodes see three members and a leader), writes every key once,
# then runs 4 threads x 50 clients, SET:GET 1:10, 32-byte values at random
# keys among 100,001 for BENCH_TIME seconds, with memtier_benchmark when it
# is on PATH and with `kvs bench` (same flags, same JSON) otherwise. The
# JSON lands in dist/memtier-<mode>.json. Every process it started is
# stopped when it exits, however it exits.
#
#   BENCH_MODE      memory (default) | durable | cluster
#   BENCH_TIME      seconds of measured load (default 60)
#   KVS_BENCH_PORT  client port (default 16379); cluster nodes use it, +1
#                   and +2, and Raft ports 100 above each
#   KVS             binary (default dist/kvs)
#   BENCH_JSON      where the JSON goes (default dist/memtier-<mode>.json)
#
# Sourced (as test/compare-redis.sh does), it only defines the functions.

KVS=${KVS:-dist/kvs}
# LAUNCH is a command prefix for servers, e.g. (taskset -c 0). It must exec
# the server so that $! is the server's pid.
LAUNCH=()
PIDS=()     # every server started, for stop_started
LOAD_PORT=  # the port start_kvs's load should go to (the cluster leader's)

# The reference workload; load_cmd passes it to either tool. Its 100,001
# keys are numbered from 1: memtier_benchmark refuses --key-minimum 0.
WORKLOAD_KEY_MIN=1
WORKLOAD_KEY_MAX=100001
WORKLOAD_ARGS=(--threads 4 --clients 50 --ratio 1:10 --data-size 32
  --key-minimum "$WORKLOAD_KEY_MIN" --key-maximum "$WORKLOAD_KEY_MAX" --key-prefix memtier- --key-pattern R:R)

# port_answers PORT: true if something accepts connections on PORT.
port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# resp_ping PORT: true if the server on PORT answers PING with PONG.
resp_ping() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf '*1\r\n$4\r\nPING\r\n' >&3
    IFS= read -r -t 2 line <&3 || exit 1
    [[ $line == +PONG* ]]
  ) 2>/dev/null
}

# kvs_ports MODE PORT: every port MODE occupies.
kvs_ports() {
  if [ "$1" = cluster ]; then
    echo "$2" $(($2 + 1)) $(($2 + 2)) $(($2 + 100)) $(($2 + 101)) $(($2 + 102))
  else
    echo "$2"
  fi
}

# require_free_ports MODE PORT: refuses, naming the port, if one is taken.
require_free_ports() {
  local p
  for p in $(kvs_ports "$1" "$2"); do
    if port_answers "$p"; then
      echo "memtier: port $p is already in use; stop what runs there or set KVS_BENCH_PORT" >&2
      return 1
    fi
  done
}

# wait_until SECONDS DESCRIPTION CMD...: polls CMD every 0.1s until it
# succeeds, or fails after SECONDS. Every started server must stay alive.
wait_until() {
  local secs=$1 what=$2 pid
  shift 2
  for _ in $(seq 1 $((secs * 10))); do
    for pid in "${PIDS[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "memtier: server $pid exited while waiting for $what" >&2; return 1; }
    done
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "memtier: timed out after ${secs}s waiting for $what" >&2
  return 1
}

# launch LOG ARGS...: starts a server in the background, logging to LOG.
launch() {
  local log=$1
  shift
  "${LAUNCH[@]}" "$@" >"$log" 2>&1 &
  PIDS+=($!)
}

# cluster_ready PORT...: every node's `kvs status` names a leader and lists
# all of them as leader or follower, none unreachable.
cluster_ready() {
  local p out
  for p in "$@"; do
    out=$("$KVS" status "127.0.0.1:$p") || return 1
    grep -q '^leader: *(none)' <<<"$out" && return 1
    grep -q unreachable <<<"$out" && return 1
    [ "$(grep -cE '^[^ ]+ +(leader|follower) ' <<<"$out")" -eq $# ] || return 1
  done
}

# leader_port PORT: the client port of the leader, as the node on PORT
# sees it.
leader_port() {
  "$KVS" status "127.0.0.1:$1" | awk '/^leader:/ { n = split($NF, a, ":"); print a[n]; exit }'
}

# start_kvs MODE PORT DIR [SERVE FLAGS...]: starts kvs in MODE (memory,
# durable or cluster) with its data and logs under DIR, waits until it is
# ready and sets LOAD_PORT.
start_kvs() {
  local mode=$1 port=$2 dir=$3 i p
  shift 3
  require_free_ports "$mode" "$port" || return 1
  mkdir -p "$dir"
  case $mode in
    memory)
      launch "$dir/kvs.log" "$KVS" serve --addr "127.0.0.1:$port" --log-level warn "$@"
      wait_until 30 "kvs on port $port" resp_ping "$port" || { tail -20 "$dir/kvs.log" >&2; return 1; }
      ;;
    durable)
      launch "$dir/kvs.log" "$KVS" serve --addr "127.0.0.1:$port" --data-dir "$dir/data" --log-level warn "$@"
      wait_until 30 "kvs on port $port" resp_ping "$port" || { tail -20 "$dir/kvs.log" >&2; return 1; }
      ;;
    cluster)
      for i in 0 1 2; do
        p=$((port + i))
        launch "$dir/n$((i + 1)).log" "$KVS" serve --addr "127.0.0.1:$p" --data-dir "$dir/n$((i + 1))" \
          --node-id "n$((i + 1))" --raft-addr "127.0.0.1:$((p + 100))" --log-level warn \
          $([ "$i" = 0 ] && echo --bootstrap) "$@"
        wait_until 30 "node n$((i + 1)) on port $p" resp_ping "$p" || { tail -20 "$dir/n$((i + 1)).log" >&2; return 1; }
      done
      # The first node may still be electing itself: join retries until it
      # has a leader to add the others.
      for i in 1 2; do
        wait_until 30 "n$((i + 1)) to join" "$KVS" join "127.0.0.1:$port" "127.0.0.1:$((port + i))" || return 1
      done
      wait_until 60 "three members and a leader on every node" cluster_ready "$port" $((port + 1)) $((port + 2)) || {
        "$KVS" status "127.0.0.1:$port" >&2 || true
        return 1
      }
      ;;
    *)
      echo "memtier: unknown mode $mode (memory, durable or cluster)" >&2
      return 1
      ;;
  esac
  LOAD_PORT=$port
  if [ "$mode" = cluster ]; then
    LOAD_PORT=$(leader_port "$port")
  fi
}

# stop_started: SIGTERM to every server started, SIGKILL to any still
# running 30 seconds later.
stop_started() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
}

# have_memtier: memtier_benchmark is installed and not overridden by
# NO_MEMTIER=1.
have_memtier() { [ -z "${NO_MEMTIER:-}" ] && command -v memtier_benchmark >/dev/null; }

# run_load PORT SECONDS JSON [CLIENT PREFIX...]: writes every key once, then
# runs the workload for SECONDS against 127.0.0.1:PORT, writing the JSON and
# printing the summary table on stdout.
run_load() {
  local port=$1 secs=$2 json=$3
  shift 3
  if have_memtier; then
    "$@" memtier_benchmark -s 127.0.0.1 -p "$port" --protocol=redis --ratio 1:0 --key-pattern P:P \
      --key-minimum "$WORKLOAD_KEY_MIN" --key-maximum "$WORKLOAD_KEY_MAX" --key-prefix memtier- --data-size 32 \
      --requests allkeys --pipeline 64 --hide-histogram >/dev/null 2>&1 || {
      echo "memtier: the prefill failed" >&2
      return 1
    }
    "$@" memtier_benchmark -s 127.0.0.1 -p "$port" --protocol=redis "${WORKLOAD_ARGS[@]}" \
      --test-time "$secs" --hide-histogram --json-out-file "$json"
  else
    "$@" "$KVS" bench --server 127.0.0.1 --port "$port" "${WORKLOAD_ARGS[@]}" --prefill \
      --test-time "$secs" --hide-histogram --json-out-file "$json"
  fi
}

memtier_main() {
  set -euo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  local mode=${BENCH_MODE:-memory} secs=${BENCH_TIME:-60} port=${KVS_BENCH_PORT:-16379}
  case $mode in memory | durable | cluster) ;; *)
    echo "memtier: BENCH_MODE=$mode: want memory, durable or cluster" >&2
    exit 2
    ;;
  esac
  [ -x "$KVS" ] || { echo "memtier: $KVS not built (make build)" >&2; exit 1; }
  WORK=$(mktemp -d)
  trap 'stop_started; rm -rf "$WORK"' EXIT
  trap 'exit 130' INT TERM

  local json=${BENCH_JSON:-dist/memtier-$mode.json}
  mkdir -p "$(dirname "$json")"
  start_kvs "$mode" "$port" "$WORK"
  local tool="kvs bench"
  have_memtier && tool=memtier_benchmark
  echo "memtier: kvs $mode on port $LOAD_PORT; $tool for ${secs}s after writing every key" >&2
  run_load "$LOAD_PORT" "$secs" "$json"
  echo "memtier: results in $json" >&2
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  memtier_main "$@"
fi
