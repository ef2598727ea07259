#!/bin/sh
# Writes the data TestLegacyDataDir expects of legacy-v2, through redis-cli
# on port $1: legacy-v1's strings, then every other type kvs stores, both
# packed and large, an ACL user and a function library.
set -e
P=$1
sh "$(dirname "$0")/../legacy-v1/load.sh" "$P"
c() { redis-cli -p "$P" "$@" >/dev/null; }
c RPUSH list a b c
c LPUSH list z
c RPUSH biglist $(seq 1 300)
c HSET hash f1 v1 f2 v2
c HSET bighash $(for i in $(seq 1 600); do echo "f$i v$i"; done)
c PEXPIREAT hash 4102444800456
c SADD set a b c
c SADD intset 3 1 2
c SADD bigset $(seq 1 600)
c ZADD zset 1 a 2.5 b -3 c
c ZADD bigzset $(for i in $(seq 1 200); do echo "$i m$i"; done)
c SETBIT bits 7 1
c ACL SETUSER alice on '>secret' '~app:*' +get +set
c FUNCTION LOAD "#!lua name=legacy
redis.register_function('hello', function() return 'hi' end)"
