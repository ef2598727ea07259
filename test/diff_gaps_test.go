package test

import (
	"testing"
)

// gapsScript exercises WAIT (memory mode: no replicas), OBJECT FREQ under
// an LFU policy and LOLWUT, whose replies are deterministic: OBJECT FREQ
// with lfu-log-factor 0, where every access increments the counter.
var gapsScript = [][]string{
	{"WAIT", "0", "0"},
	{"WAIT", "-1", "0"},
	{"WAIT", "1", "1"},
	{"WAIT", "x", "0"},
	{"WAIT", "0", "x"},
	{"WAIT", "0", "-5"},
	{"WAIT", "0", "1.0"},
	{"WAIT", "0", ""},
	{"WAIT", "9223372036854775808", "0"},
	{"WAIT", "0", "9223372036854775808"},
	{"WAIT", "0"},
	{"WAIT", "0", "0", "0"},
	{"MULTI"},
	{"WAIT", "3", "0"},
	{"SET", "w", "1"},
	{"WAIT", "1", "0"},
	{"EXEC"},
	{"EVAL", "return redis.call('wait', 0, 0)", "0"},
	{"EVAL", "return redis.pcall('wait', 1, 0)", "0"},

	{"CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"},
	{"CONFIG", "SET", "lfu-log-factor", "0"},
	{"CONFIG", "SET", "lfu-log-factor", "-1"},
	{"CONFIG", "SET", "lfu-decay-time", "x"},
	{"CONFIG", "GET", "lfu-log-factor"},
	// Not a small integer: Redis shares one object among the keys that
	// hold one of those while maxmemory is 0, and with it its counter.
	{"SET", "f", "hello"},
	{"OBJECT", "FREQ", "f"},
	{"GET", "f"},
	{"OBJECT", "FREQ", "f"},
	{"GET", "f"},
	{"EXISTS", "f"},
	{"STRLEN", "f"},
	{"OBJECT", "FREQ", "f"},
	{"APPEND", "f", "!"},
	{"OBJECT", "FREQ", "f"},
	{"OBJECT", "FREQ", "nosuchkey"},
	{"OBJECT", "IDLETIME", "f"},
	{"CONFIG", "SET", "lfu-log-factor", "10"},
	{"CONFIG", "SET", "maxmemory-policy", "noeviction"},
	{"OBJECT", "FREQ", "f"},
	{"DEL", "f", "w"},
}

// TestDifferentialGaps runs gapsScript on kvs (memory mode) and
// redis-server, in RESP2 and RESP3, comparing replies byte for byte.
func TestDifferentialGaps(t *testing.T) {
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			conns := []*rawConn{dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)}
			for _, c := range conns {
				if v := c.Do("HELLO", proto); v.IsError() {
					t.Fatalf("HELLO %s = %s", proto, v)
				}
			}
			for _, cmd := range gapsScript {
				want, got := conns[0].Do(cmd...), conns[1].Do(cmd...)
				if string(want.Raw) != string(got.Raw) {
					t.Errorf("%s:\n  redis %q\n  kvs   %q", showCommand(cmd), want.Raw, got.Raw)
				}
			}
		})
	}
}
