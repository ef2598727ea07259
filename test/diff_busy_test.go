package test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDifferentialBusy runs the same sessions with a script that runs
// past busy-reply-threshold against kvs (memory mode) and redis-server,
// in RESP2 and RESP3, and requires the same replies: NOTBUSY, BUSY for
// each kind of script, what the allow_busy commands answer meanwhile,
// SCRIPT KILL and FUNCTION KILL and their refusals, FUNCTION STATS (its
// duration aside), the killed script's error, transactions queued around
// the script and an EXEC during it, UNKILLABLE for a script that wrote, SHUTDOWN's refusal and SHUTDOWN NOSAVE. Each step waits
// until the server answers BUSY, never for a time.
func TestDifferentialBusy(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	for _, proto := range []int{2, 3} {
		t.Run("resp"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			ref := busySession(t, startRedis(t), proto)
			got := busySession(t, startKVS(t, KVSOptions{}), proto)
			for i := range max(len(ref), len(got)) {
				var r, g string
				if i < len(ref) {
					r = ref[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if r != g {
					t.Fatalf("step %d differs:\n%s\n  redis: %q\n  kvs:   %q", i, strings.Join(ref[:i], "\n"), r, g)
				}
			}
		})
	}
}

// durationMs is FUNCTION STATS's running time, which two servers cannot
// share.
var durationMs = regexp.MustCompile(`(\$11\r\nduration_ms\r\n):\d+\r\n`)

// busySession drives n through the busy session and returns what it
// answered, one line per command.
func busySession(t *testing.T, n *Node, proto int) []string {
	var out []string
	conn := func() *rawConn {
		c := dialRaw(t, n.Addr)
		if proto == 3 {
			if v := c.Do("HELLO", "3"); v.Kind != '%' {
				t.Fatalf("%s: HELLO 3: %s", n.Name, v)
			}
		}
		return c
	}
	p, a, q := conn(), conn(), conn()
	recOn := func(c *rawConn, name string, args ...string) {
		v := c.Do(args...)
		out = append(out, name+showCommand(args)+" -> "+durationMs.ReplaceAllString(string(v.Raw), "${1}:N\r\n"))
	}
	rec := func(args ...string) { recOn(p, "", args...) }
	// q's transactions meet the script: queued around it, EXEC during it.
	recq := func(args ...string) { recOn(q, "q: ", args...) }
	script := func(args ...string) {
		a.Write(string(encodeCommand(args...)))
	}
	busy := func() {
		waitFor(t, n.Name+" busy", func() error {
			if v := p.Do("PING"); !strings.HasPrefix(v.Str, "BUSY ") {
				return fmt.Errorf("PING = %s", v)
			}
			return nil
		})
	}
	answer := func() { out = append(out, "script -> "+string(a.Read().Raw)) }
	during := [][]string{
		{"PING"}, {"GET", "k"}, {"SET", "k", "w"}, {"EVAL", "return 1", "0"}, {"DBSIZE"}, {"CONFIG", "GET", "maxclients"},
		{"SHUTDOWN"}, {"SHUTDOWN", "SAVE"}, {"MULTI"}, {"DISCARD"}, {"WATCH", "k"}, {"UNWATCH"},
		{"AUTH", "x"}, {"AUTH", "u", "x"}, {"SCRIPT", "FLUSH"}, {"FUNCTION", "LIST"}, {"CLIENT", "ID"},
	}

	rec("SCRIPT", "KILL")
	rec("FUNCTION", "KILL")
	rec("SET", "k", "v")
	rec("CONFIG", "SET", "busy-reply-threshold", "10")

	// A script that does not write, killed through its pcalls.
	recq("MULTI")
	recq("INCR", "n")
	script("EVAL", "local f = function() while 1 do redis.call('ping') end end\nwhile 1 do pcall(f) end", "0")
	busy()
	for _, args := range during {
		rec(args...)
	}
	recq("INCR", "n")
	recq("EXEC")
	recq("MULTI")
	recq("INCR", "n")
	recq("SCRIPT", "KILL")
	rec("FUNCTION", "STATS")
	rec("FUNCTION", "KILL")
	rec("SCRIPT", "KILL")
	answer()
	rec("GET", "k")
	recq("EXEC")
	recq("GET", "n")

	// A function.
	rec("FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nredis.register_function('test', function(keys, args)\n local a = 1\n while true do a = a + 1 end\nend)")
	// In lower case: FUNCTION STATS shows the command as kvs rebuilds it
	// from the log entry (compatibility.md), as go-redis sends it.
	script("fcall", "test", "1", "k", "arg")
	busy()
	for _, args := range during {
		rec(args...)
	}
	rec("FUNCTION", "STATS")
	rec("SCRIPT", "KILL")
	rec("FUNCTION", "KILL")
	answer()
	rec("FUNCTION", "STATS")

	// A script that wrote: only SHUTDOWN NOSAVE stops it.
	script("EVAL", "redis.call('SET', KEYS[1], 'y')\nwhile true do end", "1", "k")
	busy()
	rec("SCRIPT", "KILL")
	rec("FUNCTION", "KILL")
	rec("SHUTDOWN")
	if v, err := p.do("SHUTDOWN", "NOSAVE"); err == nil {
		out = append(out, "SHUTDOWN NOSAVE -> "+string(v.Raw))
	} else {
		out = append(out, "SHUTDOWN NOSAVE -> closed")
	}
	if _, err := a.read(); err == nil {
		out = append(out, "script -> answered")
	} else {
		out = append(out, "script -> closed")
	}
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("%s still running after SHUTDOWN NOSAVE", n.Name)
	}
	return slices.Clip(out)
}
