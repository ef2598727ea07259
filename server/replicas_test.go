package server

import (
	"strings"
	"testing"

	"kvs/fsm"
)

const noReplicas = "-" + errNoReplicas + "\r\n"

// noReplicasIn is the error of a script whose write on its first line
// was refused.
func noReplicasIn(body string) string {
	return "-" + errNoReplicas + " script: " + fsm.ScriptSHA([]byte(body)) + ", on @user_script:1.\r\n"
}

// replyCase is a command and the reply it must get.
type replyCase struct {
	want string
	cmd  []string
}

func rcase(want string, cmd ...string) replyCase { return replyCase{want, cmd} }

const (
	setScript   = "return redis.call('set','x',2)"
	laterScript = "redis.call('get','x') local ok = redis.pcall('set','x',5) return {ok['err'], redis.call('incr', 'y')}"
)

// noReplicasScript is run in order on one connection after SET x "some
// value" and a library with a write function f and a no-writes one g, with
// min-replicas-to-write 1 and no good replica; the replies are
// redis-server 7.0's for a master without replicas.
var noReplicasScript = []replyCase{
	rcase(noReplicas, "SET", "x", "1"),
	rcase(bulk("some value"), "GET", "x"),
	// A script that declares no flags runs; its first write is refused.
	rcase(noReplicasIn(setScript), "EVAL", setScript, "0"),
	rcase(noReplicas, "EVAL", "return redis.pcall('set','x',2)", "0"),
	rcase(bulk("some value"), "EVAL", "return redis.call('get','x')", "0"),
	// One that declares flags and may write is refused before it runs;
	// a no-writes one runs.
	rcase(noReplicas, "EVAL", "#!lua\nreturn redis.call('get','x')", "0"),
	rcase(bulk("some value"), "EVAL", "#!lua flags=no-writes\nreturn redis.call('get','x')", "0"),
	rcase(bulk("some value"), "EVAL_RO", "return redis.call('get','x')", "0"),
	// PUBLISH is no write, in a script or out.
	rcase(":0\r\n", "EVAL", "return redis.call('publish','ch','m')", "0"),
	rcase(":0\r\n", "PUBLISH", "ch", "m"),
	rcase(noReplicas, "FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('f2', function() return 1 end)"),
	rcase(noReplicas, "FCALL", "f", "0"),
	rcase(bulk("some value"), "FCALL", "g", "0"),
	rcase(bulk("some value"), "FCALL_RO", "g", "0"),
	rcase(bulk("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"), "SCRIPT", "LOAD", "return 1"),
	rcase(noReplicasIn(laterScript), "EVAL", laterScript, "0"),
	rcase(":1\r\n", "EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"),
	// Inside MULTI a write is refused as it is queued.
	rcase("+OK\r\n", "MULTI"),
	rcase(noReplicas, "SET", "x", "1"),
	rcase("+QUEUED\r\n", "GET", "x"),
	rcase("-EXECABORT Transaction discarded because of previous errors.\r\n", "EXEC"),
	rcase("+OK\r\n", "MULTI"),
	rcase("+QUEUED\r\n", "GET", "x"),
	rcase("+QUEUED\r\n", "EVAL", "return redis.pcall('set','x','y')", "0"),
	rcase("*2\r\n"+bulk("some value")+noReplicas, "EXEC"),
	// min-replicas-max-lag 0 turns the check off, as does
	// min-replicas-to-write 0.
	rcase("+OK\r\n", "CONFIG", "SET", "min-replicas-max-lag", "0"),
	rcase("+OK\r\n", "SET", "x", "5"),
	rcase("+OK\r\n", "CONFIG", "SET", "min-slaves-max-lag", "10"),
	rcase(noReplicas, "SET", "x", "6"),
	rcase("+OK\r\n", "CONFIG", "SET", "min-slaves-to-write", "0"),
	rcase("+OK\r\n", "SET", "x", "7"),
}

// TestMinReplicasWithoutReplicas: a node outside a cluster has no
// replicas, so min-replicas-to-write refuses what Redis's master without
// replicas refuses, in Redis's words: writes, scripts and functions that
// may write, the first write of a script that declares no flags.
func TestMinReplicasWithoutReplicas(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	lib := "#!lua name=lib\n" +
		"redis.register_function('f', function() return redis.call('set','x',3) end)\n" +
		"redis.register_function{function_name='g', callback=function() return redis.call('get','x') end, flags={'no-writes'}}"
	if got := rc.do("FUNCTION", "LOAD", lib); got != bulk("lib") {
		t.Fatalf("FUNCTION LOAD: %q", got)
	}
	rc.do("SET", "x", "some value")
	if got := rc.do("INFO", "replication"); strings.Contains(got, "min_slaves_good_slaves") {
		t.Fatalf("INFO replication with the check off: %q", got)
	}
	if got := rc.do("CONFIG", "SET", "min-replicas-to-write", "1"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	if got := rc.do("CONFIG", "GET", "min-slaves-to-write"); got != "*2\r\n"+bulk("min-slaves-to-write")+bulk("1") {
		t.Fatalf("CONFIG GET of the alias: %q", got)
	}
	if got := rc.do("INFO", "replication"); !strings.Contains(got, "connected_slaves:0\r\nmin_slaves_good_slaves:0\r\n") {
		t.Fatalf("INFO replication: %q", got)
	}
	for _, tc := range noReplicasScript {
		if got := rc.do(tc.cmd...); got != tc.want {
			t.Fatalf("%q: %q, want %q", tc.cmd, got, tc.want)
		}
	}

	// A transaction queued before the check went on is refused whole at
	// EXEC.
	rc.do("CONFIG", "SET", "min-replicas-to-write", "0")
	rc.do("MULTI")
	rc.do("SET", "x", "8")
	other := dialRaw(t, s)
	other.do("CONFIG", "SET", "min-replicas-to-write", "1")
	if got, want := rc.do("EXEC"), "-EXECABORT Transaction discarded because of: "+errNoReplicas+"\r\n"; got != want {
		t.Fatalf("EXEC: %q, want %q", got, want)
	}
	if got := rc.do("GET", "x"); got != bulk("7") {
		t.Fatalf("GET after the refused EXEC: %q", got)
	}
}

// TestMinReplicasCluster: in a cluster the leader decides, with its own
// parameters and its good replicas, for its own clients and for the
// writes its followers forward: a follower's clients get the leader's
// refusals, of functions and FUNCTION DELETE too, and of scripts that
// declare no flags inside a forwarded transaction; no-writes functions
// and scripts run; the follower's own parameters change nothing.
func TestMinReplicasCluster(t *testing.T) {
	p := startPair(t, false, true)
	lead, fol := dialRaw(t, p.leader), dialRaw(t, p.follower)
	lib := "#!lua name=lib\n" +
		"redis.register_function('f', function() return redis.call('set','x',3) end)\n" +
		"redis.register_function{function_name='g', callback=function() return redis.call('get','x') end, flags={'no-writes'}}"
	if got := lead.do("FUNCTION", "LOAD", lib); got != bulk("lib") {
		t.Fatalf("FUNCTION LOAD: %q", got)
	}
	for _, rc := range []*rawConn{lead, fol} {
		if got := rc.do("CONFIG", "SET", "min-replicas-to-write", "2"); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET: %q", got)
		}
	}
	p.lc.good.Store(1)
	setRefused := noReplicasIn(setScript)
	for _, rc := range []*rawConn{lead, fol} {
		for _, tc := range []replyCase{
			rcase(noReplicas, "SET", "x", "1"),
			rcase(setRefused, "EVAL", setScript, "0"),
			rcase(noReplicas, "EVAL", "#!lua\nreturn 1", "0"),
			rcase("$-1\r\n", "EVAL", "return redis.call('get','x')", "0"),
			rcase("$-1\r\n", "EVAL", "#!lua flags=no-writes\nreturn redis.call('get','x')", "0"),
			rcase(noReplicas, "FCALL", "f", "0"),
			rcase("$-1\r\n", "FCALL", "g", "0"),
			rcase("$-1\r\n", "FCALL_RO", "g", "0"),
			rcase(noReplicas, "FUNCTION", "DELETE", "lib"),
			rcase(":0\r\n", "EVAL", "return redis.call('publish','ch','m')", "0"),
			rcase("$-1\r\n", "GET", "x"),
		} {
			if got := rc.do(tc.cmd...); got != tc.want {
				t.Fatalf("%q: %q, want %q", tc.cmd, got, tc.want)
			}
		}
	}
	// The follower queues what its leader will judge at EXEC.
	fol.do("MULTI")
	fol.do("GET", "x")
	fol.do("EVAL", setScript, "0")
	if got, want := fol.do("EXEC"), "*2\r\n$-1\r\n"+setRefused; got != want {
		t.Fatalf("a forwarded transaction with a script: %q, want %q", got, want)
	}
	for _, write := range [][]string{{"SET", "x", "1"}, {"FCALL", "f", "0"}} {
		fol.do("MULTI")
		fol.do("GET", "x")
		fol.do(write...)
		if got, want := fol.do("EXEC"), "-EXECABORT Transaction discarded because of: "+errNoReplicas+"\r\n"; got != want {
			t.Fatalf("a forwarded transaction with %q: %q, want %q", write, got, want)
		}
	}
	if got := lead.do("INFO", "replication"); !strings.Contains(got, "min_slaves_good_slaves:1\r\n") {
		t.Fatalf("the leader's INFO replication: %q", got)
	}
	if got := fol.do("INFO", "replication"); !strings.Contains(got, "min_slaves_good_slaves:0\r\n") {
		t.Fatalf("the follower's INFO replication: %q", got)
	}

	p.lc.good.Store(2)
	for _, rc := range []*rawConn{lead, fol} {
		if got := rc.do("SET", "x", "1"); got != "+OK\r\n" {
			t.Fatalf("SET with enough good replicas: %q", got)
		}
		if got := rc.do("EVAL", setScript, "0"); got != "+OK\r\n" {
			t.Fatalf("EVAL with enough good replicas: %q", got)
		}
	}
	// The follower's own parameters do not apply: the leader's do.
	lead.do("CONFIG", "SET", "min-replicas-to-write", "0")
	fol.do("CONFIG", "SET", "min-replicas-to-write", "5")
	if got := fol.do("SET", "x", "2"); got != "+OK\r\n" {
		t.Fatalf("SET through a follower whose own check fails: %q", got)
	}
}
