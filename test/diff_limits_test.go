package test

import (
	"strings"
	"testing"
)

// limitsScript exercises the configuration of protected mode and the
// limits, and the OOM refusal, whose replies are deterministic.
var limitsScript = [][]string{
	{"CONFIG", "GET", "protected-mode"},
	{"CONFIG", "SET", "protected-mode", "maybe"},
	{"CONFIG", "SET", "protected-mode", "YES"},
	{"CONFIG", "GET", "client-query-buffer-limit"},
	{"CONFIG", "SET", "client-query-buffer-limit", "1000"},
	{"CONFIG", "SET", "client-query-buffer-limit", "1x"},
	{"CONFIG", "SET", "client-query-buffer-limit", "2mb"},
	{"CONFIG", "GET", "client-query-buffer-limit"},
	{"CONFIG", "SET", "client-query-buffer-limit", "1gb"},
	{"CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 512kb 10"},
	{"CONFIG", "GET", "client-output-buffer-limit"},
	{"CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"},
	{"CONFIG", "SET", "client-output-buffer-limit", "master 1 2 3"},
	{"CONFIG", "SET", "client-output-buffer-limit", "normal x 0 0"},
	{"CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0 replica 1gb 1mb 5 pubsub 1mb 0 0"},
	{"CONFIG", "GET", "client-output-buffer-limit"},
	{"CONFIG", "GET", "maxmemory*"},
	{"CONFIG", "SET", "maxmemory-samples", "0"},
	{"CONFIG", "SET", "maxmemory-samples", "x"},
	{"CONFIG", "SET", "maxmemory-samples", "7"},
	{"CONFIG", "GET", "maxmemory-samples"},
	{"CONFIG", "SET", "maxmemory", "1x"},
	{"CONFIG", "SET", "maxmemory-policy", "volatile-ttl"},
	{"CONFIG", "SET", "maxmemory-policy", "lru"},
	{"CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LFU"},
	{"CONFIG", "GET", "maxmemory-policy"},
	{"SET", "f", "hello"},
	{"OBJECT", "IDLETIME", "f"},
	{"CONFIG", "SET", "maxmemory-policy", "volatile-lru"},
	{"OBJECT", "FREQ", "f"},
	{"CONFIG", "GET", "maxmemory-policy"},
	{"CONFIG", "SET", "maxmemory-policy", "NoEviction"},
	{"SET", "a", "b"},
	{"FUNCTION", "LOAD", "#!lua name=oomlib\nredis.register_function('oomw', function(k, a) return redis.call('set', k[1], a[1]) end)\nredis.register_function{function_name='oomok', callback=function(k, a) return redis.call('set', k[1], a[1]) end, flags={'allow-oom'}}"},
	{"CONFIG", "SET", "maxmemory", "1"},
	{"SET", "a", "c"},
	{"APPEND", "a", "d"},
	{"GET", "a"},
	{"EXISTS", "a"},
	// Scripts over maxmemory: one with flags that may write and lacks
	// allow-oom is refused whole; one without a shebang runs, and its
	// first denyoom call before any write is refused.
	{"EVAL", "return redis.call('set','a','x')", "0"},
	{"EVAL", "return redis.pcall('set','a','x')", "0"},
	{"EVAL", "return redis.call('get','a')", "0"},
	{"EVAL", "redis.call('del','zz') return redis.call('set','zz','y')", "0"},
	{"EVAL", "#!lua\nreturn redis.call('set','a','x')", "0"},
	{"EVAL", "#!lua flags=allow-oom\nreturn redis.call('set','a','z')", "0"},
	{"EVAL", "#!lua flags=no-writes\nreturn redis.call('get','a')", "0"},
	{"FCALL", "oomw", "1", "a", "w"},
	{"FCALL", "oomok", "1", "a", "w"},
	{"FCALL", "nosuchfn", "1", "a", "w"},
	{"FUNCTION", "LOAD", "#!lua name=oomlib2\nredis.register_function('f2', function() return 1 end)"},
	{"SCRIPT", "LOAD", "return 1"},
	{"GET", "a"},
	{"DEL", "a", "zz"},
	{"CONFIG", "SET", "maxmemory", "0"},
	{"FUNCTION", "FLUSH"},
	{"SET", "a", "e"},
	{"GET", "a"},
}

// limitsMultiScript runs on two connections: other is the one that
// changes maxmemory while the first holds a transaction open.
var limitsMultiScript = []struct {
	other bool
	cmd   []string
}{
	{true, []string{"CONFIG", "SET", "maxmemory", "1"}},
	{false, []string{"MULTI"}},
	{false, []string{"SET", "x", "1"}},
	{false, []string{"GET", "x"}},
	{false, []string{"EXEC"}},
	{true, []string{"CONFIG", "SET", "maxmemory", "0"}},
	{false, []string{"MULTI"}},
	{false, []string{"SET", "x", "1"}},
	{true, []string{"CONFIG", "SET", "maxmemory", "1"}},
	{false, []string{"EXEC"}},
	{false, []string{"EXEC"}},
	{true, []string{"CONFIG", "SET", "maxmemory", "0"}},
	{false, []string{"MULTI"}},
	{false, []string{"GET", "x"}},
	{true, []string{"CONFIG", "SET", "maxmemory", "1"}},
	{false, []string{"EXEC"}},
	{true, []string{"CONFIG", "SET", "maxmemory", "0"}},
}

// TestDifferentialLimits runs limitsScript on kvs and redis-server, in
// RESP2 and RESP3, and requires the same bytes. The pattern CONFIG GET
// maxmemory* is left out (kvs has no maxmemory-clients or
// maxmemory-eviction-tenacity); the three names both have are compared one
// by one.
func TestDifferentialLimits(t *testing.T) {
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			conns := dialHello(t, proto, ref.Addr, kvs.Addr)
			for _, cmd := range limitsScript {
				if strings.HasSuffix(cmd[len(cmd)-1], "*") {
					continue // see below
				}
				want, got := conns[0].Do(cmd...), conns[1].Do(cmd...)
				if string(want.Raw) != string(got.Raw) {
					t.Errorf("%s:\n  redis %q\n  kvs   %q", showCommand(cmd), want.Raw, got.Raw)
				}
			}
			// OOM in a transaction: queuing is refused, and EXEC of one
			// holding a denyoom command, with Redis's two EXECABORTs.
			others := []*rawConn{dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)}
			for _, step := range limitsMultiScript {
				var want, got Value
				if step.other {
					want, got = others[0].Do(step.cmd...), others[1].Do(step.cmd...)
				} else {
					want, got = conns[0].Do(step.cmd...), conns[1].Do(step.cmd...)
				}
				if string(want.Raw) != string(got.Raw) {
					t.Errorf("%s:\n  redis %q\n  kvs   %q", showCommand(step.cmd), want.Raw, got.Raw)
				}
			}
			for _, name := range []string{"maxmemory", "maxmemory-policy", "maxmemory-samples"} {
				want, got := conns[0].Do("CONFIG", "GET", name), conns[1].Do("CONFIG", "GET", name)
				if string(want.Raw) != string(got.Raw) {
					t.Errorf("CONFIG GET %s:\n  redis %q\n  kvs   %q", name, want.Raw, got.Raw)
				}
			}
		})
	}
}
