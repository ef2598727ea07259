package server

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"kvs/fsm"
)

// multiReplies is a transaction session and the exact bytes redis-server
// 7.0 answers, checked against it, one command at a time.
var multiReplies = []struct {
	args []string
	want string
}{
	{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
	{[]string{"DISCARD"}, "-ERR DISCARD without MULTI\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"BLMOVE", "a", "b", "LEFT", "RIGHT", "0"}, "+QUEUED\r\n"},
	{[]string{"BLPOP", "a", "0"}, "+QUEUED\r\n"},
	{[]string{"SET", "k", "v", "NX", "XX"}, "+QUEUED\r\n"},
	{[]string{"PING"}, "+QUEUED\r\n"},
	{[]string{"MULTI"}, "-ERR MULTI calls can not be nested\r\n"},
	{[]string{"WATCH", "x"}, "-ERR WATCH inside MULTI is not allowed\r\n"},
	{[]string{"SET", "k", "1"}, "+QUEUED\r\n"},
	{[]string{"INCR", "k"}, "+QUEUED\r\n"},
	{[]string{"GET", "k"}, "+QUEUED\r\n"},
	{[]string{"LPUSH", "k", "x"}, "+QUEUED\r\n"},
	{[]string{"UNWATCH"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*9\r\n$-1\r\n*-1\r\n-ERR syntax error\r\n+PONG\r\n+OK\r\n:2\r\n$1\r\n2\r\n" +
		"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n"},
	{[]string{"SET", "k", "2"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	{[]string{"GET", "k"}, "$1\r\n2\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"FOO"}, "-ERR unknown command 'FOO', with args beginning with: \r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"SET", "k", "3"}, "+QUEUED\r\n"},
	{[]string{"DISCARD"}, "+OK\r\n"},
	{[]string{"GET", "k"}, "$1\r\n2\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*0\r\n"},
	// WATCH: a change on this connection counts too.
	{[]string{"WATCH", "k"}, "+OK\r\n"},
	{[]string{"SET", "k", "4"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"GET", "k"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*-1\r\n"},
	// EXEC unwatched: the next one runs.
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"GET", "k"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*1\r\n$1\r\n4\r\n"},
	{[]string{"WATCH", "k", "nokey", "k"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*0\r\n"},
	// UNWATCH forgets; DISCARD unwatches.
	{[]string{"WATCH", "k"}, "+OK\r\n"},
	{[]string{"UNWATCH"}, "+OK\r\n"},
	{[]string{"SET", "k", "5"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*0\r\n"},
	{[]string{"WATCH", "k"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"DISCARD"}, "+OK\r\n"},
	{[]string{"SET", "k", "6"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*0\r\n"},
	// A queued UNWATCH runs after EXEC's check.
	{[]string{"WATCH", "k"}, "+OK\r\n"},
	{[]string{"SET", "k", "7"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"UNWATCH"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*-1\r\n"},
	// A missing key created counts; expiry counts.
	{[]string{"WATCH", "new"}, "+OK\r\n"},
	{[]string{"SET", "new", "1"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*-1\r\n"},
	{[]string{"SET", "e", "1", "PX", "1"}, "+OK\r\n"},
	{[]string{"HELLO", "3"}, ""}, // the reply differs; not compared
	{[]string{"WATCH", "new"}, "+OK\r\n"},
	{[]string{"DEL", "new"}, ":1\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"BLPOP", "a", "0"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "_\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"BLPOP", "a", "0"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*1\r\n_\r\n"},
	// RESET discards the transaction and unwatches (and returns to RESP2).
	{[]string{"SET", "r", "1"}, "+OK\r\n"},
	{[]string{"WATCH", "r"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"SET", "r", "2"}, "+QUEUED\r\n"},
	{[]string{"RESET"}, "+RESET\r\n"},
	{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
	{[]string{"GET", "r"}, "$1\r\n1\r\n"},
	{[]string{"WATCH", "r"}, "+OK\r\n"},
	{[]string{"RESET"}, "+RESET\r\n"},
	{[]string{"SET", "r", "3"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*0\r\n"},
}

func TestMultiExactReplies(t *testing.T) {
	for _, name := range []string{"one by one", "pipelined"} {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, startServer(t, Config{}))
			if name == "pipelined" {
				var cmds [][]string
				for _, tc := range multiReplies {
					cmds = append(cmds, tc.args)
				}
				got := script(t, rc, cmds)
				for i, tc := range multiReplies {
					if tc.want != "" && got[i] != tc.want {
						t.Errorf("%d %q = %q, want %q", i, tc.args, got[i], tc.want)
					}
				}
				return
			}
			for i, tc := range multiReplies {
				if got := rc.do(tc.args...); tc.want != "" && got != tc.want {
					t.Errorf("%d %q = %q, want %q", i, tc.args, got, tc.want)
				}
			}
		})
	}
}

// TestWatchOtherConnection: another connection's write aborts the EXEC;
// a write to another key does not.
func TestWatchOtherConnection(t *testing.T) {
	s := startServer(t, Config{})
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.do("SET", "k", "1")
	a.do("WATCH", "k")
	b.do("SET", "other", "1")
	if got := script(t, a, [][]string{{"MULTI"}, {"INCR", "k"}, {"EXEC"}}); got[2] != "*1\r\n:2\r\n" {
		t.Fatalf("EXEC after a write to another key = %q", got[2])
	}
	a.do("WATCH", "k")
	b.do("SET", "k", "1")
	if got := script(t, a, [][]string{{"MULTI"}, {"INCR", "k"}, {"EXEC"}}); got[2] != "*-1\r\n" {
		t.Fatalf("EXEC after another connection's SET = %q", got[2])
	}
	if got := a.do("GET", "k"); got != "$1\r\n1\r\n" {
		t.Fatalf("GET k = %q after an aborted EXEC", got)
	}
}

// TestMultiPipelinedTransactions: many transactions in one pipeline, as
// redis-benchmark sends them, each answered in its place.
func TestMultiPipelinedTransactions(t *testing.T) {
	rc := dialRaw(t, startServer(t, Config{}))
	var cmds [][]string
	for range 50 {
		cmds = append(cmds, []string{"MULTI"}, []string{"INCR", "n"}, []string{"INCR", "n"}, []string{"EXEC"}, []string{"GET", "n"})
	}
	got := script(t, rc, cmds)
	for i := range 50 {
		want := []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
			"*2\r\n:" + strconv.Itoa(2*i+1) + "\r\n:" + strconv.Itoa(2*i+2) + "\r\n", "$" + strconv.Itoa(len(strconv.Itoa(2*i+2))) + "\r\n" + strconv.Itoa(2*i+2) + "\r\n"}
		if strings.Join(got[5*i:5*i+5], "") != strings.Join(want, "") {
			t.Fatalf("transaction %d: %q, want %q", i, got[5*i:5*i+5], want)
		}
	}
}

// TestWatchThroughFollower: WATCH on a follower records the version the
// follower's store holds; EXEC forwarded to the leader runs when the key
// is unchanged and aborts when the leader's copy changed since, though the
// follower has not seen that change.
func TestWatchThroughFollower(t *testing.T) {
	p := startPair(t, false, false) // the follower's store sees only what the test applies
	l, f := dialRaw(t, p.leader), dialRaw(t, p.follower)
	// The same state on both, as replication would leave it.
	set := []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{[]byte("k"), []byte("1")}}}
	p.leaderStore.Apply(0, 0, set)
	p.followerStore.Apply(0, 0, set)
	f.do("WATCH", "k")
	if got := script(t, f, [][]string{{"MULTI"}, {"INCR", "k"}, {"EXEC"}}); got[2] != "*1\r\n:2\r\n" {
		t.Fatalf("EXEC through the follower, unchanged = %q", got[2])
	}
	f.do("WATCH", "k")
	l.do("SET", "k", "9")
	if got := script(t, f, [][]string{{"MULTI"}, {"INCR", "k"}, {"EXEC"}}); got[2] != "*-1\r\n" {
		t.Fatalf("EXEC through the follower after the leader's SET = %q", got[2])
	}
}

// TestMultiReusedMemory: a connection reuses its transactions' memory (the
// queued arguments, the OpExecs, EXEC's reply slots) from one to the next.
// Many transactions of distinct arguments in a pipeline, some WATCHing,
// one left open across two pipelines, each apply and answer with their
// own arguments, in memory mode and with a roundProposer (durable mode's
// shape, whose batches are answered after the pipeline has gone on).
func TestMultiReusedMemory(t *testing.T) {
	for _, mode := range []string{"memory", "rounds"} {
		t.Run(mode, func(t *testing.T) {
			var s *Server
			if mode == "memory" {
				s = startServer(t, Config{})
			} else {
				s, _ = startRounds(t, false)
			}
			rc := dialRaw(t, s)
			const n = 60
			val := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 1+i*37%700) }
			var req []byte
			var want []string
			split, splitWant := 0, 0 // the end of the first pipeline: inside transaction n/2
			for i := range n {
				k := "k" + strconv.Itoa(i)
				if i%4 == 1 {
					req = append(req, encodeCommand("WATCH", k, "w"+strconv.Itoa(i))...)
					want = append(want, "+OK\r\n")
				}
				req = append(req, encodeCommand("MULTI")...)
				req = append(req, encodeCommand("SET", k, val(i))...)
				if i == n/2 {
					split, splitWant = len(req), len(want)+2
				}
				req = append(req, encodeCommand("APPEND", k, "!"+strconv.Itoa(i))...)
				req = append(req, encodeCommand("PING", "p"+strconv.Itoa(i))...)
				req = append(req, encodeCommand("GET", k)...)
				req = append(req, encodeCommand("EXEC")...)
				v := val(i) + "!" + strconv.Itoa(i)
				want = append(want, "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
					"*4\r\n+OK\r\n:"+strconv.Itoa(len(v))+"\r\n$"+strconv.Itoa(len("p"+strconv.Itoa(i)))+"\r\np"+strconv.Itoa(i)+"\r\n$"+strconv.Itoa(len(v))+"\r\n"+v+"\r\n")
			}
			var got []string
			rc.send(req[:split])
			for range splitWant {
				got = append(got, rc.reply())
			}
			rc.send(req[split:])
			for range len(want) - splitWant {
				got = append(got, rc.reply())
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("reply %d = %q, want %q", i, got[i], want[i])
				}
			}
			for i := range n {
				k := "k" + strconv.Itoa(i)
				v := val(i) + "!" + strconv.Itoa(i)
				if got := rc.do("GET", k); got != "$"+strconv.Itoa(len(v))+"\r\n"+v+"\r\n" {
					t.Fatalf("GET %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestMultiReadonlyFollowerPipeline: on a READONLY connection to a
// follower, a write redirected with MOVED ahead of a transaction in the
// same pipeline leaves the transaction's replies (MULTI's OK, QUEUED) and
// its forwarded EXEC in their places.
func TestMultiReadonlyFollowerPipeline(t *testing.T) {
	p := startPair(t, false, true)
	rc := dialRaw(t, p.follower)
	if got := rc.do("READONLY"); got != "+OK\r\n" {
		t.Fatalf("READONLY: %q", got)
	}
	leader := p.leader.Addr().String()
	got := script(t, rc, [][]string{
		{"SET", "foo", "bar"},
		{"MULTI"},
		{"SET", "a", "1"},
		{"INCR", "n"},
		{"EXEC"},
		{"SET", "foo", "baz"},
	})
	want := []string{
		"-MOVED 12182 " + leader + "\r\n",
		"+OK\r\n",
		"+QUEUED\r\n",
		"+QUEUED\r\n",
		"*2\r\n+OK\r\n:1\r\n",
		"-MOVED 12182 " + leader + "\r\n",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// queueRefusals is a session of commands refused while a transaction is
// queued, and what follows them, with the exact bytes redis-server 7.0
// answers: each refusal flags the transaction (EXEC answers EXECABORT),
// whatever the command, and a refused EXEC discards the transaction,
// naming why. WATCH inside MULTI and MULTI nested answer their own errors
// and flag nothing.
var queueRefusals = []struct {
	args []string
	want string
}{
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC", "x"}, "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
	{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
	{[]string{"EXEC", "x"}, "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
	// Refused EXEC outside MULTI unwatches too.
	{[]string{"WATCH", "w"}, "+OK\r\n"},
	{[]string{"EXEC", "x"}, "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"},
	{[]string{"SET", "w", "1"}, "+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"EXEC"}, "*0\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"MULTI"}, "-ERR MULTI calls can not be nested\r\n"},
	{[]string{"WATCH", "w"}, "-ERR WATCH inside MULTI is not allowed\r\n"},
	{[]string{"SET", "w", "2"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*1\r\n+OK\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"MULTI", "x"}, "-ERR wrong number of arguments for 'multi' command\r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"WATCH"}, "-ERR wrong number of arguments for 'watch' command\r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"DISCARD", "x"}, "-ERR wrong number of arguments for 'discard' command\r\n"},
	{[]string{"SET", "w", "3"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	{[]string{"GET", "w"}, "$1\r\n2\r\n"},
	// Subcommands: unknown, and of the wrong arity, refused at once.
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"SCRIPT", "LOAD"}, "-ERR wrong number of arguments for 'script|load' command\r\n"},
	{[]string{"CONFIG", "GET"}, "-ERR wrong number of arguments for 'config|get' command\r\n"},
	{[]string{"CLIENT", "ID", "x"}, "-ERR wrong number of arguments for 'client|id' command\r\n"},
	{[]string{"OBJECT", "ENCODING"}, "-ERR wrong number of arguments for 'object|encoding' command\r\n"},
	{[]string{"OBJECT"}, "-ERR wrong number of arguments for 'object' command\r\n"},
	{[]string{"CONFIG", "NOSUCH"}, "-ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.\r\n"},
	{[]string{"PUBSUB", "NUMPAT", "x"}, "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n"},
	{[]string{"CONFIG", "GET", "maxmemory"}, "+QUEUED\r\n"},
	{[]string{"DISCARD"}, "+OK\r\n"},
	// Redis's no-multi commands.
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"SAVE"}, "-ERR Command not allowed inside a transaction\r\n"},
	{[]string{"SHUTDOWN"}, "-ERR Command not allowed inside a transaction\r\n"},
	{[]string{"PING"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	// SUBSCRIBE is queued, and runs at EXEC.
	{[]string{"MULTI"}, "+OK\r\n"},
	{[]string{"SUBSCRIBE", "ch"}, "+QUEUED\r\n"},
	{[]string{"EXEC"}, "*1\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"},
	// RESP2's subscribed mode refuses before the transaction queues.
	{[]string{"MULTI"}, "-ERR Can't execute 'multi': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
	{[]string{"CONFIG", "GET", "x"}, "-ERR Can't execute 'config|get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
	{[]string{"CONFIG", "NOSUCH"}, "-ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.\r\n"},
	{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of: Can't execute 'exec': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
	{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n"},
	{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
}

func TestMultiQueueRefusals(t *testing.T) {
	for _, name := range []string{"one by one", "pipelined"} {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, startServer(t, Config{}))
			var got []string
			if name == "pipelined" {
				var cmds [][]string
				for _, tc := range queueRefusals {
					cmds = append(cmds, tc.args)
				}
				got = script(t, rc, cmds)
			} else {
				for _, tc := range queueRefusals {
					got = append(got, rc.do(tc.args...))
				}
			}
			for i, tc := range queueRefusals {
				if got[i] != tc.want {
					t.Errorf("%d %q = %q, want %q", i, tc.args, got[i], tc.want)
				}
			}
		})
	}
}

// TestRefusalsAgree: a command refused before it runs gets the same
// refusal inside MULTI, where it flags the transaction, as outside it.
func TestRefusalsAgree(t *testing.T) {
	s := startServer(t, Config{})
	admin := dialRaw(t, s)
	if got := admin.do("ACL", "SETUSER", "u", "on", "nopass", "~k*", "&*", "+@all", "-config|set", "-flushall"); got != "+OK\r\n" {
		t.Fatalf("ACL SETUSER: %q", got)
	}
	refused := [][]string{
		{"NOSUCH", "a"}, {"GET"}, {"CONFIG"}, {"CONFIG", "NOSUCH"}, {"CONFIG", "GET"},
		{"CLIENT", "SETNAME"}, {"SCRIPT", "LOAD"}, {"FUNCTION", "NOSUCH"},
		{"GET", "other"}, {"CONFIG", "SET", "maxmemory", "0"}, {"FLUSHALL"},
	}
	a, b := dialRaw(t, s), dialRaw(t, s)
	for _, rc := range []*rawConn{a, b} {
		if got := rc.do("AUTH", "u", "x"); got != "+OK\r\n" {
			t.Fatalf("AUTH: %q", got)
		}
	}
	b.do("MULTI")
	for _, cmd := range refused {
		top, queued := a.do(cmd...), b.do(cmd...)
		if top != queued || !strings.HasPrefix(top, "-") {
			t.Errorf("%q: %q outside MULTI, %q inside", cmd, top, queued)
		}
	}
	if got := b.do("EXEC"); got != "-"+errExecAbort+"\r\n" {
		t.Errorf("EXEC after the refusals: %q", got)
	}
	if got := admin.do("ACL", "LOG", "1"); !strings.Contains(got, "\r\ncontext\r\n$5\r\nmulti\r\n") {
		t.Errorf("the last ACL LOG entry is not from MULTI: %q", got)
	}
}

// TestMultiLogWriteRefusal: while the log cannot be written, writes are
// refused with MISCONF, inside MULTI at once (flagging the transaction),
// and an EXEC holding a write queued before is refused whole; reads are
// queued and run. A script that declares flags is a write unless it
// declares no-writes, whatever command runs it, as in Redis.
func TestMultiLogWriteRefusal(t *testing.T) {
	var failure atomic.Pointer[error]
	s := startServer(t, Config{LogWriteErr: func() error {
		if p := failure.Load(); p != nil {
			return *p
		}
		return nil
	}})
	rc := dialRaw(t, s)
	rc.do("SET", "k", "1")
	misconf := "-MISCONF Errors writing to the AOF file: No space left on device\r\n"
	got := script(t, rc, [][]string{{"MULTI"}, {"SET", "k", "2"}, {"GET", "k"}})
	err := fmt.Errorf("wal: write failed: %w", syscall.ENOSPC)
	failure.Store(&err)
	got = append(got, script(t, rc, [][]string{
		{"EXEC"},
		{"SET", "k", "3"}, {"PING"},
		{"MULTI"}, {"GET", "k"}, {"EXEC"},
		{"MULTI"}, {"SET", "k", "4"}, {"GET", "k"}, {"EXEC"},
		// A script is judged by the flags it declares.
		{"EVAL", "#!lua\nreturn 1", "0"}, {"EVAL", "#!lua flags=no-writes\nreturn 2", "0"},
		{"MULTI"}, {"EVAL", "#!lua flags=no-writes\nreturn 3", "0"}, {"EVAL_RO", "#!lua\nreturn 4", "0"}, {"EXEC"},
	})...)
	want := []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
		"-EXECABORT Transaction discarded because of: MISCONF Errors writing to the AOF file: No space left on device\r\n",
		misconf, "+PONG\r\n",
		"+OK\r\n", "+QUEUED\r\n", "*1\r\n$1\r\n1\r\n",
		"+OK\r\n", misconf, "+QUEUED\r\n", "-" + errExecAbort + "\r\n",
		misconf, ":2\r\n",
		"+OK\r\n", "+QUEUED\r\n", misconf, "-" + errExecAbort + "\r\n",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// TestMultiSubscribe: SUBSCRIBE queued in MULTI answers inside EXEC's
// reply, after the replies before it in the pipeline, on an event loop
// and on a connection's own goroutine (whose output goes through a writer
// once it subscribed), and the messages published after come after
// EXEC's reply. A message a RESP3 connection publishes to itself inside
// MULTI comes inside EXEC's reply on a loop, as in Redis, and before it
// on a goroutine.
func TestMultiSubscribe(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("goroutines=%v", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			rc, pub := dialRaw(t, s), dialRaw(t, s)
			got := script(t, rc, [][]string{{"PING"}, {"MULTI"}, {"SUBSCRIBE", "ch"}, {"EXEC"}, {"PING"}})
			want := []string{"+PONG\r\n", "+OK\r\n", "+QUEUED\r\n",
				"*1\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", "*2\r\n$4\r\npong\r\n$0\r\n\r\n"}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("reply %d = %q, want %q", i, got[i], want[i])
				}
			}
			if got := pub.do("PUBLISH", "ch", "m"); got != ":1\r\n" {
				t.Fatalf("PUBLISH = %q", got)
			}
			if got := rc.reply(); got != "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n" {
				t.Fatalf("message = %q", got)
			}

			r3 := dialRaw(t, s)
			script(t, r3, [][]string{{"HELLO", "3"}, {"SUBSCRIBE", "ch"}})
			r3.send(append(append(encodeCommand("MULTI"), encodeCommand("PUBLISH", "ch", "self")...), encodeCommand("EXEC")...))
			var out string
			for range 4 {
				out += r3.reply()
			}
			msg := ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n"
			want3 := "+OK\r\n+QUEUED\r\n*1\r\n" + msg + ":2\r\n"
			if !usesLoops(s) {
				want3 = "+OK\r\n+QUEUED\r\n" + msg + "*1\r\n:2\r\n"
			}
			if out != want3 {
				t.Fatalf("MULTI PUBLISH to itself EXEC = %q, want %q", out, want3)
			}
		})
	}
}
