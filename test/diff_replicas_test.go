package test

import "testing"

// minReplicasSession turns min-replicas-to-write on, on a server with no
// replicas, and runs what Redis then refuses and what it still runs:
// writes, scripts and functions that may write, a script's first write
// when it declares no flags, transactions queued before and after the
// check went on; reads, no-writes scripts and functions, PUBLISH, and
// everything again once min-replicas-max-lag or min-replicas-to-write is
// 0.
var minReplicasSession = queueSession{name: "NOREPLICAS", steps: []queueStep{
	steps("admin", []string{"FUNCTION", "LOAD", "REPLACE", "#!lua name=qlib\n" +
		"redis.register_function('qf', function() return redis.call('set', 'q', 'f') end)\n" +
		"redis.register_function{function_name='qg', callback=function() return redis.call('get', 'q') end, flags={'no-writes'}}"},
		[]string{"SET", "q", "before"}),
	steps("", []string{"MULTI"}, []string{"GET", "q"}, []string{"SET", "q", "queued"}),
	steps("admin", []string{"CONFIG", "SET", "min-replicas-to-write", "1"}),
	steps("", []string{"EXEC"}, []string{"GET", "q"}),
	steps("", []string{"SET", "q", "1"}, []string{"INCR", "n"}, []string{"GET", "q"}, []string{"FLUSHALL"},
		[]string{"EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "q"},
		[]string{"EVAL", "return redis.pcall('set', KEYS[1], 'x')", "1", "q"},
		[]string{"EVAL", "local r = redis.pcall('incr', 'n') return {r['err'], redis.call('get', 'q')}", "0"},
		[]string{"EVAL", "return redis.call('get', KEYS[1])", "1", "q"},
		[]string{"EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "q"},
		[]string{"EVAL", "#!lua flags=allow-oom\nreturn 1", "0"},
		[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "q"},
		[]string{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "q"},
		[]string{"EVAL", "return redis.call('publish', 'qch', 'm')", "0"},
		[]string{"PUBLISH", "qch", "m"},
		[]string{"SCRIPT", "LOAD", "return 'loaded'"},
		[]string{"EVALSHA", scriptSHA("return 'loaded'"), "0"},
		[]string{"FCALL", "qf", "0"}, []string{"FCALL", "qg", "0"}, []string{"FCALL_RO", "qg", "0"},
		[]string{"FUNCTION", "DELETE", "qlib"}, []string{"FUNCTION", "FLUSH"}),
	steps("", []string{"MULTI"}, []string{"GET", "q"}, []string{"SET", "q", "2"}, []string{"EXEC"}, []string{"GET", "q"}),
	steps("", []string{"MULTI"}, []string{"GET", "q"}, []string{"EVAL", "return redis.pcall('set', 'q', 'x')", "0"},
		[]string{"EVAL", "#!lua flags=no-writes\nreturn 1", "0"}, []string{"EXEC"}),
	steps("admin", []string{"CONFIG", "SET", "min-slaves-max-lag", "0"}),
	steps("", []string{"SET", "q", "lag 0"}, []string{"EVAL", "return redis.call('set', 'q', 'x')", "0"}, []string{"GET", "q"}),
	steps("admin", []string{"CONFIG", "SET", "min-replicas-max-lag", "10"}),
	steps("", []string{"SET", "q", "lag 10"}, []string{"GET", "q"}),
	steps("admin", []string{"CONFIG", "SET", "min-slaves-to-write", "0"}),
	steps("", []string{"SET", "q", "off"}, []string{"FCALL", "qf", "0"}, []string{"GET", "q"}),
}}

// TestDifferentialMinReplicas runs minReplicasSession against
// redis-server and kvs in memory and durable mode, RESP2 and RESP3:
// without replicas, every reply must be Redis's.
func TestDifferentialMinReplicas(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	for _, m := range []struct {
		name  string
		proto int
		opts  KVSOptions
	}{
		{"resp2-memory", 2, KVSOptions{}},
		{"resp3-memory", 3, KVSOptions{}},
		{"resp3-durable", 3, KVSOptions{Durable: true}},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			runQueueSession(t, startRedis(t), startKVS(t, m.opts), m.proto, minReplicasSession)
		})
	}
}
