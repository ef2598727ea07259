package test

import (
	"strings"
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

	// LOLWUT where Redis's drawing takes no random numbers: the version
	// line, and Schotter's first two rows of squares.
	{"LOLWUT"},
	{"LOLWUT", "VERSION"},
	{"LOLWUT", "10"},
	{"LOLWUT", "VERSION", "7"},
	{"LOLWUT", "VERSION", "4"},
	{"LOLWUT", "VERSION", "-1"},
	{"LOLWUT", "VERSION", "x"},
	{"LOLWUT", "VERSION", "5", "x"},
	{"LOLWUT", "VERSION", "5", "66", "8", "2"},
	{"LOLWUT", "VERSION", "5", "66", "8", "2", "extra"},
	{"LOLWUT", "VERSION", "5", "1", "1", "1"},
	{"LOLWUT", "VERSION", "5", "0", "-3", "0"},
	{"LOLWUT", "VERSION", "5", "3", "1", "1"},
	{"LOLWUT", "VERSION", "5", "40", "3", "2"},
	{"LOLWUT", "VERSION", "5", "17", "5", "1"},
	{"LOLWUT", "VERSION", "5", "1000", "200", "1"},
	{"LOLWUT", "VERSION", "5", "5000", "7", "2"},
	{"LOLWUT", "VERSION", "4294967301", "20", "2", "2"},
	{"LOLWUT", "VERSION", "6", "x"},
	{"LOLWUT", "VERSION", "6", "10", "y"},
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
			refVer, kvsVer := serverInfoField(t, conns[0], "redis_version"), serverInfoField(t, conns[1], "redis_version")
			for _, cmd := range gapsScript {
				want, got := conns[0].Do(cmd...), conns[1].Do(cmd...)
				if cmd[0] == "LOLWUT" && !want.IsError() {
					// kvs says its own Redis version, as INFO does.
					want.Str = strings.ReplaceAll(want.Str, "Redis ver. "+refVer, "Redis ver. "+kvsVer)
					if want.Kind != got.Kind || want.Str != got.Str {
						t.Errorf("%s:\n  redis %q\n  kvs   %q", showCommand(cmd), want.Str, got.Str)
					}
					continue
				}
				if string(want.Raw) != string(got.Raw) {
					t.Errorf("%s:\n  redis %q\n  kvs   %q", showCommand(cmd), want.Raw, got.Raw)
				}
			}
		})
	}
}

// serverInfoField is the value of an INFO server field.
func serverInfoField(t *testing.T, c *rawConn, name string) string {
	t.Helper()
	for _, line := range strings.Split(c.Do("INFO", "server").Str, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO server has no %s", name)
	return ""
}
