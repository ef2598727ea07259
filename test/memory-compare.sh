#!/usr/bin/env bash
# Memory of kvs beside redis-server for the same data, as a markdown table:
# the resident set (RSS, /proc/PID/status VmRSS) each server adds by holding
#
#   hashes   1M keys, each a hash of 10 fields (f0..f9, 8-byte values)
#   bighash  one hash of 1M fields (8-byte values)
#   zset     one sorted set of 1M members (8-byte members, random scores)
#   list     one list of 1M elements (8-byte values)
#   strings  1M string keys of 8-byte values
#   stream   one stream of 1M entries (IDs 1-1 up, one field of an 8-byte
#            value each), as XADD adds them
#
# Each dataset is loaded into a fresh server (kvs memory mode, redis
# --appendonly no) with redis-cli --pipe; RSS is read before the load and
# again once it settles, and the table shows the growth and the ratio.
#
# Environment: KVS (binary, default dist/kvs), PORT (default 16490), N
# (elements per dataset, default 1000000), DATASETS (default all six),
# OUT (default dist/memory.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source test/memtier.sh

PORT=${PORT:-16490}
N=${N:-1000000}
DATASETS=${DATASETS:-hashes bighash zset list strings stream}
OUT=${OUT:-dist/memory.md}
mkdir -p dist
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "memory-compare: $tool not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
[ -x "$KVS" ] || { echo "memory-compare: $KVS not built (make build)" >&2; exit 1; }

work=$(mktemp -d)
trap 'stop_started; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# gen DATASET: the dataset as inline commands.
gen() {
  case $1 in
    hashes) awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) { printf "HSET h:%d", i; for (f = 0; f < 10; f++) printf " f%d %08d", f, i; print "" } }' ;;
    bighash) awk -v n="$N" 'BEGIN { for (i = 0; i < n; i += 100) { printf "HSET bighash"; for (j = i; j < i + 100 && j < n; j++) printf " f:%d %08d", j, j; print "" } }' ;;
    zset) awk -v n="$N" 'BEGIN { srand(1); for (i = 0; i < n; i += 100) { printf "ZADD zset"; for (j = i; j < i + 100 && j < n; j++) printf " %.6f m%07d", rand() * 1000000, j; print "" } }' ;;
    list) awk -v n="$N" 'BEGIN { for (i = 0; i < n; i += 100) { printf "RPUSH list"; for (j = i; j < i + 100 && j < n; j++) printf " %08d", j; print "" } }' ;;
    strings) awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) printf "SET s:%d %08d\n", i, i }' ;;
    stream) awk -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "XADD stream %d-1 f %08d\n", i, i }' ;;
  esac
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# settled_rss PID: RSS once two readings a second apart agree within 1%.
settled_rss() {
  local a b
  a=$(rss_kb "$1")
  for _ in $(seq 1 30); do
    sleep 1
    b=$(rss_kb "$1")
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && (a - b) / a < 0.01 && (b - a) / a < 0.01) }' && break
    a=$b
  done
  echo "$b"
}

declare -A grow
for ds in $DATASETS; do
  gen "$ds" >"$work/$ds.txt"
  for who in kvs redis; do
    rm -rf "$work/srv" && mkdir -p "$work/srv"
    if [ $who = kvs ]; then
      start_kvs memory "$PORT" "$work/srv"
    else
      launch "$work/srv/out.log" redis-server --port "$PORT" --save '' --appendonly no --dir "$work/srv" --logfile "$work/srv/redis.log"
      wait_until 30 "redis on port $PORT" resp_ping "$PORT"
    fi
    pid=${PIDS[-1]}
    before=$(rss_kb "$pid")
    redis-cli -p "$PORT" --pipe <"$work/$ds.txt" >"$work/pipe.out"
    grep -q "errors: 0" "$work/pipe.out" || { echo "memory-compare: loading $ds into $who:" >&2; cat "$work/pipe.out" >&2; exit 1; }
    after=$(settled_rss "$pid")
    grow[$ds-$who]=$((after - before))
    echo "$ds $who: RSS $before kB before, $after kB after" >&2
    stop_started
  done
done

{
  echo "| dataset | kvs MB | redis MB | kvs/redis |"
  echo "| --- | ---: | ---: | ---: |"
  for ds in $DATASETS; do
    k=${grow[$ds-kvs]} r=${grow[$ds-redis]}
    awk -v d="$ds" -v k="$k" -v r="$r" 'BEGIN { printf "| %s | %.1f | %.1f | %.2f |\n", d, k / 1024, r / 1024, (r > 0 ? k / r : 0) }'
  done
  echo
  echo "RSS growth from an empty server to the loaded one (settled), N=$N; kvs memory mode, redis-server --appendonly no"
} | tee "$OUT"
