package server

import (
	"strings"
	"testing"
)

// TestDatabasesConnection checks what a connection's database reaches:
// SELECT queued in MULTI, a script's calls and its own SELECT, keyspace
// channels, blocking pops, CLIENT LIST, RESET.
func TestDatabasesConnection(t *testing.T) {
	s := startServer(t, Config{})
	steps := []struct{ cmd, want string }{
		{"SELECT 2", "+OK\r\n"},
		{"SET k two", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SELECT 3", "+QUEUED\r\n"},
		{"SET k three", "+QUEUED\r\n"},
		{"GET k", "+QUEUED\r\n"},
		{"EXEC", "*3\r\n+OK\r\n+OK\r\n$5\r\nthree\r\n"},
		{"GET k", "$5\r\nthree\r\n"}, // the connection is in database 3 now
		{"EVAL \"return redis.call('GET', 'k')\" 0", "$5\r\nthree\r\n"},
		{"EVAL \"redis.call('SELECT', 2) return redis.call('GET', 'k')\" 0", "$3\r\ntwo\r\n"},
		{"GET k", "$5\r\nthree\r\n"}, // a script's SELECT is its own
		{"EVAL \"redis.call('SELECT', 5) redis.call('SET', 'k', 'five') return redis.call('DBSIZE')\" 0", ":1\r\n"},
		{"EVAL_RO \"redis.call('SELECT', 5) return redis.call('GET', 'k')\" 0", "$4\r\nfive\r\n"},
		{"SELECT 0", "+OK\r\n"},
		{"EVAL \"redis.call('SELECT', 99) return 1\" 0", "-ERR DB index is out of range script: "},
		{"GET k", "$-1\r\n"},
		{"EVAL_RO \"local a = redis.call('GET', 'k') redis.call('SELECT', 5) return {a, redis.call('GET', 'k')}\" 0", "*2\r\n$-1\r\n$4\r\nfive\r\n"},
		{"EVAL_RO \"redis.call('SELECT', 5) local ok, v = pcall(redis.call, 'GET', 'k') return v\" 0", "$4\r\nfive\r\n"},
		{"SELECT 5", "+OK\r\n"},
		// XREAD's $ is the last ID of the stream in the connection's
		// database: it blocks, where database 0 has no such stream.
		{"XADD s 666-0 f v", "$5\r\n666-0\r\n"},
		{"XREAD BLOCK 50 STREAMS s $", "*-1\r\n"},
		{"RESET", "+RESET\r\n"},
		{"GET k", "$-1\r\n"}, // RESET went back to database 0
	}
	c2 := dialRaw(t, s)
	for _, st := range steps {
		args := splitQuoted(st.cmd)
		got := c2.do(args...)
		if !strings.HasPrefix(got, st.want) {
			t.Errorf("%s: %q, want %q", st.cmd, got, st.want)
		}
	}

	// A read-only function of database 0 reading another database.
	lib := "#!lua name=dbs\nredis.register_function{function_name='in5', callback=function(keys, args) redis.call('SELECT', 5) return redis.call('GET', 'k') end, flags={'no-writes'}}"
	if got := c2.do("FUNCTION", "LOAD", lib); got != "$3\r\ndbs\r\n" {
		t.Fatalf("FUNCTION LOAD: %q", got)
	}
	if got := c2.do("FCALL_RO", "in5", "0"); got != "$4\r\nfive\r\n" {
		t.Errorf("FCALL_RO in5 from database 0: %q", got)
	}

	// Keyspace channels and blocking pops name their database.
	c2.do("CONFIG", "SET", "notify-keyspace-events", "KEA")
	sub := dialRaw(t, s)
	if got := sub.do("PSUBSCRIBE", "__keyspace@4__:*"); !strings.Contains(got, "psubscribe") {
		t.Fatalf("PSUBSCRIBE: %q", got)
	}
	blocked := dialRaw(t, s)
	blocked.do("SELECT", "4")
	blocked.send(encodeCommand("BLPOP", "q", "0"))
	eventually(t, "the client to block", func() bool {
		return strings.Contains(c2.do("CLIENT", "LIST"), "cmd=blpop")
	})
	if got := c2.do("CLIENT", "LIST"); !strings.Contains(got, "db=4 ") {
		t.Errorf("CLIENT LIST lacks db=4: %q", got)
	}
	c2.do("RPUSH", "q", "in-zero") // database 0: wakes nobody
	c2.do("SELECT", "4")
	c2.do("RPUSH", "q", "in-four")
	if got := blocked.reply(); got != "*2\r\n$1\r\nq\r\n$7\r\nin-four\r\n" {
		t.Errorf("BLPOP in database 4: %q", got)
	}
	if got := sub.reply(); !strings.Contains(got, "__keyspace@4__:q") || !strings.Contains(got, "rpush") {
		t.Errorf("keyspace event: %q", got)
	}
	c2.do("SELECT", "0")
	if got := c2.do("LLEN", "q"); got != ":1\r\n" {
		t.Errorf("LLEN q in database 0: %q", got)
	}
}

// splitQuoted splits a command line at spaces outside double quotes.
func splitQuoted(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if cur.Len() > 0 || any {
				out = append(out, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 || any {
		out = append(out, cur.String())
	}
	return out
}

// TestDatabasesWatch checks WATCH in a database other than EXEC's, and
// keys watched in two databases.
func TestDatabasesWatch(t *testing.T) {
	s := startServer(t, Config{})
	c := dialRaw(t, s)
	other := dialRaw(t, s)
	for _, st := range []struct{ cmd, want string }{
		{"SELECT 5", "+OK\r\n"},
		{"WATCH w", "+OK\r\n"},
		{"SELECT 6", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET x 1", "+QUEUED\r\n"},
		{"EXEC", "*1\r\n+OK\r\n"}, // w unchanged in database 5
		{"SELECT 5", "+OK\r\n"},
		{"WATCH w", "+OK\r\n"},
		{"!SELECT 5", "+OK\r\n"},
		{"!SET w changed", "+OK\r\n"},
		{"SELECT 6", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET x 2", "+QUEUED\r\n"},
		{"EXEC", "*-1\r\n"}, // w changed in database 5
		{"WATCH a", "+OK\r\n"},
		{"SELECT 7", "+OK\r\n"},
		{"WATCH b", "+OK\r\n"}, // a second database: EXEC will not run
		{"MULTI", "+OK\r\n"},
		{"SET x 3", "+QUEUED\r\n"},
		{"EXEC", "*-1\r\n"},
		{"SELECT 6", "+OK\r\n"},
		{"GET x", "$1\r\n1\r\n"},
		// A transaction that does not run leaves the database as it was,
		// its queued SELECT included.
		{"WATCH w", "+OK\r\n"},
		{"!SELECT 6", "+OK\r\n"},
		{"!SET w changed", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SELECT 9", "+QUEUED\r\n"},
		{"EXEC", "*-1\r\n"},
		{"GET x", "$1\r\n1\r\n"}, // still database 6
		{"MULTI", "+OK\r\n"},
		{"SELECT 9", "+QUEUED\r\n"},
		{"EXEC", "*1\r\n+OK\r\n"},
		{"GET x", "$-1\r\n"}, // database 9
	} {
		conn, cmd := c, st.cmd
		if strings.HasPrefix(cmd, "!") {
			conn, cmd = other, cmd[1:]
		}
		if got := conn.do(strings.Fields(cmd)...); got != st.want {
			t.Errorf("%s: %q, want %q", st.cmd, got, st.want)
		}
	}
}
