package test

import (
	"os"
	"path/filepath"
	"strconv"
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
			conns := dialHello(t, proto, ref.Addr, kvs.Addr)
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

// debugScript exercises the DEBUG subcommands whose replies are
// deterministic, on servers started with enable-debug-command yes: the
// digests of every type (the same algorithm as Redis's, so the same
// hex), before and after changes, and RESP3's test values.
var debugScript = [][]string{
	{"DEBUG", "DIGEST"},
	{"DEBUG", "DIGEST-VALUE"},
	{"DEBUG", "DIGEST-VALUE", "nokey"},
	{"SET", "s", "hello"},
	{"SET", "n", "12345"},
	{"SET", "big", strings.Repeat("x", 100)},
	{"RPUSH", "l", "a", "b", "1", "-2", ""},
	{"SADD", "si", "1", "2", "-3"},
	{"SADD", "ss", "x", "y", "z"},
	{"ZADD", "z", "1.5", "a", "2", "b", "-inf", "c", "1e30", "d", "0.1", "e", "3", "7"},
	{"HSET", "h", "f", "v", "g", "1", "", ""},
	{"SET", "e", "x", "EX", "1000"},
	{"DEBUG", "DIGEST-VALUE", "s", "n", "big", "l", "si", "ss", "z", "h", "e", "nokey"},
	{"DEBUG", "DIGEST"},
	{"LPUSH", "l", "front"},
	{"DEBUG", "DIGEST-VALUE", "l"},
	{"PERSIST", "e"},
	{"DEBUG", "DIGEST-VALUE", "e"},
	{"DEBUG", "DIGEST"},
	{"ZADD", "z", "0", "a"},
	{"HDEL", "h", ""},
	{"SREM", "si", "-3"},
	{"DEBUG", "DIGEST-VALUE", "z", "h", "si"},
	{"DEBUG", "DIGEST"},
	{"DEBUG", "OBJECT", "nokey"},
	{"DEBUG", "LISTPACK", "z"},
	{"DEBUG", "LISTPACK", "s"},
	{"DEBUG", "LISTPACK", "nokey"},
	{"DEBUG", "QUICKLIST", "s"},
	{"DEBUG", "QUICKLIST", "l"},
	{"DEBUG", "SLEEP", "0"},
	{"DEBUG", "SLEEP", "0.01"},
	{"DEBUG", "SLEEP", "x"},
	{"DEBUG", "SET-ACTIVE-EXPIRE", "0"},
	{"DEBUG", "SET-ACTIVE-EXPIRE", "1"},
	{"DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"},
	{"DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1mb"},
	{"DEBUG", "QUICKLIST-PACKED-THRESHOLD", "x"},
	{"DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"},
	{"DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"},
	{"DEBUG", "CHANGE-REPL-ID"},
	// Not STRINGMATCH-TEST: redis-server 7.0.15's fuzzer crashes it now
	// and then (kvs's runs its own matcher; server/debug_test.go).
	{"DEBUG", "ERROR", "MYERR something failed"},
	{"DEBUG", "LOG", "a line"},
	{"DEBUG", "RELOAD", "BADOPT"},
	{"DEBUG", "RELOAD"},
	{"DEBUG", "DIGEST"},
	{"DEBUG", "NOSUCH"},
	{"DEBUG", "OBJECT"},
	{"DEBUG"},
	{"DEBUG", "PROTOCOL", "string"},
	{"DEBUG", "PROTOCOL", "integer"},
	{"DEBUG", "PROTOCOL", "double"},
	{"DEBUG", "PROTOCOL", "bignum"},
	{"DEBUG", "PROTOCOL", "null"},
	{"DEBUG", "PROTOCOL", "array"},
	{"DEBUG", "PROTOCOL", "set"},
	{"DEBUG", "PROTOCOL", "map"},
	{"DEBUG", "PROTOCOL", "attrib"},
	{"DEBUG", "PROTOCOL", "push"},
	{"DEBUG", "PROTOCOL", "true"},
	{"DEBUG", "PROTOCOL", "false"},
	{"DEBUG", "PROTOCOL", "verbatim"},
	{"DEBUG", "PROTOCOL", "other"},
	{"EVAL", "return redis.call('debug', 'digest')", "0"},
	{"MULTI"},
	{"DEBUG", "DIGEST-VALUE", "s"},
	{"DEBUG", "PROTOCOL", "integer"},
	{"EXEC"},
	{"FLUSHALL"},
	{"DEBUG", "DIGEST"},
	// NOFLUSH without MERGE loads the dump over what it came from: a
	// function library already there fails it.
	{"FUNCTION", "LOAD", "#!lua name=dbglib\nredis.register_function('dbgf', function() return 1 end)"},
	{"DEBUG", "RELOAD", "NOFLUSH"},
	{"DEBUG", "RELOAD", "NOFLUSH", "MERGE"},
	{"FCALL", "dbgf", "0"},
	{"FUNCTION", "FLUSH"},
	{"DEBUG", "RELOAD", "NOFLUSH"},
}

// TestDifferentialDebug runs debugScript on kvs (memory mode, with
// enable-debug-command yes in its config file) and redis-server, in RESP2
// and RESP3, comparing replies byte for byte. A server without the
// option refuses DEBUG with Redis's error.
func TestDifferentialDebug(t *testing.T) {
	plain := [][]*rawConn{{dialRaw(t, startRedis(t).Addr), dialRaw(t, startKVS(t, KVSOptions{}).Addr)}}
	for _, cmd := range [][]string{{"DEBUG", "SLEEP", "0"}, {"DEBUG", "HELP"}, {"DEBUG"}, {"DEBUG", "NOSUCH", "x"}} {
		want, got := plain[0][0].Do(cmd...), plain[0][1].Do(cmd...)
		if string(want.Raw) != string(got.Raw) {
			t.Errorf("without enable-debug-command, %s:\n  redis %q\n  kvs   %q", showCommand(cmd), want.Raw, got.Raw)
		}
	}

	ref := newRedis(t, "redis-debug", "--enable-debug-command", "yes")
	ref.Start()
	conf := filepath.Join(testDir(t), "debug.conf")
	if err := os.WriteFile(conf, []byte("enable-debug-command yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kvs := startKVS(t, KVSOptions{Extra: []string{"--config", conf}})
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			conns := dialHello(t, proto, ref.Addr, kvs.Addr)
			for _, cmd := range debugScript {
				want, got := conns[0].Do(cmd...), conns[1].Do(cmd...)
				if want.Kind == '>' && got.Kind == '>' {
					// DEBUG PROTOCOL push: the push, then the reply.
					w, err1 := conns[0].read()
					g, err2 := conns[1].read()
					if err1 != nil || err2 != nil {
						t.Fatalf("%s: the reply after the push: %v, %v", showCommand(cmd), err1, err2)
					}
					want.Raw, got.Raw = append(want.Raw, w.Raw...), append(got.Raw, g.Raw...)
				}
				if string(want.Raw) != string(got.Raw) {
					t.Errorf("%s:\n  redis %q\n  kvs   %q", showCommand(cmd), want.Raw, got.Raw)
				}
			}
		})
	}
}

// The differential test's WAIT, LOLWUT and DEBUG, registered under a type
// name no key has (as the bit commands are). WAIT asks for no replica, or
// waits 1 ms for one; in cluster mode kvs counts the followers that
// applied the connection's writes where the standalone reference has none,
// so a count is compared as a count of 0 to 2. LOLWUT draws only what is
// not random, and says kvs's version where redis-server says its own.
// DEBUG is refused by both (enable-debug-command no).
func init() {
	registerDiffType(diffType{
		name:   "gaps",
		weight: 2,
		gen:    (*cmdGen).gapsCommand,
		dump:   func(c *rawConn, key string) string { return "" },
		same: func(cmd []string, ref, got Value) (bool, bool) {
			switch strings.ToUpper(cmd[0]) {
			case "WAIT":
				if ref.Kind == ':' && got.Kind == ':' && ref.Str == "0" {
					return got.Str == "0" || got.Str == "1" || got.Str == "2", true
				}
			case "LOLWUT":
				trim := func(s string) string {
					if i := strings.LastIndex(s, "Redis ver. "); i >= 0 {
						return s[:i]
					}
					return s
				}
				if lolwutRandom(cmd) {
					// Compare the lines after the drawing only: after the
					// blank line that ends it, or, where its last row is
					// drawn (Schotter's rows of blank braille), the last line.
					tail := func(s string) string {
						t := trim(s)
						if i := strings.LastIndex(t, "\n\n"); i >= 0 {
							return t[i+2:]
						}
						return t[strings.LastIndex(t, "\n")+1:]
					}
					return ref.Kind == got.Kind && tail(ref.Str) == tail(got.Str), true
				}
				return ref.Kind == got.Kind && trim(ref.Str) == trim(got.Str), true
			}
			return false, false
		},
	})
}

// lolwutRandom reports whether Redis draws with random numbers for cmd
// (the generator's arguments may lose their last one): version 6, and
// Schotter with more than two rows of squares.
func lolwutRandom(cmd []string) bool {
	if len(cmd) < 3 || !strings.EqualFold(cmd[1], "VERSION") {
		return false
	}
	switch cmd[2] {
	case "6":
		return true
	case "5":
		rows := 12
		if len(cmd) >= 6 {
			n, err := strconv.Atoi(cmd[5])
			if err != nil {
				return false // an error, compared whole
			}
			rows = n
		}
		return rows > 2
	}
	return false
}

func (g *cmdGen) gapsCommand() []string {
	switch g.r.Intn(4) {
	case 0:
		if g.chance(0.2) {
			return []string{"WAIT", "1", "1"}
		}
		return []string{"WAIT", g.pick("0", "-1", "x", "0"), g.pick("0", "5", "-1", "x", "1.5", "")}
	case 1:
		return []string{"LOLWUT", "VERSION", "5", g.pick("1", "7", "40", "x", "0"), g.pick("1", "3", "9"), g.pick("1", "2", "-4")}
	case 2:
		return []string{"LOLWUT", g.pick("VERSION", "x"), g.pick("4", "7", "y", "-1")}[:1+g.r.Intn(3)]
	}
	return []string{"DEBUG", g.pick("DIGEST", "SLEEP", "OBJECT", "HELP"), g.key()}[:2+g.r.Intn(2)]
}
