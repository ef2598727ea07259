#!/usr/bin/env bash
# Side-by-side throughput of kvs and redis-server on the same workload, in one
# run: redis-benchmark -t set,get -c 50 -r 100000 at -P 1 and -P 16.
#
#   kvs memory            vs  redis --appendonly no
#   kvs durable (always)  vs  redis --appendonly yes --appendfsync always
#
# Servers run on core 0 and the client on core 1 (taskset), so the client is
# never competing with the server it measures. Each pair runs ROUNDS times,
# alternating kvs and redis, and the median of the rounds is reported.
#
# Environment: KVS (binary, default dist/kvs), REQUESTS (per run, default
# 200000), ROUNDS (default 3), PORT (default 16390), OUT (markdown file,
# default dist/compare.md), MODES (default "memory always"; one of them
# alone runs just that pair).
set -euo pipefail
cd "$(dirname "$0")/.."

KVS=${KVS:-dist/kvs}
REQUESTS=${REQUESTS:-200000}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-16390}
OUT=${OUT:-dist/compare.md}
mkdir -p dist
for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "compare: $tool not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

SERVER_CPU=0 CLIENT_CPU=1
# pin CPU CMD...: runs CMD on core CPU. It execs, so a server started as
# `pin ... &` is the background job itself and $! is the server's pid.
pin() { local cpu=$1; shift; if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then exec taskset -c "$cpu" "$@"; else exec "$@"; fi; }

work=$(mktemp -d)
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap 'stop; rm -rf "$work"' EXIT INT TERM

# wait_ready waits until the server just started answers; one that died
# (a taken port) is an error, so nothing else on the port is measured.
wait_ready() {
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || { echo "compare: server exited at start (port $PORT taken?)" >&2; exit 1; }
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "compare: server on $PORT did not answer" >&2; exit 1
}

# start NAME: starts the server the configuration NAME names, on core 0.
start() {
  if redis-cli -p "$PORT" ping >/dev/null 2>&1; then
    echo "compare: something already answers on port $PORT; set PORT" >&2; exit 1
  fi
  rm -rf "$work/data"; mkdir -p "$work/data"
  case $1 in
    kvs-memory)    pin $SERVER_CPU "$KVS" serve --addr 127.0.0.1:$PORT --log-level warn & ;;
    kvs-always)    pin $SERVER_CPU "$KVS" serve --addr 127.0.0.1:$PORT --data-dir "$work/data" --fsync always --log-level warn & ;;
    redis-memory)  pin $SERVER_CPU redis-server --port $PORT --save '' --appendonly no --dir "$work/data" --logfile "$work/redis.log" & ;;
    redis-always)  pin $SERVER_CPU redis-server --port $PORT --save '' --appendonly yes --appendfsync always --dir "$work/data" --logfile "$work/redis.log" & ;;
  esac
  pid=$!
  wait_ready
}

# bench TEST PIPELINE: prints requests per second.
bench() {
  pin $CLIENT_CPU redis-benchmark -p "$PORT" -t "$1" -c 50 -r 100000 -n "$REQUESTS" -P "$2" --csv 2>/dev/null |
    awk -F'","' 'NR>1 { gsub(/"/, "", $2); print $2; exit }'
}

median() { sort -n | awk '{ a[NR]=$1 } END { if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }

declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for pair in ${MODES:-memory always}; do
    for who in kvs redis; do
      start "$who-$pair"
      for p in 1 16; do
        for t in set get; do
          [ "$pair" = always ] && [ "$t" = get ] && continue
          r=$(bench "$t" "$p")
          results["$who-$pair-$t-$p"]+="$r "
          echo "round $round $who-$pair $t -P $p: $r" >&2
        done
      done
      stop
    done
  done
done

{
  echo "| mode | test | pipeline | kvs ops/s | redis ops/s | kvs/redis |"
  echo "| --- | --- | --- | ---: | ---: | ---: |"
  for pair in ${MODES:-memory always}; do
    for t in set get; do
      [ "$pair" = always ] && [ "$t" = get ] && continue
      for p in 1 16; do
        k=$(echo ${results["kvs-$pair-$t-$p"]} | tr ' ' '\n' | median)
        r=$(echo ${results["redis-$pair-$t-$p"]} | tr ' ' '\n' | median)
        ratio=$(awk -v k="$k" -v r="$r" 'BEGIN { printf "%.2f", k/r }')
        label=$([ "$pair" = memory ] && echo "memory (redis appendonly no)" || echo "durable, fsync always (redis appendfsync always)")
        printf "| %s | %s | %s | %.0f | %.0f | %s |\n" "$label" "${t^^}" "$p" "$k" "$r" "$ratio"
      done
    done
  done
  echo
  echo "median of $ROUNDS rounds, $REQUESTS requests each, -c 50 -r 100000; server on core $SERVER_CPU, client on core $CLIENT_CPU"
} | tee "$OUT"
