package test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The operator's commands against redis-server, in RESP2 and RESP3, where
// their output is deterministic once times, durations and ports are
// masked: SLOWLOG, CLIENT KILL / REPLY / PAUSE / NO-EVICT, MONITOR's
// lines, INFO commandstats' fields, LATENCY's replies, CLIENT LIST's
// fields.

var (
	// A slow log entry's id, unix time and duration. The ids are masked
	// too: a command slower than the default threshold elsewhere in the
	// run (a script's first compilation) takes an id on one side only.
	slowTimes = regexp.MustCompile(`\*6\r\n:\d+\r\n:\d+\r\n:\d+\r\n`)
	// A client address, with its bulk length (ports differ in digits).
	clientAddr = regexp.MustCompile(`(\$\d+\r\n)?127\.0\.0\.1:\d+`)
	// MONITOR's timestamp.
	monitorTime = regexp.MustCompile(`^\+\d+\.\d{6} `)
)

func maskOps(s string) string {
	s = slowTimes.ReplaceAllString(s, "*6\r\n:ID\r\n:T\r\n:D\r\n")
	s = clientAddr.ReplaceAllString(s, "ADDR")
	return monitorTime.ReplaceAllString(s, "+T ")
}

// opsPair is one connection to each server.
type opsPair struct {
	t        *testing.T
	ref, kvs *rawConn
}

func newOpsPair(t *testing.T, ref, kvs *Node, proto int) *opsPair {
	p := &opsPair{t: t, ref: dialRaw(t, ref.Addr), kvs: dialRaw(t, kvs.Addr)}
	if proto == 3 {
		p.ref.Do("HELLO", "3")
		p.kvs.Do("HELLO", "3")
	}
	return p
}

// same sends args to both and requires the same masked reply.
func (p *opsPair) same(args ...string) string {
	p.t.Helper()
	r, k := maskOps(string(p.ref.Do(args...).Raw)), maskOps(string(p.kvs.Do(args...).Raw))
	if r != k {
		p.t.Errorf("%s:\nredis %q\nkvs   %q", showCommand(args), r, k)
	}
	return k
}

// both runs f on each side's connection.
func (p *opsPair) both(f func(side string, c *rawConn)) {
	f("redis", p.ref)
	f("kvs", p.kvs)
}

func TestDifferentialOps(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("resp", proto), func(t *testing.T) {
			t.Run("slowlog", func(t *testing.T) { diffSlowlog(t, newOpsPair(t, ref, kvs, proto)) })
			t.Run("client-kill", func(t *testing.T) { diffClientKill(t, ref, kvs, proto) })
			t.Run("client-reply", func(t *testing.T) { diffClientReply(t, ref, kvs, proto) })
			t.Run("client-pause", func(t *testing.T) { diffClientPause(t, ref, kvs, proto) })
			t.Run("monitor", func(t *testing.T) { diffMonitor(t, ref, kvs, proto) })
			t.Run("stats", func(t *testing.T) { diffOpsStats(t, newOpsPair(t, ref, kvs, proto)) })
		})
	}
}

func diffSlowlog(t *testing.T, p *opsPair) {
	p.same("CONFIG", "SET", "slowlog-log-slower-than", "0")
	p.same("CLIENT", "SETNAME", "ops")
	p.same("SLOWLOG", "RESET")
	p.same("SET", "k", "v")
	p.same("GET", "k")
	p.same("AUTH", "user", "secret")
	// Redis redacts the values of its sensitive parameters.
	p.same("CONFIG", "SET", "masteruser", "repl", "timeout", "0", "MASTERAUTH", "secret")
	p.same("SLOWLOG", "GET", "1")
	p.same("CONFIG", "SET", "masteruser", "", "masterauth", "")
	long := strings.Repeat("x", 200)
	args := []string{"DEL", long}
	for i := 0; i < 40; i++ {
		args = append(args, fmt.Sprint("key", i))
	}
	p.same(args...)
	p.same("SLOWLOG", "GET", "4")
	p.same("SLOWLOG", "GET", "-1")
	p.same("SLOWLOG", "LEN")
	for _, bad := range [][]string{
		{"SLOWLOG", "GET", "x"}, {"SLOWLOG", "GET", "-2"}, {"SLOWLOG", "GET", "1", "2"},
		{"SLOWLOG", "LEN", "1"}, {"SLOWLOG", "RESET", "1"}, {"SLOWLOG", "FOO"}, {"SLOWLOG"},
	} {
		p.same(bad...)
	}
	// Commands Redis rewrites for replication are logged as sent.
	for _, cmds := range [][][]string{
		{{"SADD", "slowset", "a", "b", "c", "d", "e"}, {"SLOWLOG", "RESET"}, {"SPOP", "slowset", "10"}},
		{{"SET", "A", "5"}, {"SLOWLOG", "RESET"}, {"GETSET", "a", "5"}},
		{{"SET", "A", "0"}, {"SLOWLOG", "RESET"}, {"INCRBYFLOAT", "A", "1.0"}},
		{{"SLOWLOG", "RESET"}, {"SET", "ex", "v", "EX", "100"}, {"EXPIRE", "ex", "100"}, {"GETEX", "ex", "PX", "100000"}},
	} {
		for _, cmd := range cmds {
			// SPOP's members come in each server's own order.
			p.both(func(_ string, c *rawConn) { c.Do(cmd...) })
		}
		p.same("SLOWLOG", "GET", "2")
	}
	// A blocked BLPOP served by a transaction is logged as sent, once it
	// is served.
	p.both(func(side string, c *rawConn) {
		w := dialRaw(t, c.c.RemoteAddr().String())
		c.Do("DEL", "slowlist")
		w.Write(string(encodeCommand("BLPOP", "slowlist", "0")))
		waitFor(t, side+": BLPOP blocks", func() error {
			if info := c.Do("INFO", "clients").Str; !strings.Contains(info, "blocked_clients:1\r\n") {
				return fmt.Errorf("INFO clients: %s", info)
			}
			return nil
		})
		c.Do("MULTI")
		c.Do("LPUSH", "slowlist", "foo")
		c.Do("SLOWLOG", "RESET")
		c.Do("EXEC")
		w.Read()
	})
	p.same("SLOWLOG", "GET", "1")
	p.same("CONFIG", "SET", "slowlog-max-len", "3")
	p.same("PING")
	p.same("SLOWLOG", "LEN")
	p.same("CONFIG", "SET", "slowlog-log-slower-than", "-1")
	p.same("SLOWLOG", "RESET")
	p.same("SET", "k", "v")
	p.same("SLOWLOG", "LEN")
	p.same("SLOWLOG", "GET")
	// One name each: a pattern's matches come in Redis's dict order.
	p.same("CONFIG", "GET", "slowlog-log-slower-than")
	p.same("CONFIG", "GET", "slowlog-max-len")
	p.same("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128")
}

func diffClientKill(t *testing.T, ref, kvs *Node, proto int) {
	p := newOpsPair(t, ref, kvs, proto)
	for _, args := range [][]string{
		{"CLIENT", "KILL", "127.0.0.1:1"}, {"CLIENT", "KILL", "ID", "999999"},
		{"CLIENT", "KILL", "ID", "x"}, {"CLIENT", "KILL", "ID", "0"}, {"CLIENT", "KILL", "ID"},
		{"CLIENT", "KILL", "TYPE", "foo"}, {"CLIENT", "KILL", "SKIPME", "maybe"},
		{"CLIENT", "KILL", "USER", "nobody"}, {"CLIENT", "KILL", "FOO", "bar"},
		{"CLIENT", "KILL", "ADDR", "127.0.0.1:1"}, {"CLIENT", "KILL"},
		{"CLIENT", "KILL", "TYPE", "master"}, {"CLIENT", "KILL", "TYPE", "replica"},
		{"CLIENT", "KILL", "TYPE", "pubsub"},
		{"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "NO-EVICT", "maybe"}, {"CLIENT", "NO-EVICT", "off"},
		{"CLIENT", "NO-EVICT"},
	} {
		p.same(args...)
	}
	// Each form kills a second connection, which sees its socket closed.
	kill := func(form string) {
		p.both(func(side string, c *rawConn) {
			addr := ref.Addr
			if side == "kvs" {
				addr = kvs.Addr
			}
			victim := dialRaw(t, addr)
			id := victim.Do("CLIENT", "ID").Str
			va := victim.c.LocalAddr().String()
			var args []string
			var want string
			switch form {
			case "old":
				args, want = []string{"CLIENT", "KILL", va}, "+OK\r\n"
			case "id":
				args, want = []string{"CLIENT", "KILL", "ID", id}, ":1\r\n"
			case "addr":
				args, want = []string{"CLIENT", "KILL", "ADDR", va, "SKIPME", "yes"}, ":1\r\n"
			case "laddr-user":
				args, want = []string{"CLIENT", "KILL", "LADDR", addr, "USER", "default", "ID", id}, ":1\r\n"
			}
			if got := string(c.Do(args...).Raw); got != want {
				t.Errorf("%s %s: %q, want %q", side, showCommand(args), got, want)
			}
			victim.expectClosed()
		})
	}
	for _, form := range []string{"old", "id", "addr", "laddr-user"} {
		kill(form)
	}
	// A subscriber is of type pubsub, for CLIENT LIST and CLIENT KILL.
	p.both(func(side string, c *rawConn) {
		addr := ref.Addr
		if side == "kvs" {
			addr = kvs.Addr
		}
		sub := dialRaw(t, addr)
		sub.Do("SUBSCRIBE", "ops-channel")
		list := c.Do("CLIENT", "LIST", "TYPE", "pubsub").Str
		if n := strings.Count(list, "\n"); n != 1 || !strings.Contains(list, " sub=1 ") || !strings.Contains(list, " flags=P ") {
			t.Errorf("%s: CLIENT LIST TYPE pubsub: %q", side, list)
		}
		if got := string(c.Do("CLIENT", "KILL", "TYPE", "pubsub").Raw); got != ":1\r\n" {
			t.Errorf("%s: CLIENT KILL TYPE pubsub: %q", side, got)
		}
		sub.expectClosed()
	})
	// SKIPME no with the caller's own address: it is answered, then closed.
	p.both(func(side string, c *rawConn) {
		self := c.c.LocalAddr().String()
		if got := string(c.Do("CLIENT", "KILL", "ADDR", self, "SKIPME", "no").Raw); got != ":1\r\n" {
			t.Errorf("%s: CLIENT KILL of itself: %q", side, got)
		}
		c.expectClosed()
	})
}

func diffClientReply(t *testing.T, ref, kvs *Node, proto int) {
	p := newOpsPair(t, ref, kvs, proto)
	p.same("CLIENT", "REPLY", "FOO")
	p.same("CLIENT", "REPLY")
	// Only the replies not suppressed arrive, so the whole exchange is
	// read back as the replies of its last, unsuppressed, commands.
	script := encodeCommand("CLIENT", "REPLY", "SKIP")
	for _, args := range [][]string{
		{"SET", "r", "1"}, {"GET", "r"}, {"CLIENT", "REPLY", "OFF"}, {"SET", "r", "2"},
		{"GET", "r"}, {"CLIENT", "REPLY", "SKIP"}, {"GET", "nope"}, {"CLIENT", "REPLY", "ON"},
		{"GET", "r"}, {"CLIENT", "REPLY", "SKIP"}, {"INCR", "r"}, {"GET", "r"},
	} {
		script = append(script, encodeCommand(args...)...)
	}
	var got [2]string
	for i, c := range []*rawConn{p.ref, p.kvs} {
		c.Write(string(script))
		for j := 0; j < 4; j++ {
			got[i] += string(c.Read().Raw)
		}
	}
	if got[0] != got[1] {
		t.Errorf("CLIENT REPLY session:\nredis %q\nkvs   %q", got[0], got[1])
	}
}

// diffClientPause: CLIENT PAUSE WRITE holds a SET but not a GET, and UNPAUSE
// releases the SET; errors are Redis's.
func diffClientPause(t *testing.T, ref, kvs *Node, proto int) {
	p := newOpsPair(t, ref, kvs, proto)
	for _, args := range [][]string{
		{"CLIENT", "PAUSE", "x"}, {"CLIENT", "PAUSE", "-1"}, {"CLIENT", "PAUSE", "10", "foo"},
		{"CLIENT", "PAUSE", "x", "foo"}, {"CLIENT", "PAUSE"}, {"CLIENT", "UNPAUSE", "x"},
		{"CLIENT", "UNPAUSE"},
	} {
		p.same(args...)
	}
	p.both(func(side string, c *rawConn) {
		addr := ref.Addr
		if side == "kvs" {
			addr = kvs.Addr
		}
		c.Do("DEL", "paused")
		w := dialRaw(t, addr)
		if got := string(c.Do("CLIENT", "PAUSE", "60000", "WRITE").Raw); got != "+OK\r\n" {
			t.Fatalf("%s: CLIENT PAUSE: %q", side, got)
		}
		w.Write(string(encodeCommand("SET", "paused", "1")))
		waitFor(t, side+": the SET is received", func() error {
			if l := string(c.Do("CLIENT", "LIST").Raw); !strings.Contains(l, "cmd=set") {
				return fmt.Errorf("CLIENT LIST: %s", l)
			}
			return nil
		})
		if got := string(c.Do("GET", "paused").Raw); got != nullReply(proto) {
			t.Errorf("%s: GET during the pause: %q", side, got)
		}
		if got := string(c.Do("CLIENT", "UNPAUSE").Raw); got != "+OK\r\n" {
			t.Errorf("%s: CLIENT UNPAUSE: %q", side, got)
		}
		if got := string(w.Read().Raw); got != "+OK\r\n" {
			t.Errorf("%s: held SET: %q", side, got)
		}
		if got := string(c.Do("GET", "paused").Raw); got != "$1\r\n1\r\n" {
			t.Errorf("%s: GET after the pause: %q", side, got)
		}
	})
}

func nullReply(proto int) string {
	if proto == 3 {
		return "_\r\n"
	}
	return "$-1\r\n"
}

func diffMonitor(t *testing.T, ref, kvs *Node, proto int) {
	var lines [2][]string
	for i, n := range []*Node{ref, kvs} {
		m := dialRaw(t, n.Addr)
		if proto == 3 {
			m.Do("HELLO", "3")
		}
		if got := string(m.Do("MONITOR").Raw); got != "+OK\r\n" {
			t.Fatalf("MONITOR: %q", got)
		}
		c, other := dialRaw(t, n.Addr), dialRaw(t, n.Addr)
		for _, args := range [][]string{
			{"SET", "mk", "a \"b\"\n\x01"}, {"GET", "mk"}, {"AUTH", "u", "p"},
			{"HELLO", "2", "AUTH", "u", "p"}, {"CONFIG", "GET", "maxclients"},
			{"EVAL", "return redis.call('get', KEYS[1])", "1", "mk"}, {"NOSUCHCOMMAND"},
			{"CLIENT", "LIST"}, {"DEL", "mk"},
			// A transaction shows when it runs: its commands, then EXEC;
			// one aborted at EXEC, or whose watched key changed, only
			// EXEC.
			{"MULTI"}, {"SET", "mk", "1"}, {"GET", "mk"}, {"CLIENT", "LIST"}, {"PING"}, {"EXEC"},
			{"MULTI"}, {"NOSUCHCOMMAND"}, {"EXEC"},
			{"EXEC"},
			{"WATCH", "mk"}, {"OTHER", "SET", "mk", "2"}, {"MULTI"}, {"SET", "mk", "3"}, {"EXEC"},
			{"ECHO", "monitor-end"},
		} {
			if args[0] == "OTHER" {
				other.Do(args[1:]...)
				continue
			}
			c.Do(args...)
		}
		for {
			line := maskOps(string(m.Read().Raw))
			lines[i] = append(lines[i], line)
			if strings.Contains(line, "monitor-end") {
				break
			}
		}
	}
	if fmt.Sprint(lines[0]) != fmt.Sprint(lines[1]) {
		t.Errorf("MONITOR lines:\nredis %q\nkvs   %q", lines[0], lines[1])
	}
}

var cmdstatLine = regexp.MustCompile(`^cmdstat_([a-z|]+):calls=\d+,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=\d+,failed_calls=\d+$`)

var latencyLine = regexp.MustCompile(`(?m)^latency_percentiles_usec_set:p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}\r$`)

func diffOpsStats(t *testing.T, p *opsPair) {
	p.same("CONFIG", "RESETSTAT")
	p.same("SET", "s", "1")
	p.same("INCR", "nope", "x")
	p.same("LPUSH", "s", "x")
	p.both(func(side string, c *rawConn) {
		info := string(c.Do("INFO", "commandstats").Raw)
		found := false
		for _, l := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(l, "cmdstat_set:") {
				found = true
				if !cmdstatLine.MatchString(l) {
					t.Errorf("%s: %q", side, l)
				}
			}
		}
		if !found {
			t.Errorf("%s: no cmdstat_set in %q", side, info)
		}
		lat := string(c.Do("INFO", "latencystats").Raw)
		if !latencyLine.MatchString(lat) {
			t.Errorf("%s: INFO latencystats has no line for SET: %q", side, lat)
		}
		if e := string(c.Do("INFO", "errorstats").Raw); !strings.Contains(e, "errorstat_ERR:count=1\r\n") || !strings.Contains(e, "errorstat_WRONGTYPE:count=1\r\n") {
			t.Errorf("%s: INFO errorstats %q", side, e)
		}
	})
	// Subcommands count apart ("cmdstat_config|get"); an unknown one is
	// not counted, a container's wrong arity is rejected under its name.
	p.same("CONFIG", "RESETSTAT")
	p.same("CONFIG", "GET", "latency-monitor-threshold")
	p.same("CONFIG", "NOSUCH")
	p.same("CONFIG")
	p.same("CLIENT", "GETNAME")
	p.same("OBJECT", "HELP")
	counts := regexp.MustCompile(`,usec=\d+,usec_per_call=\d+\.\d\d`)
	var stats [2]string
	i := 0
	p.both(func(side string, c *rawConn) {
		var lines []string
		for _, l := range strings.Split(string(c.Do("INFO", "commandstats").Raw), "\r\n") {
			if strings.HasPrefix(l, "cmdstat_") && !strings.HasPrefix(l, "cmdstat_info:") {
				lines = append(lines, counts.ReplaceAllString(l, ""))
			}
		}
		slices.Sort(lines)
		stats[i] = strings.Join(lines, "\n")
		i++
	})
	if stats[0] != stats[1] {
		t.Errorf("INFO commandstats after subcommands:\nredis %s\nkvs   %s", stats[0], stats[1])
	}
	// SHUTDOWN's refusals (a real one is TestShutdownCommand's).
	p.same("SHUTDOWN", "ABORT")
	p.same("SHUTDOWN", "FOO")
	p.same("SHUTDOWN", "SAVE", "NOSAVE")
	p.same("SHUTDOWN", "ABORT", "NOW")
	p.same("SHUTDOWN", "NOW", "BOGUS")
	p.same("EVAL", "return redis.call('shutdown')", "0")
	p.same("MULTI")
	p.same("SHUTDOWN", "NOSAVE")
	p.same("SAVE")
	p.same("EXEC")
	p.same("LATENCY", "RESET")
	p.same("LATENCY", "LATEST")
	p.same("LATENCY", "HISTORY", "command")
	p.same("LATENCY", "RESET", "command", "fast-command")
	p.same("LATENCY", "LATEST", "x")
	p.same("LATENCY", "HISTORY")
	p.same("LATENCY", "FOO")
	p.same("CONFIG", "GET", "latency-monitor-threshold")
	// CLIENT LIST and CLIENT INFO carry every field Redis prints, in order.
	p.both(func(side string, c *rawConn) {
		for _, sub := range []string{"LIST", "INFO"} {
			c.Do("CLIENT", sub)
		}
	})
	fields := func(c *rawConn, sub string) []string {
		v := string(c.Do("CLIENT", sub).Raw)
		line := v[strings.Index(v, "id="):]
		line = strings.TrimRight(line[:strings.IndexAny(line, "\r\n")], " ")
		var names []string
		for _, f := range strings.Fields(line) {
			names = append(names, f[:strings.IndexByte(f, '=')])
		}
		return names
	}
	for _, sub := range []string{"LIST", "INFO"} {
		want, got := fields(p.ref, sub), fields(p.kvs, sub)
		if len(got) < len(want) || fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) {
			t.Errorf("CLIENT %s fields:\nredis %v\nkvs   %v", sub, want, got)
		}
	}
}
