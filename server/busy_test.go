package server

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"kvs/fsm"
)

// busyModes are the ways connections are served: event loops (memory
// mode's, where a loop answers its other clients from inside the script)
// and a goroutine each.
var busyModes = []struct {
	name       string
	goroutines bool
}{{"loops", false}, {"goroutines", true}}

const busyEvalText = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"

// busyProbes dials a connection per event loop and one more, so that one
// at least shares the loop of every earlier connection, and sets a 10 ms
// busy threshold.
func busyProbes(t *testing.T, s *Server) []*rawConn {
	t.Helper()
	var probes []*rawConn
	for range runtime.NumCPU() + 1 {
		probes = append(probes, dialRaw(t, s))
	}
	if r := probes[0].do("CONFIG", "SET", "busy-reply-threshold", "10"); r != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", r)
	}
	return probes
}

// waitBusyReply waits until every probe's PING is answered text.
func waitBusyReply(t *testing.T, probes []*rawConn, text string) {
	t.Helper()
	for _, p := range probes {
		eventually(t, "BUSY", func() bool { return p.do("PING") == text })
	}
}

// TestBusyScriptKill: while a script runs past the threshold, every other
// connection (on the script's loop too) gets BUSY, the allow_busy commands
// run with Redis's replies, and SCRIPT KILL stops the script, whose client
// gets Redis's error naming where it stopped.
func TestBusyScriptKill(t *testing.T) {
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: m.goroutines})
			a := dialRaw(t, s)
			probes := busyProbes(t, s)
			if r := a.do("SET", "k", "v"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			body := "local i = 0\nwhile true do i = i + 1 end"
			a.send(encodeCommand("EVAL", body, "0"))
			waitBusyReply(t, probes, busyEvalText)
			// Again: the script's loop serves a connection it has served
			// before, while the script runs on.
			for _, p := range probes {
				if r := p.do("GET", "k"); r != busyEvalText {
					t.Fatalf("GET again = %q", r)
				}
			}
			p := probes[len(probes)-1]
			for _, step := range []struct {
				args []string
				want string
			}{
				{[]string{"GET", "k"}, busyEvalText},
				{[]string{"SET", "k", "w"}, busyEvalText},
				{[]string{"EVAL", "return 1", "0"}, busyEvalText},
				{[]string{"FUNCTION", "KILL"}, busyEvalText},
				{[]string{"FUNCTION", "STATS"}, busyEvalText},
				{[]string{"SHUTDOWN"}, busyEvalText},
				{[]string{"MULTI"}, "+OK\r\n"},
				{[]string{"DISCARD"}, "+OK\r\n"},
				{[]string{"WATCH", "k"}, "+OK\r\n"},
				{[]string{"UNWATCH"}, "+OK\r\n"},
				{[]string{"AUTH", "x"}, "-" + errAuthNoPassword + "\r\n"},
				{[]string{"SCRIPT", "KILL"}, "+OK\r\n"},
			} {
				if r := p.do(step.args...); r != step.want {
					t.Errorf("%v = %q, want %q", step.args, r, step.want)
				}
			}
			want := "-" + fsm.ErrScriptKilled + " script: " + fsm.ScriptSHA([]byte(body)) + ", on @user_script:2.\r\n"
			if r := a.reply(); r != want {
				t.Fatalf("the script's reply = %q, want %q", r, want)
			}
			for _, p := range probes {
				if r := p.do("GET", "k"); r != "$1\r\nv\r\n" {
					t.Fatalf("GET after the kill = %q", r)
				}
			}
			if r := p.do("SCRIPT", "KILL"); r != "-"+errNotBusy+"\r\n" {
				t.Fatalf("SCRIPT KILL with no script = %q", r)
			}
		})
	}
}

// TestBusyPipelineAfterScript: a command pipelined behind the busy script
// on its own connection waits for the script, and is answered after it,
// not BUSY: Redis protects the script's client (a "false dead client").
func TestBusyPipelineAfterScript(t *testing.T) {
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: m.goroutines})
			a := dialRaw(t, s)
			probes := busyProbes(t, s)
			a.send(append(encodeCommand("EVAL", "while 1 do redis.call('ping') end", "0"), encodeCommand("PING")...))
			waitBusyReply(t, probes, busyEvalText)
			if r := probes[0].do("SCRIPT", "KILL"); r != "+OK\r\n" {
				t.Fatalf("SCRIPT KILL = %q", r)
			}
			if r := a.reply(); !strings.HasPrefix(r, "-"+fsm.ErrScriptKilled) {
				t.Fatalf("the script's reply = %q", r)
			}
			if r := a.reply(); r != "+PONG\r\n" {
				t.Fatalf("the PING after it = %q", r)
			}
		})
	}
}

// TestBusyTransaction: while a script is busy, MULTI runs (allow_busy),
// a command queued is refused with BUSY and flags the transaction, and an
// EXEC during the script answers EXECABORT naming BUSY: a transaction sent
// around the script runs whole or not at all, as in Redis.
func TestBusyTransaction(t *testing.T) {
	const execAbortBusy = "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: m.goroutines})
			a := dialRaw(t, s)
			probes := busyProbes(t, s)
			p, q := probes[0], probes[1]
			if r := p.do("SET", "xx", "1"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			// q's transaction began before the script.
			for _, step := range [][2]string{{"MULTI", "+OK\r\n"}, {"INCR", "+QUEUED\r\n"}} {
				args := []string{step[0]}
				if step[0] == "INCR" {
					args = append(args, "xx")
				}
				if r := q.do(args...); r != step[1] {
					t.Fatalf("%v = %q", args, r)
				}
			}
			a.send(encodeCommand("EVAL", "while true do end", "0"))
			w := dialRaw(t, s)
			waitBusyReply(t, []*rawConn{w}, busyEvalText)
			for _, step := range []struct {
				c    *rawConn
				args []string
				want string
			}{
				{p, []string{"MULTI"}, "+OK\r\n"},
				{p, []string{"INCR", "xx"}, busyEvalText},
				{q, []string{"INCR", "xx"}, busyEvalText},
				{q, []string{"EXEC"}, execAbortBusy},
				{p, []string{"SCRIPT", "KILL"}, "+QUEUED\r\n"},
			} {
				if r := step.c.do(step.args...); r != step.want {
					t.Errorf("%v = %q, want %q", step.args, r, step.want)
				}
			}
			if r := w.do("SCRIPT", "KILL"); r != "+OK\r\n" {
				t.Fatalf("SCRIPT KILL = %q", r)
			}
			if r := a.reply(); !strings.HasPrefix(r, "-"+fsm.ErrScriptKilled) {
				t.Fatalf("the script's reply = %q", r)
			}
			// EXEC ended q's transaction.
			if r := q.do("PING", "out"); r != "$3\r\nout\r\n" {
				t.Fatalf("PING after the EXEC = %q", r)
			}
			if r := p.do("INCR", "xx"); r != "+QUEUED\r\n" {
				t.Fatalf("INCR after the kill = %q", r)
			}
			if r := p.do("EXEC"); r != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
				t.Fatalf("EXEC after the kill = %q", r)
			}
			if r := p.do("GET", "xx"); r != "$1\r\n1\r\n" {
				t.Fatalf("xx = %q: part of a transaction ran", r)
			}
		})
	}
}

// TestBusyFunction: a busy function is FUNCTION KILL's, not SCRIPT
// KILL's, and FUNCTION STATS shows it.
func TestBusyFunction(t *testing.T) {
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: m.goroutines})
			a := dialRaw(t, s)
			probes := busyProbes(t, s)
			code := "#!lua name=spin\nredis.register_function('spin', function(keys, args) while true do end end)"
			if r := a.do("FUNCTION", "LOAD", code); r != "$4\r\nspin\r\n" {
				t.Fatal(r)
			}
			a.send(encodeCommand("FCALL", "spin", "1", "key", "arg"))
			busyFn := "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
			waitBusyReply(t, probes, busyFn)
			p := probes[0]
			stats := p.do("FUNCTION", "STATS")
			for _, want := range []string{"running_script", "$4\r\nspin\r\n", "$5\r\nfcall\r\n$4\r\nspin\r\n$1\r\n1\r\n$3\r\nkey\r\n$3\r\narg\r\n", "duration_ms", "libraries_count"} {
				if !strings.Contains(stats, want) {
					t.Errorf("FUNCTION STATS %q lacks %q", stats, want)
				}
			}
			if r := p.do("SCRIPT", "KILL"); r != busyFn {
				t.Errorf("SCRIPT KILL of a function = %q", r)
			}
			if r := p.do("FUNCTION", "KILL"); r != "+OK\r\n" {
				t.Fatalf("FUNCTION KILL = %q", r)
			}
			if r := a.reply(); r != "-"+fsm.ErrScriptKilled+" script: spin, on @user_function:2.\r\n" {
				t.Fatalf("the function's reply = %q", r)
			}
			if r := p.do("FUNCTION", "STATS"); !strings.HasPrefix(r, "*4\r\n$14\r\nrunning_script\r\n$-1\r\n") {
				t.Fatalf("FUNCTION STATS after = %q", r)
			}
		})
	}
}

// TestBusyRoundsLoop: in durable mode's event loops, a loop that waits
// for the log with every client of its round stops waiting once the
// script the log's apply runs is busy, and answers BUSY.
func TestBusyRoundsLoop(t *testing.T) {
	store := fsm.NewStore()
	s := startServer(t, Config{Store: store, Proposer: &roundsProposer{store: store}})
	a := dialRaw(t, s)
	probes := busyProbes(t, s)
	a.send(encodeCommand("EVAL", "local i = 0 while true do i = i + 1 end", "0"))
	waitBusyReply(t, probes, busyEvalText)
	if r := probes[0].do("SCRIPT", "KILL"); r != "+OK\r\n" {
		t.Fatalf("SCRIPT KILL = %q", r)
	}
	if r := a.reply(); !strings.HasPrefix(r, "-"+fsm.ErrScriptKilled) {
		t.Fatalf("the script's reply = %q", r)
	}
}

// TestScriptWriteBudgetConfig: CONFIG GET and SET of script-write-budget,
// and the budget it puts on a script that may write, in durable mode only.
func TestScriptWriteBudgetConfig(t *testing.T) {
	s := startServer(t, Config{})
	c := dialRaw(t, s)
	if r := c.do("CONFIG", "GET", "script-write-budget"); r != "*2\r\n$19\r\nscript-write-budget\r\n$10\r\n1000000000\r\n" {
		t.Fatalf("CONFIG GET = %q", r)
	}
	for _, bad := range []string{"-1", "abc", "1.5"} {
		want := "-ERR CONFIG SET failed (possibly related to argument 'script-write-budget') - argument must be between 0 and 9223372036854775807 inclusive\r\n"
		if r := c.do("CONFIG", "SET", "script-write-budget", bad); r != want {
			t.Errorf("CONFIG SET %s = %q", bad, r)
		}
	}
	if r := c.do("CONFIG", "SET", "script-write-budget", "12345"); r != "+OK\r\n" {
		t.Fatalf("CONFIG SET = %q", r)
	}
	if got := s.scriptBudget(); got != 0 {
		t.Errorf("memory mode's budget = %v, want none", got)
	}
	ds := startServer(t, Config{Proposer: &roundsProposer{store: fsm.NewStore()}})
	if r := dialRaw(t, ds).do("CONFIG", "SET", "script-write-budget", "12345"); r != "+OK\r\n" {
		t.Fatalf("CONFIG SET = %q", r)
	}
	if got := ds.scriptBudget(); got != 12345 {
		t.Errorf("the budget with a log = %v, want 12345", got)
	}
}

// TestBusyScriptEndsWithServer: Close and Shutdown stop a script that a
// kill cannot make replicas differ over, since no client can kill it any
// more, instead of waiting for it forever.
func TestBusyScriptEndsWithServer(t *testing.T) {
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: m.goroutines})
			a := dialRaw(t, s)
			probes := busyProbes(t, s)
			a.send(encodeCommand("EVAL", "redis.call('SET', 'k', 'v') while true do end", "0"))
			waitBusyReply(t, probes, busyEvalText)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown with a busy script: %v", err)
			}
		})
	}
}

// TestBusyPassiveExpiry: in memory mode the expired keys a read met are
// deleted by its connection, unless a script took the store meanwhile and
// turned busy: then the connection does not wait for it (it has clients
// to answer BUSY), and the cron loop deletes them after the script.
func TestBusyPassiveExpiry(t *testing.T) {
	s := startServer(t, Config{})
	a, p := dialRaw(t, s), dialRaw(t, s)
	if r := p.do("CONFIG", "SET", "busy-reply-threshold", "10"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	set := time.Now()
	if r := p.do("SET", "e", "v", "PX", "20"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	a.send(encodeCommand("EVAL", "while true do end", "0"))
	waitBusyReply(t, []*rawConn{p}, busyEvalText)
	eventually(t, "e's deadline", func() bool { return time.Since(set) > 100*time.Millisecond })
	// As a read that met e just before the script took the store.
	met := make(chan struct{})
	go func() {
		s.expireMet([][]byte{[]byte("e")})
		close(met)
	}()
	eventually(t, "the deletion handed to the cron loop", func() bool {
		select {
		case <-met:
			return true
		default:
			return false
		}
	})
	if r := p.do("SCRIPT", "KILL"); r != "+OK\r\n" {
		t.Fatalf("SCRIPT KILL = %q", r)
	}
	a.reply()
	eventually(t, "e deleted", func() bool { return s.stats.expiredKeys.Load() == 1 })
}

// TestBusyBeforeOOM: past maxmemory, while a script is busy, a denyoom
// command is refused BUSY, not OOM: Redis skips the maxmemory step while
// a script is busy. After the script it is OOM again.
func TestBusyBeforeOOM(t *testing.T) {
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: m.goroutines})
			a, p := dialRaw(t, s), dialRaw(t, s)
			for _, kv := range [][2]string{{"busy-reply-threshold", "10"}, {"maxmemory", "1"}} {
				if r := p.do("CONFIG", "SET", kv[0], kv[1]); r != "+OK\r\n" {
					t.Fatalf("CONFIG SET %s: %q", kv[0], r)
				}
			}
			if r := p.do("SET", "k", "v"); r != "-"+errOOM+"\r\n" {
				t.Fatalf("SET past maxmemory = %q", r)
			}
			a.send(encodeCommand("EVAL", "while true do end", "0"))
			waitBusyReply(t, []*rawConn{p}, busyEvalText)
			if r := p.do("SET", "k", "v"); r != busyEvalText {
				t.Errorf("SET past maxmemory during the script = %q", r)
			}
			if r := p.do("SCRIPT", "KILL"); r != "+OK\r\n" {
				t.Fatalf("SCRIPT KILL = %q", r)
			}
			a.reply()
			if r := p.do("SET", "k", "v"); r != "-"+errOOM+"\r\n" {
				t.Fatalf("SET past maxmemory after the script = %q", r)
			}
		})
	}
}
