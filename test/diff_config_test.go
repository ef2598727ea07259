package test

import (
	"sort"
	"strings"
	"testing"
)

// configOwnValues are the parameters whose values kvs reports from its own
// state rather than Redis's defaults (docs/compatibility.md, "CONFIG"),
// and client-output-buffer-limit, whose default for normal clients kvs
// bounds where Redis leaves it unlimited (security.md).
var configOwnValues = map[string]bool{
	"port": true, "bind": true, "dir": true, "appendonly": true, "appendfsync": true,
	"databases": true, "save": true, "logfile": true, "daemonize": true,
	"client-output-buffer-limit": true,
}

// configFromRedis72 are the parameters kvs has from Redis 7.2, which
// redis-server 7.0 does not know.
var configFromRedis72 = map[string]bool{"set-max-listpack-entries": true, "set-max-listpack-value": true}

// configKVSOwn are kvs's own parameters, which no redis-server has.
var configKVSOwn = map[string]bool{"script-write-budget": true}

// configSetSkipped are the parameters the CONFIG SET comparison leaves out:
// those whose change would cut the test off from the reference server
// (its address, the password), make it write files (appendonly, save) or
// load TLS material, and those kvs reports from its own state.
func configSetSkipped(name string) bool {
	switch name {
	case "requirepass", "maxclients", "maxmemory", "maxmemory-policy",
		"protected-mode", "replicaof", "slaveof", "unixsocket", "client-output-buffer-limit":
		return true
	}
	return configOwnValues[name] || strings.HasPrefix(name, "tls-")
}

// configValues are the values tried for every parameter: valid and
// invalid ones of each of Redis's parameter types (booleans, integers with
// their bounds, memory sizes, percentages, octal, enums, lists).
var configValues = []string{
	"yes", "NO", "maybe", "0", "1", "-1", "7", "100", "+5", "007", "abc", "", " ",
	"1gb", "2MB", "3k", "1xb", "10%", "101%", "-3%", "2147483647", "2147483648",
	"-2147483649", "9223372036854775807", "9223372036854775808", "777", "800",
	"allkeys-lru", "VOLATILE-TTL", "nope", "local", "relative", "save now", "save nosave",
	"default", "3600 1 300 100", "60 x", "0 200 800", "1 2", "-2001 0 0", "50 99.9", "101",
	"Kgx", "dump.rdb", "a/b.rdb", "hostname",
}

// TestDifferentialConfig compares CONFIG GET * and CONFIG SET of every Redis
// 7 parameter between kvs and redis-server: the same names, the same
// defaults for the parameters kvs keeps as Redis reports them, and for
// each value tried the same reply to CONFIG SET and the same value read
// back, in RESP2 and RESP3.
func TestDifferentialConfig(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	ref := startRedis(t)
	kvs := newKVS(t, "kvs", KVSOptions{})
	kvs.Start()
	for _, proto := range []string{"2", "3"} {
		t.Run("resp"+proto, func(t *testing.T) {
			conns := dialHello(t, proto, ref.Addr, kvs.Addr)
			rc, kc := conns[0], conns[1]
			want, got := configMap(t, rc.Do("CONFIG", "GET", "*")), configMap(t, kc.Do("CONFIG", "GET", "*"))
			var names []string
			for n := range want {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				g, ok := got[n]
				switch {
				case !ok:
					t.Errorf("CONFIG GET *: kvs lacks %s (redis: %q)", n, want[n])
				case g != want[n] && !configOwnValues[n]:
					t.Errorf("CONFIG GET %s: kvs %q, redis %q", n, g, want[n])
				}
			}
			for n := range got {
				if _, ok := want[n]; !ok && !configFromRedis72[n] && !configKVSOwn[n] {
					t.Errorf("CONFIG GET *: kvs has %s, redis does not", n)
				}
			}
			if t.Failed() {
				return
			}
			for _, n := range names {
				if configSetSkipped(n) {
					continue
				}
				for _, v := range configValues {
					if n == "activedefrag" && v == "yes" {
						// Debian's redis-server is built without the
						// jemalloc that defragmentation needs and
						// refuses; kvs keeps the value, as it keeps
						// every parameter of Redis's internals.
						continue
					}
					r, k := rc.Do("CONFIG", "SET", n, v), kc.Do("CONFIG", "SET", n, v)
					if string(r.Raw) != string(k.Raw) {
						t.Errorf("CONFIG SET %s %q: kvs %q, redis %q", n, v, k.Raw, r.Raw)
						continue
					}
					if r.IsError() {
						continue
					}
					if r, k := rc.Do("CONFIG", "GET", n), kc.Do("CONFIG", "GET", n); string(r.Raw) != string(k.Raw) {
						t.Errorf("CONFIG GET %s after SET %q: kvs %q, redis %q", n, v, k.Raw, r.Raw)
					}
				}
				// Back to the default, on both, for the next parameter.
				rc.Do("CONFIG", "SET", n, want[n])
				kc.Do("CONFIG", "SET", n, want[n])
			}
			for _, args := range [][]string{
				{"CONFIG", "SET", "hz", "5", "HZ", "6"},
				{"CONFIG", "SET", "hash-max-ziplist-entries", "5", "hash-max-listpack-entries", "6"},
				{"CONFIG", "SET", "activedefrag", "yes", "nosuch", "1"},
				{"CONFIG", "SET", "nosuch", "1", "databases", "3"},
				{"CONFIG", "SET", "hz", "abc", "databases", "3"},
				{"CONFIG", "SET", "timeout", "10", "lazyfree-lazy-eviction", "yes"},
				{"CONFIG", "GET", "timeout", "lazyfree-*"},
				{"CONFIG", "GET", "WATCHDOG-PERIOD"},
				{"CONFIG", "GET", "watchdog-*"},
				{"CONFIG", "GET", "HZ", "hz"},
				{"CONFIG", "SET", "dir", "/tmp"},
				{"CONFIG", "SET", "unixsocketperm", "700"},
			} {
				r, k := rc.Do(args...), kc.Do(args...)
				if string(r.Raw) != string(k.Raw) && !(args[1] == "GET" && sameMapReply(r, k)) {
					t.Errorf("%q: kvs %q, redis %q", args, k.Raw, r.Raw)
				}
				if args[1] == "SET" {
					for i := 2; i+1 < len(args); i += 2 {
						n := strings.ToLower(args[i])
						if _, ok := want[n]; ok {
							rc.Do("CONFIG", "SET", n, want[n])
							kc.Do("CONFIG", "SET", n, want[n])
						}
					}
				}
			}
			diffConfigRollback(t, rc, kc, ref, kvs)
		})
	}
}

// diffConfigRollback: a CONFIG SET of several parameters that fails on one
// leaves them all as they were, with Redis's error for the first that
// fails, whether it fails its check or its apply (a port in use: each
// server is asked for the other's); a parameter set to its own value is
// accepted, TLS's without TLS too.
func diffConfigRollback(t *testing.T, rc, kc *rawConn, ref, kvs *Node) {
	_, refPort, _ := strings.Cut(ref.Addr, ":")
	_, kvsPort, _ := strings.Cut(kvs.Addr, ":")
	watched := []string{"maxmemory", "client-query-buffer-limit", "hz", "timeout", "maxmemory-policy"}
	before := func(c *rawConn) []string {
		var vs []string
		for _, n := range watched {
			vs = append(vs, string(c.Do("CONFIG", "GET", n).Raw))
		}
		return vs
	}
	for _, args := range [][]string{
		{"maxmemory", "10000001", "port", "OTHER", "client-query-buffer-limit", "10m"},
		{"hz", "5", "maxmemory-policy", "nosuch", "timeout", "10"},
		{"timeout", "10", "hz", "abc"},
		{"maxmemory", "10000001", "maxmemory", "10000002"},
		{"port", "SELF", "tls-auth-clients", "yes", "tls-cluster", "no", "tls-replication", "no"},
		{"tls-auth-clients", "no"},
	} {
		r, k := before(rc), before(kc)
		ra, ka := []string{"CONFIG", "SET"}, []string{"CONFIG", "SET"}
		for _, a := range args {
			switch a {
			case "OTHER":
				ra, ka = append(ra, kvsPort), append(ka, refPort)
			case "SELF":
				ra, ka = append(ra, refPort), append(ka, kvsPort)
			default:
				ra, ka = append(ra, a), append(ka, a)
			}
		}
		rr, kr := rc.Do(ra...), kc.Do(ka...)
		if args[0] == "tls-auth-clients" {
			// Redis keeps a tls-* value for a listener it may start
			// later; kvs cannot start one, and refuses a change.
			if rr.IsError() || !kr.IsError() {
				t.Errorf("CONFIG SET %q without TLS: redis %q, kvs %q", args, rr.Raw, kr.Raw)
			}
			rc.Do("CONFIG", "SET", "tls-auth-clients", "yes")
			continue
		}
		if string(rr.Raw) != string(kr.Raw) {
			t.Errorf("CONFIG SET %q: kvs %q, redis %q", args, kr.Raw, rr.Raw)
		}
		if rr.IsError() {
			if ra, ka := before(rc), before(kc); strings.Join(ra, "") != strings.Join(r, "") || strings.Join(ka, "") != strings.Join(k, "") {
				t.Errorf("CONFIG SET %q failed, yet changed: redis %q to %q, kvs %q to %q", args, r, ra, k, ka)
			}
		}
	}
}

// configMap reads a CONFIG GET reply (a RESP2 array of pairs or a RESP3
// map) into a map.
func configMap(t *testing.T, v Value) map[string]string {
	t.Helper()
	if v.IsError() || len(v.Elems)%2 != 0 {
		t.Fatalf("CONFIG GET: %q", v.Raw)
	}
	m := make(map[string]string, len(v.Elems)/2)
	for i := 0; i < len(v.Elems); i += 2 {
		m[v.Elems[i].Str] = v.Elems[i+1].Str
	}
	return m
}

// sameMapReply reports whether two CONFIG GET replies hold the same pairs
// in any order (Redis's order is its dictionary's).
func sameMapReply(a, b Value) bool {
	if a.Kind != b.Kind || len(a.Elems) != len(b.Elems) {
		return false
	}
	ma, mb := map[string]string{}, map[string]string{}
	for i := 0; i+1 < len(a.Elems); i += 2 {
		ma[a.Elems[i].Str] = a.Elems[i+1].Str
		mb[b.Elems[i].Str] = b.Elems[i+1].Str
	}
	if len(ma) != len(mb) {
		return false
	}
	for k, v := range ma {
		if mb[k] != v {
			return false
		}
	}
	return true
}
