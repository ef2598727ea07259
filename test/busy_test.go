package test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scripts that run past busy-reply-threshold, as Redis 7.0's scripting
// tests drive them (unit/scripting's "Timedout ..." tests), against the
// real binary in every mode that serves connections differently.

const (
	busyScriptText   = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	busyFunctionText = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
	killedText       = "ERR Script killed by user with SCRIPT KILL..."
)

// busyTargets are kvs's ways of serving: memory mode on event loops and
// on goroutines, durable mode (event loops and the log's apply).
var busyTargets = []struct {
	name string
	opts KVSOptions
}{
	{"memory", KVSOptions{}},
	{"memory-goroutines", KVSOptions{Extra: []string{"--io", "goroutines"}}},
	{"durable", KVSOptions{Durable: true}},
}

// TestBusyReadOnlyScriptKilled: in every mode a read-only script (here a
// loop of pcalls, which cannot catch the kill) is busy after the
// threshold for every other client, go-redis's included, and SCRIPT KILL
// stops it.
func TestBusyReadOnlyScriptKilled(t *testing.T) {
	for _, target := range busyTargets {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			n := startKVS(t, target.opts)
			p := dialRaw(t, n.Addr)
			if v := p.Do("CONFIG", "SET", "busy-reply-threshold", "10"); v.Str != "OK" {
				t.Fatal(v)
			}
			a := dialRaw(t, n.Addr)
			a.Write(string(encodeCommand("EVAL_RO", "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end", "0")))
			waitBusy(t, n)
			ctx := testCtx(t)
			gr := newClient(t, n, nil)
			if err := gr.Get(ctx, "k").Err(); err == nil || err.Error() != busyScriptText {
				t.Fatalf("go-redis GET while busy: %v", err)
			}
			if err := gr.FunctionKill(ctx).Err(); err == nil || err.Error() != busyScriptText {
				t.Fatalf("FUNCTION KILL of a script: %v", err)
			}
			if err := gr.ScriptKill(ctx).Err(); err != nil {
				t.Fatalf("SCRIPT KILL: %v", err)
			}
			if v := a.Read(); !strings.HasPrefix(v.Str, killedText) {
				t.Fatalf("the script's reply: %s", v)
			}
			if err := gr.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING after the kill: %v", err)
			}
		})
	}
}

// TestBusyWriteScript: a script that may write. In memory mode it is
// killed as in Redis until it writes; once it has written it cannot be,
// SHUTDOWN is refused, and SHUTDOWN NOSAVE stops the server. In durable
// mode the log's apply runs it in full (also at every replay), so SCRIPT
// KILL is refused, and its budget stops it.
func TestBusyWriteScript(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		n := startKVS(t, KVSOptions{})
		p := dialRaw(t, n.Addr)
		p.Do("CONFIG", "SET", "busy-reply-threshold", "10")
		a := dialRaw(t, n.Addr)
		a.Write(string(encodeCommand("EVAL", "local i = 0 while true do i = i + 1 end", "0")))
		waitBusy(t, n)
		if v := p.Do("SCRIPT", "KILL"); v.Str != "OK" {
			t.Fatalf("SCRIPT KILL of a script that has not written: %s", v)
		}
		if v := a.Read(); !strings.HasPrefix(v.Str, killedText) {
			t.Fatalf("the script's reply: %s", v)
		}
		a.Write(string(encodeCommand("EVAL", "redis.call('SET', KEYS[1], 'y') while true do end", "1", "x")))
		waitBusy(t, n)
		for _, step := range []struct {
			args []string
			want string
		}{
			{[]string{"SCRIPT", "KILL"}, "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."},
			{[]string{"PING"}, busyScriptText},
			{[]string{"SHUTDOWN"}, busyScriptText},
		} {
			if v := p.Do(step.args...); v.Str != step.want {
				t.Fatalf("%v = %s, want %s", step.args, v, step.want)
			}
		}
		if v, err := p.do("SHUTDOWN", "NOSAVE"); err == nil {
			t.Fatalf("SHUTDOWN NOSAVE answered %s", v)
		}
		select {
		case <-n.exited:
		case <-time.After(stopTimeout):
			t.Fatal("still running after SHUTDOWN NOSAVE")
		}
		if err := n.exitErr(); err != nil {
			t.Fatalf("exited with %v", err)
		}
	})
	t.Run("durable", func(t *testing.T) {
		t.Parallel()
		n := startKVS(t, KVSOptions{Durable: true})
		p := dialRaw(t, n.Addr)
		p.Do("CONFIG", "SET", "busy-reply-threshold", "10")
		p.Do("CONFIG", "SET", "script-write-budget", longScriptBudget)
		done := make(chan Value, 1)
		go func() {
			v, err := doLong(n.Addr, "EVAL", "local i = 0 while true do i = i + 1 end", "0")
			if err != nil {
				v = Value{Str: err.Error()}
			}
			done <- v
		}()
		waitBusy(t, n)
		// Answered while the script runs, unless it ended meanwhile.
		if v := p.Do("SCRIPT", "KILL"); !strings.HasPrefix(v.Str, "UNKILLABLE The busy script may write") && v.Str != "NOTBUSY No scripts in execution right now." {
			t.Fatalf("SCRIPT KILL = %s", v)
		}
		if v := <-done; v.Str != "ERR Script ran past its instruction budget (script-write-budget) and was stopped" {
			t.Fatalf("the script's reply: %s", v)
		}
		if v := p.Do("PING"); v.Str != "PONG" {
			t.Fatalf("PING after the script: %s", v)
		}
		// A read-only script inside EXEC runs inside the log's apply as
		// well, and is bounded the same way.
		p.Do("CONFIG", "SET", "script-write-budget", "1000000")
		for _, args := range [][]string{{"MULTI"}, {"EVAL_RO", "while true do end", "0"}, {"GET", "k"}} {
			p.Do(args...)
		}
		if v := p.Do("EXEC"); len(v.Elems) != 2 || v.Elems[0].Str != "ERR Script ran past its instruction budget (script-write-budget) and was stopped" {
			t.Fatalf("EXEC of a runaway EVAL_RO: %s", v)
		}
	})
}

// TestBusyFunctionKilled: a function is FUNCTION KILL's, SCRIPT KILL
// names FUNCTION KILL, and FUNCTION STATS shows it running.
func TestBusyFunctionKilled(t *testing.T) {
	t.Parallel()
	n := startKVS(t, KVSOptions{})
	ctx := testCtx(t)
	gr := newClient(t, n, nil)
	gr.ConfigSet(ctx, "busy-reply-threshold", "10")
	if err := gr.FunctionLoad(ctx, "#!lua name=test\nredis.register_function('test', function() local a = 1 while true do a = a + 1 end end)").Err(); err != nil {
		t.Fatal(err)
	}
	a := dialRaw(t, n.Addr)
	a.Write(string(encodeCommand("FCALL", "test", "0")))
	waitBusy(t, n)
	stats, err := gr.FunctionStats(ctx).Result()
	if err != nil {
		t.Fatalf("FUNCTION STATS while busy: %v", err)
	}
	if rs, running := stats.RunningScript(); !running || rs.Name != "test" || strings.Join(rs.Command, " ") != "fcall test 0" {
		t.Fatalf("FUNCTION STATS running script: %+v (running %v)", rs, running)
	}
	var rerr redis.Error
	if err := gr.ScriptKill(ctx).Err(); !errors.As(err, &rerr) || err.Error() != busyFunctionText {
		t.Fatalf("SCRIPT KILL of a function: %v", err)
	}
	if err := gr.FunctionKill(ctx).Err(); err != nil {
		t.Fatalf("FUNCTION KILL: %v", err)
	}
	if v := a.Read(); v.Str != killedText+" script: test, on @user_function:2." {
		t.Fatalf("the function's reply: %s", v)
	}
}
