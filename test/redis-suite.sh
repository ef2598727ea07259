#!/usr/bin/env bash
# make redis-suite: Redis 7.0.15's own Tcl test suite, in external mode,
# against kvs. Each unit gets a fresh kvs (so one unit's leftovers, a
# client pause or a running script, cannot fail the next), runs with the
# flags below and test/redis-suite.skip, and passes only if every test it
# ran passed and nothing hung. The logs land in dist/redis-suite/.
#
# The tests are not kvs's to ship: they come from Debian's redis source
# package (`apt-get source redis`, which needs a deb-src entry beside the
# machine's Debian sources, dpkg-dev, and tcl for the harness). .ci/run
# sets that up; here, a missing tree is fetched into dist/ when apt can.
#
#   REDIS_SRC      the redis source tree holding ./runtest (default: the
#                  redis-7.0.15 tree under dist/, fetched if missing)
#   SUITE_SERVER   kvs (default) | redis: run the same units against
#                  redis-server, the reference, for comparison
#   SUITE_MODE     memory (default) | durable | sharded: how kvs is
#                  started; sharded is a one-node cluster of three groups
#                  (redis-server: cluster support, serving every slot), and
#                  the suite runs in its cluster mode (--cluster-mode: the
#                  tests tagged cluster:skip are left out)
#   SUITE_UNITS    the units to run (default: all of UNITS below)
#   SUITE_PORT     the server's port (default 21400); the harness listens
#                  on the first free port of the 32 above it, so runs on
#                  different SUITE_PORTs do not race for runtest's default
#   SUITE_TIMEOUT  seconds a unit may take in all (default 600)
#   SUITE_TAGS     runtest's --tags (default: TAGS below)
#   SUITE_SINGLEDB no (default) | yes: run without runtest's --singledb (the
#                  tests SELECT 9 and use databases 9 and 10, as against a
#                  redis-server they start, and run their multi-database
#                  tests) or with it (every test in database 0); sharded
#                  mode is always --singledb, as Redis Cluster has one
#   KVS            the kvs binary (default dist/kvs)
set -u
cd "$(dirname "$0")/.."
top=$PWD

KVS=${KVS:-$top/dist/kvs}
SERVER=${SUITE_SERVER:-kvs}
MODE=${SUITE_MODE:-memory}
PORT=${SUITE_PORT:-21400}
# Sharded mode's node-to-node port (kvs's Raft, Redis's cluster bus),
# clear of the 32 ports above PORT that the harness may take.
BUSPORT=$((PORT + 70))
CLUSTER_FLAG=
[ "$MODE" != sharded ] || CLUSTER_FLAG=--cluster-mode
SINGLEDB_FLAG=--singledb
[ "${SUITE_SINGLEDB:-no}" != no ] || [ "$MODE" = sharded ] || SINGLEDB_FLAG=
UNIT_TIMEOUT=${SUITE_TIMEOUT:-600}
OUT=$top/dist/redis-suite
SKIPFILE=$top/test/redis-suite.skip

UNITS="protocol info-command auth type/string keyspace expire type/incr
type/hash type/list type/list-2 type/list-3 type/set type/zset hyperloglog
geo multi scripting functions pubsub bitops bitfield sort scan slowlog pause
querybuf lazyfree other quit introspection introspection-2 dump tracking
type/stream type/stream-cgroups"
UNITS=${SUITE_UNITS:-$UNITS}

# What kvs leaves out on purpose, or cannot be asked of a server the suite
# did not start: the same tags exclude the same tests from redis-server's
# run, so the two runs are comparable. Both servers allow DEBUG
# (enable-debug-command yes), so the tests tagged needs:debug run.
# SUITE_TAGS replaces the list.
TAGS=${SUITE_TAGS:-"-needs:repl -needs:config-maxmemory -needs:config-resetstat
-needs:reset -needs:save -needs:latency -needs:local-process -resp3"}
TAGS=$(echo $TAGS)

die() { echo "redis-suite: $*" >&2; exit 2; }

# level_reached reports whether the kvs cluster on PORT applies the ops of
# its node's level: KVS.STATUS (name and value on lines of their own)
# has cluster_level equal to apply_level.
level_reached() {
  redis-cli -p "$PORT" kvs.status 2>/dev/null | tr -d '\r' |
    awk 'NR % 2 == 1 { k = $0 } NR % 2 == 0 { v[k] = $0 }
      END { exit !(v["apply_level"] != "" && v["apply_level"] == v["cluster_level"]) }'
}

find_tree() {
  if [ -n "${REDIS_SRC:-}" ]; then
    [ -x "$REDIS_SRC/runtest" ] || die "REDIS_SRC=$REDIS_SRC holds no runtest"
    return
  fi
  REDIS_SRC=$(ls -d "$top"/dist/redis-7.0.15 2>/dev/null | head -1)
  if [ -z "$REDIS_SRC" ]; then
    command -v apt-get >/dev/null || die "no redis source tree: set REDIS_SRC to a redis 7.0.15 tree"
    mkdir -p "$top/dist/redis-src"
    (cd "$top/dist/redis-src" && apt-get source -qq redis >/dev/null 2>&1) ||
      die "apt-get source redis failed: add a deb-src entry for Debian (see .ci/run) and install dpkg-dev"
    src=$(ls -d "$top"/dist/redis-src/redis-7.0.* 2>/dev/null | head -1)
    [ -n "$src" ] || die "apt-get source redis gave no redis-7.0 tree"
    mv "$src" "$top/dist/redis-7.0.15"
    rm -rf "$top/dist/redis-src"
    REDIS_SRC=$top/dist/redis-7.0.15
  fi
  command -v tclsh >/dev/null || die "tclsh is missing (Debian package tcl)"
}

resp_ping() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf '*1\r\n$4\r\nPING\r\n' >&3
    IFS= read -r -t 2 line <&3 || exit 1
    [[ $line == +PONG* ]]
  ) 2>/dev/null
}

SERVER_PID=
DATA_DIR=
start_server() { # start_server LOG
  if resp_ping "$PORT"; then
    die "port $PORT already answers; stop what runs there or set SUITE_PORT"
  fi
  case $SERVER in
  kvs)
    # DEBUG is allowed, as the tests tagged needs:debug ask: kvs takes
    # the immutable parameter from a config file, as Redis does.
    printf 'enable-debug-command yes\n' >"$OUT/suite.conf"
    local args=(serve --addr "127.0.0.1:$PORT" --config "$OUT/suite.conf")
    case $MODE in
    durable)
      DATA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kvs-suite.XXXXXX")
      args+=(--data-dir "$DATA_DIR")
      ;;
    sharded)
      DATA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kvs-suite.XXXXXX")
      args+=(--data-dir "$DATA_DIR" --node-id n1 --raft-addr "127.0.0.1:$BUSPORT" --bootstrap --groups 3)
      ;;
    esac
    "$KVS" "${args[@]}" >"$1" 2>&1 &
    ;;
  redis)
    local args=(--port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --enable-debug-command yes)
    if [ "$MODE" = sharded ]; then
      DATA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/redis-suite.XXXXXX")
      args+=(--cluster-enabled yes --cluster-config-file "$DATA_DIR/nodes.conf" --cluster-port "$BUSPORT" --dir "$DATA_DIR")
    fi
    redis-server "${args[@]}" >"$1" 2>&1 &
    ;;
  *) die "SUITE_SERVER must be kvs or redis" ;;
  esac
  SERVER_PID=$!
  local i
  for i in $(seq 100); do
    if resp_ping "$PORT"; then
      [ "$MODE" = sharded ] || return 0
      # One node serving every slot: Redis's are assigned to it, kvs's
      # groups elect it.
      if [ "$SERVER" = redis ]; then
        redis-cli -p "$PORT" cluster addslotsrange 0 16383 >/dev/null 2>&1
      fi
      # SCRIPT FLUSH is written to every group, the meta group too: once
      # it is answered, each has a leader whose address is known.
      # A kvs cluster refuses the ops of its latest level (RESTORE) until
      # it has recorded that its node runs them: wait for the cluster's
      # level to reach the node's.
      if redis-cli -p "$PORT" cluster info 2>/dev/null | grep -q '^cluster_state:ok' &&
        [ "$(redis-cli -p "$PORT" script flush 2>/dev/null)" = OK ] &&
        { [ "$SERVER" = redis ] || level_reached; }; then
        return 0
      fi
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "redis-suite: the server did not answer on port $PORT; its log:" >&2
  cat "$1" >&2
  return 1
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill "$SERVER_PID" 2>/dev/null
  local i
  for i in $(seq 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=
  [ -z "$DATA_DIR" ] || rm -rf "$DATA_DIR"
  DATA_DIR=
}
trap 'stop_server' EXIT
trap 'exit 130' INT TERM

[ "$SERVER" = redis ] || [ -x "$KVS" ] || die "no kvs binary at $KVS (make build)"
find_tree
mkdir -p "$OUT"
rm -f "$OUT"/*.log

failed=()
total_ok=0
total_bad=0
printf '%-18s %6s %6s %s\n' unit passed failed notes
for unit in $UNITS; do
  name=$(echo "$unit" | tr / _)
  log=$OUT/$name.log
  start_server "$OUT/$name.server.log" || { failed+=("$unit"); continue; }
  started=$(date +%s)
  # The streams' units tag needs:debug only their servers started with
  # appendonly yes, whose tests reload the AOF (DEBUG LOADAOF): kvs has no
  # AOF, and such a server's CONFIG SET appendonly yes fails before any of
  # its tests can be skipped by name.
  unit_tags=$TAGS
  case $unit in type/stream*) [ -n "${SUITE_TAGS:-}" ] || unit_tags="$TAGS -needs:debug" ;; esac
  (
    cd "$REDIS_SRC" &&
      TERM=dumb exec timeout -k 10 "$UNIT_TIMEOUT" ./runtest --host 127.0.0.1 --port "$PORT" \
        --single "unit/$unit" $SINGLEDB_FLAG --baseport $((PORT + 33)) --durable --ignore-encoding --ignore-digest \
        --clients 1 --timeout 120 --tags "$unit_tags" --skipfile "$SKIPFILE" ${CLUSTER_FLAG}
  ) >"$log" 2>&1
  rc=$?
  stop_server
  ok=$(grep -c '^\[ok\]' "$log")
  bad=$(grep -cE '^\[(err|exception)\]' "$log")
  notes=
  if grep -q '\[TIMEOUT\]' "$log" || [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    notes="hung: $(grep -m1 -o 'IN PROGRESS) .*' "$log" | cut -c14-)"
    bad=$((bad + 1))
  elif [ $rc -ne 0 ] && [ "$bad" -eq 0 ]; then
    notes="runtest exited $rc"
    bad=1
  fi
  [ "$bad" -eq 0 ] || failed+=("$unit")
  total_ok=$((total_ok + ok))
  total_bad=$((total_bad + bad))
  printf '%-18s %6d %6d %s(%ds)\n' "$unit" "$ok" "$bad" "${notes:+$notes }" $(($(date +%s) - started))
done

echo "passed $total_ok, failed $total_bad, against $SERVER${SERVER:+ }$([ "$SERVER" = kvs ] && echo "($MODE mode)")"
if [ ${#failed[@]} -gt 0 ]; then
  echo
  for unit in "${failed[@]}"; do
    log=$OUT/$(echo "$unit" | tr / _).log
    echo "== $unit"
    grep -E -A3 '^\[(err|exception)\]|\[TIMEOUT\]|IN PROGRESS' "$log" | grep -v '^--$' | head -40
  done
  exit 1
fi
