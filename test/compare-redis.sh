#!/usr/bin/env bash
# Side-by-side throughput of kvs and redis-server, in one run, as three
# markdown tables:
#
# 1. redis-benchmark -t set,get -c 50 -r 100000 at -P 1 and -P 16:
#      kvs memory              vs  redis --appendonly no
#      kvs durable (always)    vs  redis --appendonly yes --appendfsync always
#      kvs durable (everysec)  vs  redis --appendonly yes --appendfsync everysec
# 2. The memtier workload of the reference performance page (make memtier:
#    every key written first, then 4 threads x 50 clients, SET:GET 1:10,
#    32-byte values, random keys) for BENCH_TIME seconds, against kvs memory,
#    durable always and everysec, a three-node cluster, and redis with
#    appendonly no, always and everysec. The cluster is compared with redis
#    appendfsync always: both acknowledge a write once it is on disk.
#    memtier_benchmark runs it if installed, kvs bench otherwise.
# 3. valkey's benchmark table: redis-benchmark -t
#    set,get,rpush,lpush,lpop,sadd,spop,hset (valkey's commands) and incr
#    -c 50 at -d 16, 128 and 1024 and -P 1 and 10, kvs memory vs redis
#    appendonly no.
# 4. redis-benchmark's default suite (every test it runs without -t: PING,
#    SET, GET, INCR, LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD,
#    ZPOPMIN, LPUSH for LRANGE, LRANGE_100..600, MSET) at -P 1 and 16:
#    kvs memory vs redis appendonly no, and kvs durable (fsync always) vs
#    redis appendfsync always.
# 5. The newer types, kvs memory vs redis appendonly no, at -P 1 and 16:
#    XADD (one stream), XREADGROUP (one consumer reading the entries XADD
#    left, COUNT 1), PFADD and PFCOUNT (one HyperLogLog), GEOADD and
#    GEOSEARCH (100k members spread over 10 by 10 degrees, a 20 km radius,
#    ASC COUNT 10).
#
# valkey-server joins every comparison as a third server, configured as
# redis-server is, when it is installed: VALKEY names the binary, else
# valkey-server on PATH. Without it the tables have no valkey columns.
#
# Servers run on core 0 and the client on core 1 (taskset), so the client is
# never competing with the server it measures. Each configuration runs
# ROUNDS times, alternating kvs and redis, and the median of the rounds is
# reported.
#
# Environment: KVS (binary, default dist/kvs), VALKEY (valkey-server binary,
# default valkey-server from PATH if there), REQUESTS (per redis-benchmark
# run, default 200000), ROUNDS (default 3), BENCH_TIME (seconds per memtier
# run, default 20), PORT (default 16390; a cluster also takes PORT+1, +2
# and +100..+102), OUT (markdown file, default dist/compare.md), MODES
# (default "memory always everysec cluster"; a subset runs only those),
# TABLES (default "redis-benchmark memtier valkey suite types").
set -euo pipefail
cd "$(dirname "$0")/.."
source test/memtier.sh

REQUESTS=${REQUESTS:-200000}
ROUNDS=${ROUNDS:-3}
BENCH_TIME=${BENCH_TIME:-20}
PORT=${PORT:-16390}
OUT=${OUT:-dist/compare.md}
MODES=${MODES:-memory always everysec cluster}
TABLES=${TABLES:-redis-benchmark memtier valkey suite types}
mkdir -p dist
for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "compare: $tool not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
[ -x "$KVS" ] || { echo "compare: $KVS not built (make build)" >&2; exit 1; }
VALKEY=${VALKEY:-$(command -v valkey-server || true)}
OTHERS=(redis)
if [ -n "$VALKEY" ]; then
  [ -x "$VALKEY" ] || { echo "compare: VALKEY=$VALKEY is not an executable" >&2; exit 1; }
  OTHERS+=(valkey)
else
  echo "compare: valkey-server not found (VALKEY or PATH): comparing with redis-server only" >&2
fi
has_valkey() { [ ${#OTHERS[@]} -gt 1 ]; }

SERVER_CPU=0 CLIENT_CPU=1
CLIENT=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  LAUNCH=(taskset -c $SERVER_CPU)
  CLIENT=(taskset -c $CLIENT_CPU)
fi

work=$(mktemp -d)
trap 'stop_started; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

has() { [[ " $1 " == *" $2 "* ]]; }

# start NAME: starts the server configuration NAME on core 0 and sets
# LOAD_PORT to where the load goes.
start() {
  rm -rf "$work/srv"
  mkdir -p "$work/srv"
  local bin=redis-server
  [[ $1 == valkey-* ]] && bin=$VALKEY
  local redis=("$bin" --port "$PORT" --save '' --dir "$work/srv" --logfile "$work/srv/redis.log")
  case $1 in
    kvs-memory) start_kvs memory "$PORT" "$work/srv" ;;
    kvs-always) start_kvs durable "$PORT" "$work/srv" --fsync always ;;
    kvs-everysec) start_kvs durable "$PORT" "$work/srv" --fsync everysec ;;
    kvs-cluster) start_kvs cluster "$PORT" "$work/srv" ;;
    redis-* | valkey-*)
      require_free_ports memory "$PORT"
      case ${1#*-} in
        memory) launch "$work/srv/out.log" "${redis[@]}" --appendonly no ;;
        always) launch "$work/srv/out.log" "${redis[@]}" --appendonly yes --appendfsync always ;;
        everysec) launch "$work/srv/out.log" "${redis[@]}" --appendonly yes --appendfsync everysec ;;
      esac
      wait_until 30 "${1%%-*} on port $PORT" resp_ping "$PORT"
      LOAD_PORT=$PORT
      ;;
  esac
}

stop() { stop_started; }

median() { sort -n | awk '{ a[NR]=$1 } END { if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }
# med KEY: the median of the values results[KEY] collected over the rounds.
med() { echo ${results["$1"]:-0} | tr ' ' '\n' | median; }
ratio() { awk -v k="$1" -v r="$2" 'BEGIN { if (r > 0) printf "%.2f", k/r; else print "-" }'; }

declare -A results

# redis-benchmark TESTS PIPELINE [MORE FLAGS]: prints "TEST rps p50" lines
# (TESTS "all": the default suite, no -t). Test names lose their spaces and
# parenthesised notes: "LPUSH (needed to benchmark LRANGE)" is LPUSH_LRANGE,
# "LRANGE_100 (first 100 elements)" is LRANGE_100.
rbench() {
  local tests=$1 p=$2 t=()
  shift 2
  [ "$tests" != all ] && t=(-t "$tests")
  "${CLIENT[@]}" redis-benchmark -p "$LOAD_PORT" "${t[@]}" -c 50 -r 100000 -n "$REQUESTS" -P "$p" "$@" --csv 2>/dev/null |
    awk -F'","' 'NR>1 { gsub(/"/, "", $1); gsub(/"/, "", $2)
      n = $1; if (n ~ /needed to benchmark LRANGE/) n = "LPUSH_LRANGE"; sub(/ \(.*\)$/, "", n); gsub(/ /, "_", n)
      print n, $2, $5 }'
}

# Table 1: redis-benchmark SET and GET.
rb_pairs=()
for m in memory always everysec; do has "$MODES" $m && rb_pairs+=($m); done
if has "$TABLES" redis-benchmark && [ ${#rb_pairs[@]} -gt 0 ]; then
  for round in $(seq 1 "$ROUNDS"); do
    for pair in "${rb_pairs[@]}"; do
      for who in kvs "${OTHERS[@]}"; do
        start "$who-$pair"
        for p in 1 16; do
          tests=set
          [ "$pair" = memory ] && tests=set,get
          while read -r t rps _; do
            results["rb-$who-$pair-$t-$p"]+="$rps "
            echo "round $round $who-$pair $t -P $p: $rps" >&2
          done < <(rbench "$tests" "$p")
        done
        stop
      done
    done
  done
fi

# Table 2: the memtier workload. The cluster's redis counterpart is
# appendfsync always, which the always pair also runs: it runs once a round.
mt_configs=()
for m in $MODES; do
  mt_configs+=("kvs-$m")
  for o in "${OTHERS[@]}"; do
    r=$o-$m
    [ "$m" = cluster ] && r=$o-always
    has "${mt_configs[*]}" "$r" || mt_configs+=("$r")
  done
done
if has "$TABLES" memtier; then
  for round in $(seq 1 "$ROUNDS"); do
    for cfg in "${mt_configs[@]}"; do
      start "$cfg"
      run_load "$LOAD_PORT" "$BENCH_TIME" "$work/$cfg.json" "${CLIENT[@]}" >"$work/load.out" 2>"$work/load.err" || {
        echo "compare: the memtier workload against $cfg failed:" >&2
        tail -5 "$work/load.err" >&2
        exit 1
      }
      read -r ops p50 p99 < <(awk '$1 == "Totals" { print $2, $6, $7 }' "$work/load.out")
      read -r sp99 < <(awk '$1 == "Sets" { print $7 }' "$work/load.out")
      for f in ops p50 p99 sp99; do results["mt-$cfg-$f"]+="${!f} "; done
      echo "round $round memtier $cfg: $ops ops/s, p50 $p50 ms, p99 $p99 ms, SET p99 $sp99 ms" >&2
      stop
    done
  done
fi

# Table 3: valkey's, by value size and pipeline.
if has "$TABLES" valkey && has "$MODES" memory; then
  for round in $(seq 1 "$ROUNDS"); do
    for who in kvs "${OTHERS[@]}"; do
      start "$who-memory"
      for d in 16 128 1024; do
        for p in 1 10; do
          while read -r t rps p50; do
            results["vk-$who-$t-$d-$p"]+="$rps "
            results["vk-$who-$t-$d-$p-p50"]+="$p50 "
            echo "round $round valkey $who $t -d $d -P $p: $rps" >&2
          done < <(rbench set,get,incr,rpush,lpush,lpop,sadd,spop,hset "$p" -d "$d")
        done
      done
      stop
    done
  done
fi

# Table 4: redis-benchmark's default suite.
suite_tests="PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN LPUSH_LRANGE LRANGE_100 LRANGE_300 LRANGE_500 LRANGE_600 MSET"
suite_writes=" SET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN LPUSH_LRANGE MSET "
suite_pairs=()
for m in memory always; do has "$MODES" $m && suite_pairs+=($m); done
if has "$TABLES" suite && [ ${#suite_pairs[@]} -gt 0 ]; then
  for round in $(seq 1 "$ROUNDS"); do
    for pair in "${suite_pairs[@]}"; do
      for who in kvs "${OTHERS[@]}"; do
        start "$who-$pair"
        for p in 1 16; do
          while read -r t rps _; do
            results["st-$who-$pair-$t-$p"]+="$rps "
            echo "round $round suite $who-$pair $t -P $p: $rps" >&2
          done < <(rbench all "$p")
        done
        stop
      done
    done
  done
fi

# Table 5: the newer types. rcmd NAME PIPELINE COMMAND...: prints
# "NAME rps p50" for redis-benchmark running COMMAND.
rcmd() {
  local name=$1 p=$2
  shift 2
  "${CLIENT[@]}" redis-benchmark -p "$LOAD_PORT" -c 50 -r 100000 -n "$REQUESTS" -P "$p" --csv "$@" 2>/dev/null |
    awk -F'","' -v n="$name" 'NR>1 { gsub(/"/, "", $2); print n, $2, $5 }' || true
}
types_tests="XADD XREADGROUP PFADD PFCOUNT GEOADD GEOSEARCH"
if has "$TABLES" types && has "$MODES" memory; then
  awk 'BEGIN { srand(7); for (i = 0; i < 100000; i += 100) { printf "GEOADD geo"; for (j = i; j < i + 100; j++) printf " %.6f %.6f m%d", 10 + rand() * 10, 35 + rand() * 10, j; print "" } }' >"$work/geo.txt"
  for round in $(seq 1 "$ROUNDS"); do
    for who in kvs "${OTHERS[@]}"; do
      start "$who-memory"
      for p in 1 16; do
        redis-cli -p "$LOAD_PORT" flushall >/dev/null
        redis-cli -p "$LOAD_PORT" --pipe <"$work/geo.txt" >/dev/null
        redis-cli -p "$LOAD_PORT" xgroup create stream g '$' mkstream >/dev/null
        {
          rcmd XADD "$p" xadd stream '*' f __rand_int__
          rcmd XREADGROUP "$p" xreadgroup group g c count 1 streams stream '>'
          rcmd PFADD "$p" pfadd hll __rand_int__
          rcmd PFCOUNT "$p" pfcount hll
          rcmd GEOADD "$p" geoadd geo2 13.5 38.5 m__rand_int__
          rcmd GEOSEARCH "$p" geosearch geo fromlonlat 15 40 byradius 20 km asc count 10
        } | while read -r t rps _; do
          echo "$t $rps"
        done >"$work/types.out"
        while read -r t rps; do
          results["ty-$who-$t-$p"]+="$rps "
          echo "round $round types $who $t -P $p: $rps" >&2
        done <"$work/types.out"
      done
      stop
    done
  done
fi

label() {
  case $1 in
    memory) echo "memory (appendonly no)" ;;
    always) echo "durable, fsync always (appendfsync always)" ;;
    everysec) echo "durable, fsync everysec (appendfsync everysec)" ;;
  esac
}
tool="kvs bench"
have_memtier && tool=memtier_benchmark

# head COLUMNS...: the table's header for the fixed COLUMNS, then ops/s of
# kvs and each other server, then kvs's ratio to each.
head() {
  local h="|" a="|" c o
  for c in "$@"; do h+=" $c |"; a+=" --- |"; done
  h+=" kvs ops/s |"; a+=" ---: |"
  for o in "${OTHERS[@]}"; do h+=" $o ops/s |"; a+=" ---: |"; done
  for o in "${OTHERS[@]}"; do h+=" kvs/$o |"; a+=" ---: |"; done
  echo "$h"
  echo "$a"
}
# row PREFIX SUFFIX CELLS...: one row of a head table, the medians of
# results[PREFIX-WHO-SUFFIX] for kvs and each other server.
row() {
  local pre=$1 suf=$2 line="|" o k
  shift 2
  for c in "$@"; do line+=" $c |"; done
  k=$(med "$pre-kvs-$suf")
  line+=" $(printf %.0f "$k") |"
  for o in "${OTHERS[@]}"; do line+=" $(printf %.0f "$(med "$pre-$o-$suf")") |"; done
  for o in "${OTHERS[@]}"; do line+=" $(ratio "$k" "$(med "$pre-$o-$suf")") |"; done
  echo "$line"
}
others="redis-server"
has_valkey && others="redis-server and valkey-server"

{
  if has "$TABLES" redis-benchmark && [ ${#rb_pairs[@]} -gt 0 ]; then
    head mode test pipeline
    for pair in "${rb_pairs[@]}"; do
      for t in SET GET; do
        [ "$pair" != memory ] && [ "$t" = GET ] && continue
        for p in 1 16; do
          row rb "$pair-$t-$p" "$(label "$pair")" "$t" "$p"
        done
      done
    done
    echo
    echo "redis-benchmark, median of $ROUNDS rounds, $REQUESTS requests each, -c 50 -r 100000; kvs against $others configured as the mode says; server on core $SERVER_CPU, client on core $CLIENT_CPU"
    echo
  fi
  if has "$TABLES" memtier; then
    echo "| server | ops/s | p50 ms | p99 ms | SET p99 ms | compared with | ops/s ratio |"
    echo "| --- | ---: | ---: | ---: | ---: | --- | ---: |"
    for cfg in "${mt_configs[@]}"; do
      ops=$(med "mt-$cfg-ops")
      name=$cfg
      case $cfg in
        kvs-memory) name="kvs memory" ;;
        kvs-always) name="kvs durable, fsync always" ;;
        kvs-everysec) name="kvs durable, fsync everysec" ;;
        kvs-cluster) name="kvs cluster, 3 nodes" ;;
        *-memory) name="${cfg%%-*} appendonly no" ;;
        *-always) name="${cfg%%-*} appendfsync always" ;;
        *-everysec) name="${cfg%%-*} appendfsync everysec" ;;
      esac
      vs="" rt=""
      if [[ $cfg == kvs-* ]]; then
        m=${cfg#kvs-}
        [ "$m" = cluster ] && m=always
        for o in "${OTHERS[@]}"; do
          vs+="${vs:+, }$o"
          rt+="${rt:+, }$(ratio "$ops" "$(med "mt-$o-$m-ops")")"
        done
        [ "$m" = memory ] && vs+=" appendonly no" || vs+=" appendfsync $m"
      fi
      printf "| %s | %.0f | %.3f | %.3f | %.3f | %s | %s |\n" "$name" "$ops" "$(med "mt-$cfg-p50")" \
        "$(med "mt-$cfg-p99")" "$(med "mt-$cfg-sp99")" "$vs" "$rt"
    done
    echo
    echo "$tool: every key of 100,001 written first, then 4 threads x 50 clients, SET:GET 1:10, 32-byte values, random keys, ${BENCH_TIME}s; median of $ROUNDS rounds; servers on core $SERVER_CPU, client on core $CLIENT_CPU"
    echo
  fi
  if has "$TABLES" valkey && has "$MODES" memory; then
    head test "data size" pipeline
    for d in 16 128 1024; do
      for p in 10 1; do
        for t in SET GET INCR RPUSH LPUSH LPOP SADD SPOP HSET; do
          row vk "$t-$d-$p" "$t" "$d" "$p"
        done
      done
    done
    echo
    echo "redis-benchmark -t set,get,incr,rpush,lpush,lpop,sadd,spop,hset -c 50 -r 100000 -n $REQUESTS, kvs memory against $others with appendonly no, median of $ROUNDS rounds; server on core $SERVER_CPU, client on core $CLIENT_CPU"
    echo
  fi
  if has "$TABLES" suite && [ ${#suite_pairs[@]} -gt 0 ]; then
    head mode test pipeline
    for pair in "${suite_pairs[@]}"; do
      for t in $suite_tests; do
        [ "$pair" != memory ] && [[ "$suite_writes" != *" $t "* ]] && continue
        for p in 1 16; do
          row st "$pair-$t-$p" "$(label "$pair")" "$t" "$p"
        done
      done
    done
    echo
    echo "redis-benchmark's default suite (no -t), -c 50 -r 100000 -n $REQUESTS, kvs against $others, median of $ROUNDS rounds; durable rows are the suite's writes; server on core $SERVER_CPU, client on core $CLIENT_CPU"
    echo
  fi
  if has "$TABLES" types && has "$MODES" memory; then
    head test pipeline
    for t in $types_tests; do
      for p in 1 16; do
        row ty "$t-$p" "$t" "$p"
      done
    done
    echo
    echo "redis-benchmark -c 50 -r 100000 -n $REQUESTS with each command line (XADD stream * f __rand_int__; XREADGROUP GROUP g c COUNT 1 STREAMS stream > after it; PFADD hll __rand_int__; PFCOUNT hll; GEOADD geo2 13.5 38.5 m__rand_int__; GEOSEARCH geo FROMLONLAT 15 40 BYRADIUS 20 km ASC COUNT 10 over 100k members), kvs memory against $others with appendonly no, median of $ROUNDS rounds; server on core $SERVER_CPU, client on core $CLIENT_CPU"
  fi
} | tee "$OUT"
