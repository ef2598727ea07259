package test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// adminReplies are exact for commands whose answers do not depend on the
// server's identity or clock.
var adminReplies = []respCase{
	c("$-1\r\n", "CLIENT", "GETNAME"),
	c("+OK\r\n", "CLIENT", "SETNAME", "conn-1"),
	c("$6\r\nconn-1\r\n", "CLIENT", "GETNAME"),
	c("*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n", "CONFIG", "GET", "maxmemory"),
	c("*0\r\n", "CONFIG", "GET", "no-such-parameter"),
	c("-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n", "CONFIG", "SET", "foo", "1"),
	c("$-1\r\n", "MEMORY", "USAGE", "nokey"),
	c("+OK\r\n", "MEMORY", "PURGE"),
	c("-ERR wrong number of arguments for 'memory|purge' command\r\n", "MEMORY", "PURGE", "x"),
	c("+OK\r\n", "SET", "a", "1", "EX", "1000"),
	c("+OK\r\n", "SET", "b", "2"),
}

// TestAdminCommands: exact replies where they are fixed, and the shape of
// those that vary (CLIENT ID, TIME, INFO, MEMORY USAGE, COMMAND COUNT).
func TestAdminCommands(t *testing.T) {
	onTargets(t, []target{targetRedis, targetMemory}, func(t *testing.T, n *Node) {
		rc := dialRaw(t, n.Addr)
		runScript(t, rc, adminReplies)
		if v := rc.Do("CLIENT", "ID"); v.Kind != ':' || atoi64(v.Str) <= 0 {
			t.Errorf("CLIENT ID = %s", v)
		}
		if v := rc.Do("TIME"); v.Kind != '*' || len(v.Elems) != 2 {
			t.Errorf("TIME = %s", v)
		} else if sec := atoi64(v.Elems[0].Str); sec < time.Now().Unix()-60 || sec > time.Now().Unix()+60 {
			t.Errorf("TIME = %s, more than a minute from this machine's clock", v)
		} else if us, err := strconv.Atoi(v.Elems[1].Str); err != nil || us < 0 || us > 999999 {
			t.Errorf("TIME microseconds = %q", v.Elems[1].Str)
		}
		if v := rc.Do("INFO", "keyspace"); v.Kind != '$' || !strings.Contains(v.Str, "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=") {
			t.Errorf("INFO keyspace = %s", v)
		}
		if v := rc.Do("INFO"); v.Kind != '$' || !strings.Contains(v.Str, "# Server\r\n") || !strings.Contains(v.Str, "redis_version:") {
			t.Errorf("INFO lacks the Server section or redis_version, which tools probe: %.200q", v.Str)
		}
		if v := rc.Do("MEMORY", "USAGE", "a"); v.Kind != ':' || atoi64(v.Str) <= 0 {
			t.Errorf("MEMORY USAGE a = %s", v)
		}
		if v := rc.Do("COMMAND", "COUNT"); v.Kind != ':' || atoi64(v.Str) <= 0 {
			t.Errorf("COMMAND COUNT = %s", v)
		}
		if v := rc.Do("QUIT"); string(v.Raw) != "+OK\r\n" {
			t.Errorf("QUIT = %s", v)
		}
		rc.expectClosed()
	})
}
