#!/bin/sh
# Writes the data TestLegacyDataDir expects, through redis-cli on port $1.
set -e
P=$1
c() { redis-cli -p $P "$@" >/dev/null; }
for i in $(seq 0 199); do c SET "str:$i" "value-$i"; done
c MSET m:a 1 m:b 2 m:c 3
c SET counter 10
c INCRBY counter 5
c INCRBYFLOAT float 0.1
c INCRBYFLOAT float 0.2
c APPEND app hello
c APPEND app ", world"
c SETRANGE rng 3 abc
c SET ttl:abs v
c EXPIREAT ttl:abs 4102444800
c SET ttl:px v PXAT 4102444800123
c SET gone v
c DEL gone
c SET ren:src moved
c RENAME ren:src ren:dst
c SET "{tag}a" 1
c SET "{tag}b" 2
c SET "" empty-key
c SET bin "$(printf 'a\tb')"
