package server

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSlowlogArgsCapped(t *testing.T) {
	var args [][]byte
	for i := 0; i < 40; i++ {
		args = append(args, []byte(fmt.Sprint(i)))
	}
	args[1] = []byte(strings.Repeat("x", 130))
	got := slowlogArgs(args)
	if len(got) != 32 {
		t.Fatalf("%d args kept, want 32", len(got))
	}
	if want := strings.Repeat("x", 128) + "... (2 more bytes)"; string(got[1]) != want {
		t.Errorf("long arg kept as %q", got[1])
	}
	if string(got[31]) != "... (9 more arguments)" {
		t.Errorf("last arg %q", got[31])
	}
	if string(got[30]) != "30" {
		t.Errorf("arg 30 is %q", got[30])
	}
	args[0][0] = 'Z'
	if string(got[0]) != "0" {
		t.Error("entry shares the request's memory")
	}
}

func TestRedactedArgs(t *testing.T) {
	for _, tc := range []struct {
		args string
		want string // one letter per argument: r redacted, - kept
	}{
		{"AUTH pw", "-r"},
		{"auth user pw", "-rr"},
		{"HELLO 3 AUTH u p SETNAME n", "---rr--"},
		{"hello 3 setname auth auth u p", "-----rr"},
		{"hello 3 setname n", "----"},
		{"SET auth x", "---"},
		{"MIGRATE h 6379 k 0 100 COPY AUTH pw", "--------r"},
		{"MIGRATE h 6379 k 0 100 AUTH2 u pw REPLACE", "-------rr-"},
		{"MIGRATE h 6379 k 0 100 KEYS auth pw", "---------"},
		{"migrate h 6379 k 0 100 auth", "-------"},
	} {
		var args [][]byte
		for _, a := range strings.Fields(tc.args) {
			args = append(args, []byte(a))
		}
		red := redactedArgs(args)
		var got strings.Builder
		for j := range args {
			if red(j) {
				got.WriteByte('r')
			} else {
				got.WriteByte('-')
			}
		}
		if got.String() != tc.want {
			t.Errorf("%q: redacted %s, want %s", tc.args, got.String(), tc.want)
		}
	}
}

func TestMonitorLine(t *testing.T) {
	now := time.Unix(1690000000, 123456789)
	got := string(monitorLine(now, 0, "127.0.0.1:5555", [][]byte{[]byte("SET"), []byte("k"), []byte("a\"b\\\r\n\t\x01é")}))
	want := `+1690000000.123456 [0 127.0.0.1:5555] "SET" "k" "a\"b\\\r\n\t\x01\xc3\xa9"` + "\r\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = string(monitorLine(time.Unix(5, 1000), 12, "lua", [][]byte{[]byte("auth"), []byte("pw")}))
	if want := "+5.000001 [12 lua] \"auth\" \"(redacted)\"\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLatencyMonitorSamples(t *testing.T) {
	var m latencyMonitor
	m.add("command", 100, 5)
	m.add("command", 100, 7) // same second: the larger stays
	m.add("command", 100, 6)
	m.add("command", 101, 3)
	ts := m.events["command"]
	if ts.max != 7 {
		t.Errorf("max %d, want 7", ts.max)
	}
	if s := ts.samples[0]; s != (latencySample{100, 7}) {
		t.Errorf("first sample %+v", s)
	}
	if s := ts.samples[1]; s != (latencySample{101, 3}) {
		t.Errorf("second sample %+v", s)
	}
	for i := int64(0); i < latencyHistoryLen+5; i++ {
		m.add("command", 200+i, i)
	}
	if ts.samples[(ts.idx+latencyHistoryLen-1)%latencyHistoryLen].unix != 200+latencyHistoryLen+4 {
		t.Error("the ring does not end with the newest sample")
	}
	m.add("fast-command", 1, 1)
	if n := m.reset([][]byte{[]byte("COMMAND"), []byte("nope")}); n != 1 {
		t.Errorf("reset %d events, want 1", n)
	}
	if n := m.reset(nil); n != 1 {
		t.Errorf("reset all: %d events, want 1", n)
	}
}

// TestSlowlogLogsSlowCommand forces every command into the slow log and
// checks what an entry holds, LEN and RESET, on both connection kinds.
func TestSlowlogLogsSlowCommand(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprint("goroutines=", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			rc := dialRaw(t, s)
			if r := rc.do("CONFIG", "SET", "slowlog-log-slower-than", "0"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			rc.do("CLIENT", "SETNAME", "me")
			rc.do("SLOWLOG", "RESET")
			rc.do("SET", "k", "v")
			rc.do("GET", "k")
			r := rc.do("SLOWLOG", "GET", "2")
			addr := rc.nc.LocalAddr().String()
			for _, want := range []string{
				"*2\r\n*6\r\n:4\r\n", // CONFIG SET 0, SETNAME 1, RESET 2, SET 3
				"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n$" + fmt.Sprint(len(addr)) + "\r\n" + addr + "\r\n$2\r\nme\r\n",
				"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
			} {
				if !strings.Contains(r, want) {
					t.Errorf("SLOWLOG GET 2 = %q, lacks %q", r, want)
				}
			}
			if r := rc.do("SLOWLOG", "LEN"); r != ":4\r\n" { // RESET, SET, GET, GET 2: LEN is logged after its reply
				t.Errorf("SLOWLOG LEN = %q", r)
			}
			rc.do("CONFIG", "SET", "slowlog-log-slower-than", "-1")
			rc.do("SLOWLOG", "RESET")
			rc.do("SET", "k", "v")
			if r := rc.do("SLOWLOG", "LEN"); r != ":0\r\n" {
				t.Errorf("with the slow log off, LEN = %q", r)
			}
			rc.do("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "2")
			for i := 0; i < 5; i++ {
				rc.do("PING")
			}
			if r := rc.do("SLOWLOG", "LEN"); r != ":2\r\n" {
				t.Errorf("with slowlog-max-len 2, LEN = %q", r)
			}
		})
	}
}

// TestClientPauseHoldsWrites checks that CLIENT PAUSE WRITE holds a SET
// (without refusing it) but not a GET, and UNPAUSE releases the SET.
func TestClientPauseHoldsWrites(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprint("goroutines=", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			admin, writer := dialRaw(t, s), dialRaw(t, s)
			if r := admin.do("CLIENT", "PAUSE", "100000", "WRITE"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			writer.send(encodeCommand("SET", "k", "v"))
			eventually(t, "the SET is received", func() bool {
				return strings.Contains(admin.do("CLIENT", "LIST"), "cmd=set")
			})
			if r := admin.do("GET", "k"); r != "$-1\r\n" {
				t.Fatalf("GET during the pause = %q: the SET ran", r)
			}
			admin.do("CLIENT", "UNPAUSE")
			if r := writer.reply(); r != "+OK\r\n" {
				t.Fatalf("held SET answered %q", r)
			}
			if r := admin.do("GET", "k"); r != "$1\r\nv\r\n" {
				t.Fatalf("GET after the pause = %q", r)
			}
		})
	}
}

// TestClientPauseWriteScripts: a pause of writes holds what may write or
// be propagated (a script without flags, one that may write, PUBLISH, a
// subcommand that writes, an EXEC of a transaction holding one, such a
// command sent inside MULTI) and counts it in INFO's blocked_clients and
// CLIENT LIST's flag b, as Redis does, and lets read-only scripts,
// functions and transactions run.
func TestClientPauseWriteScripts(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprint("goroutines=", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			admin := dialRaw(t, s)
			admin.do("SET", "x", "y")
			admin.do("FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function{function_name='ro', "+
				"callback=function() return 'hello' end, flags={'no-writes'}}\n"+
				"redis.register_function('rw', function() return 'rw' end)")
			sha := strings.Split(admin.do("SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 2"), "\r\n")[1]
			// A transaction holding a write queued before the pause.
			tx := dialRaw(t, s)
			tx.do("MULTI")
			tx.do("SET", "x", "w")
			if r := admin.do("CLIENT", "PAUSE", "100000", "WRITE"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			ro := dialRaw(t, s)
			for _, tc := range []struct{ args, want []string }{
				{[]string{"EVAL", "#!lua flags=no-writes\nreturn 'unique'", "0"}, []string{"$6\r\nunique\r\n"}},
				{[]string{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "x"}, []string{"$1\r\ny\r\n"}},
				{[]string{"EVALSHA", sha, "0"}, []string{":2\r\n"}},
				{[]string{"FCALL", "ro", "0"}, []string{"$5\r\nhello\r\n"}},
				{[]string{"MULTI"}, []string{"+OK\r\n"}},
				{[]string{"GET", "x"}, []string{"+QUEUED\r\n"}},
				{[]string{"EVAL", "#!lua flags=no-writes\nreturn 12", "0"}, []string{"+QUEUED\r\n"}},
				{[]string{"EXEC"}, []string{"*2\r\n$1\r\ny\r\n:12\r\n"}},
			} {
				if got := ro.do(tc.args...); got != tc.want[0] {
					t.Errorf("%q during a pause of writes: %q, want %q", tc.args, got, tc.want[0])
				}
			}
			var held []*rawConn
			for _, cmd := range [][]string{
				{"EVAL", "return 1", "0"}, {"EVAL", "#!lua\nreturn 1", "0"}, {"FCALL", "rw", "0"},
				{"PUBLISH", "ch", "m"}, {"SET", "x", "z"},
				// a subcommand that writes
				{"FUNCTION", "LOAD", "#!lua name=other\nredis.register_function('o', function() return 1 end)"},
			} {
				w := dialRaw(t, s)
				w.send(encodeCommand(cmd...))
				held = append(held, w)
			}
			tx.send(encodeCommand("EXEC"))
			held = append(held, tx)
			// A write sent inside MULTI is held before it is queued, as
			// Redis postpones it.
			queuing := dialRaw(t, s)
			queuing.do("MULTI")
			queuing.send(encodeCommand("SET", "x", "v"))
			held = append(held, queuing)
			eventually(t, "eight clients held", func() bool {
				return strings.Contains(admin.do("INFO", "clients"), "blocked_clients:8\r\n")
			})
			if n := len(regexp.MustCompile(` flags=x?b `).FindAllString(admin.do("CLIENT", "LIST"), -1)); n != 8 {
				t.Errorf("%d clients with flag b in CLIENT LIST, want 8", n)
			}
			if r := admin.do("GET", "x"); r != "$1\r\ny\r\n" {
				t.Fatalf("GET during the pause = %q", r)
			}
			admin.do("CLIENT", "UNPAUSE")
			for i, w := range held {
				if r := w.reply(); strings.HasPrefix(r, "-") {
					t.Errorf("held command %d answered %q", i, r)
				}
			}
			if r := admin.do("INFO", "clients"); !strings.Contains(r, "blocked_clients:0\r\n") {
				t.Errorf("after the pause: %q", r)
			}
		})
	}
}

func TestClientKillByID(t *testing.T) {
	s := startServer(t, Config{})
	a, b := dialRaw(t, s), dialRaw(t, s)
	id := strings.TrimSpace(strings.TrimPrefix(b.do("CLIENT", "ID"), ":"))
	if r := a.do("CLIENT", "KILL", "ID", id); r != ":1\r\n" {
		t.Fatalf("CLIENT KILL ID = %q", r)
	}
	if _, err := b.readEOF(); err != nil {
		t.Fatalf("killed client not closed: %v", err)
	}
	if r := a.do("CLIENT", "KILL", "ID", id); r != ":0\r\n" {
		t.Fatalf("second CLIENT KILL ID = %q", r)
	}
	if r := a.do("CLIENT", "KILL", "SKIPME", "no", "ID", strings.TrimPrefix(strings.TrimSpace(a.do("CLIENT", "ID")), ":")); r != ":1\r\n" {
		t.Fatalf("CLIENT KILL of itself = %q", r)
	}
	if _, err := a.readEOF(); err != nil {
		t.Fatalf("self-killed client not closed: %v", err)
	}
}

func TestFineBuckets(t *testing.T) {
	for i := 0; i < fineBuckets-1; i++ {
		up := time.Duration(fineUpper(i))
		if got := fineBucket(up); got != i {
			t.Fatalf("bucket of %v (upper end of %d) = %d", up, i, got)
		}
		if got := fineBucket(up + 1); got != i+1 {
			t.Fatalf("bucket of %v (past the end of %d) = %d", up+1, i, got)
		}
	}
	if fineBucket(0) != 0 || fineBucket(time.Hour) != fineBuckets-1 {
		t.Error("values out of range are not clamped")
	}
	counts := make([]int64, fineBuckets)
	counts[fineBucket(10*time.Microsecond)] = 99
	counts[fineBucket(time.Millisecond)] = 1
	if p := percentile(counts, 100, 50); p < 10 || p > 10.7 {
		t.Errorf("p50 = %v µs, want about 10", p)
	}
	if p := percentile(counts, 100, 99.9); p < 1000 || p > 1070 {
		t.Errorf("p99.9 = %v µs, want about 1000", p)
	}
}

// TestClientReply checks CLIENT REPLY OFF and SKIP in a pipeline that mixes
// writes (answered after their batch) with commands answered at once.
func TestClientReply(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprint("goroutines=", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			rc := dialRaw(t, s)
			var b []byte
			for _, cmd := range [][]string{
				{"CLIENT", "REPLY", "SKIP"}, {"SET", "k", "1"}, {"GET", "k"},
				{"CLIENT", "REPLY", "OFF"}, {"SET", "k", "2"}, {"GET", "k"}, {"PING"},
				{"CLIENT", "REPLY", "ON"}, {"INCR", "k"}, {"CLIENT", "REPLY", "SKIP"},
				{"GET", "k"}, {"ECHO", "last"},
			} {
				b = append(b, encodeCommand(cmd...)...)
			}
			rc.send(b)
			var got string
			for i := 0; i < 4; i++ {
				got += rc.reply()
			}
			if want := "$1\r\n1\r\n+OK\r\n:3\r\n$4\r\nlast\r\n"; got != want {
				t.Errorf("replies %q, want %q", got, want)
			}
		})
	}
}

func TestResetStatResetsLatencyStats(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("SET", "k", "v")
	if r := rc.do("INFO", "latencystats"); !strings.Contains(r, "latency_percentiles_usec_set:p50=") {
		t.Fatalf("INFO latencystats after a SET: %q", r)
	}
	rc.do("CONFIG", "RESETSTAT")
	if r := rc.do("INFO", "latencystats"); strings.Contains(r, "usec_set") {
		t.Errorf("INFO latencystats after CONFIG RESETSTAT: %q", r)
	}
	rc.do("CONFIG", "SET", "latency-tracking", "no")
	rc.do("SET", "k", "v")
	if r := rc.do("INFO", "latencystats"); strings.Contains(r, "usec_set") {
		t.Errorf("with latency-tracking no: %q", r)
	}
}

// TestClientListBuffers: CLIENT LIST's query buffer figures are Redis's
// (the asking command counts as buffered), a large request grows the
// buffer, and the cron gives the room back: past the recent peak while
// the client is busy, all of it once it is idle (on an event loop).
func TestClientListBuffers(t *testing.T) {
	field := func(line, name string) int {
		m := regexp.MustCompile(` ` + name + `=(\d+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s in %q", name, line)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprint("goroutines=", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			admin, w := dialRaw(t, s), dialRaw(t, s)
			self := admin.do("CLIENT", "INFO")
			if field(self, "qbuf") != 26 || field(self, "argv-mem") != 10 || field(self, "qbuf-free") < 16<<10-26 {
				t.Errorf("CLIENT INFO: %q", self)
			}
			w.do("CLIENT", "SETNAME", "w")
			line := func() string {
				for _, l := range strings.Split(admin.do("CLIENT", "LIST"), "\n") {
					if strings.Contains(l, " name=w ") {
						return l
					}
				}
				t.Fatal("no client w")
				return ""
			}
			w.do("SET", "x", strings.Repeat("A", 400000))
			l := line()
			grown := field(l, "qbuf") + field(l, "qbuf-free")
			if field(l, "qbuf") != 0 || grown < 400000 || field(l, "argv-mem") != 0 {
				t.Fatalf("after a 400 KB request: %q", l)
			}
			eventually(t, "the buffer shrinks while small requests come", func() bool {
				w.do("SET", "x", "small")
				l := line()
				n := field(l, "qbuf") + field(l, "qbuf-free")
				return n > 0 && n < grown
			})
			if s.eventLoops() == 0 {
				return // an idle goroutine's buffer holds its read
			}
			// A read after the cut grows the buffer back to 16 KB, which
			// idleness then gives back whole.
			w.do("SET", "x", "small")
			if l := line(); field(l, "qbuf-free") < 16<<10-100 {
				t.Fatalf("a read into a buffer cut to a small request's size: %q", l)
			}
			eventually(t, "an idle client's buffer is given back", func() bool {
				l := line()
				return field(l, "qbuf") == 0 && field(l, "qbuf-free") == 0
			})
			if r := w.do("PING"); r != "+PONG\r\n" {
				t.Fatalf("PING after the buffer was given back: %q", r)
			}
		})
	}
}

// TestLazyFreeInfo: UNLINK of a large value and FLUSHALL ASYNC count in
// INFO's lazyfreed_objects once the cron has had their memory collected
// (pending until then); DEL and small values count nothing; CONFIG
// RESETSTAT starts the count over.
func TestLazyFreeInfo(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	big := []string{"SADD", "big"}
	for i := range 200 {
		big = append(big, "m"+strconv.Itoa(i))
	}
	lazy := func() (pending, freed int) {
		info := rc.do("INFO", "memory")
		m := regexp.MustCompile(`lazyfree_pending_objects:(\d+)\r\nlazyfreed_objects:(\d+)\r\n`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("INFO memory: %q", info)
		}
		p, _ := strconv.Atoi(m[1])
		f, _ := strconv.Atoi(m[2])
		return p, f
	}
	rc.do(big...)
	rc.do("DEL", "big")
	rc.do(big...)
	rc.do("SET", "small", "v")
	rc.do("UNLINK", "big", "small")
	eventually(t, "UNLINK's large set freed", func() bool { p, f := lazy(); return p == 0 && f == 1 })
	rc.do("SET", "a", "1")
	rc.do("SET", "b", "1")
	rc.do("FLUSHALL", "ASYNC")
	eventually(t, "FLUSHALL ASYNC's keys freed", func() bool { p, f := lazy(); return p == 0 && f == 3 })
	rc.do("CONFIG", "RESETSTAT")
	if p, f := lazy(); p != 0 || f != 0 {
		t.Errorf("after CONFIG RESETSTAT: pending %d, freed %d", p, f)
	}
}
