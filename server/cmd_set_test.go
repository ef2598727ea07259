package server

import (
	"strings"
	"testing"
)

// TestSetReplies pins replies recorded from redis-server 7.0: the parse
// errors in Redis's order, and those Redis gives only once it found the
// key (SSCAN's options), in both protocols.
func TestSetReplies(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range []struct{ cmd, want string }{
		{"SADD s 1 2 3", ":3\r\n"},
		{"SSCAN nokey 0 COUNT 0", "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"SSCAN nokey abc", "-ERR invalid cursor\r\n"},
		{"SSCAN s 0 COUNT 0", "-ERR syntax error\r\n"},
		{"SSCAN s 0 COUNT abc", "-ERR value is not an integer or out of range\r\n"},
		{"SSCAN s 0 MATCH", "-ERR syntax error\r\n"},
		{"SSCAN s 0 TYPE set", "-ERR syntax error\r\n"},
		{"SET str x", "+OK\r\n"},
		{"SSCAN str 0 COUNT 0", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"SRANDMEMBER s -9223372036854775808", "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"},
		{"SRANDMEMBER nokey abc", "-ERR value is not an integer or out of range\r\n"},
		{"SRANDMEMBER s 1 2", "-ERR syntax error\r\n"},
		{"SRANDMEMBER nokey 3", "*0\r\n"},
		{"SPOP s -1", "-ERR value is out of range, must be positive\r\n"},
		{"SPOP nokey abc", "-ERR value is out of range, must be positive\r\n"},
		{"SPOP s 1 2", "-ERR syntax error\r\n"},
		{"SPOP nokey", "$-1\r\n"},
		{"SINTERCARD 0 a", "-ERR numkeys should be greater than 0\r\n"},
		{"SINTERCARD abc a", "-ERR numkeys should be greater than 0\r\n"},
		{"SINTERCARD 3 a", "-ERR Number of keys can't be greater than number of args\r\n"},
		{"SINTERCARD 1 a LIMIT -1", "-ERR LIMIT can't be negative\r\n"},
		{"SINTERCARD 1 str LIMIT abc", "-ERR LIMIT can't be negative\r\n"},
		{"SINTERCARD 1 a LIMIT", "-ERR syntax error\r\n"},
		{"SINTERCARD 2 s s LIMIT 2", ":2\r\n"},
		{"SINTERCARD 2 nokey str", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"SMEMBERS nokey", "*0\r\n"},
		{"INCRBYFLOAT s abc", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"INCRBYFLOAT str abc", "-ERR value is not a valid float\r\n"},
		{"SADD s", "-ERR wrong number of arguments for 'sadd' command\r\n"},
	} {
		if got := rc.do(strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.cmd, got, tc.want)
		}
	}
	rc.do("HELLO", "3")
	for _, tc := range []struct{ cmd, want string }{
		{"SMEMBERS nokey", "~0\r\n"},
		{"SPOP nokey 2", "~0\r\n"},
		{"SPOP nokey", "_\r\n"},
		{"SRANDMEMBER nokey 2", "*0\r\n"},
		{"SINTER s nokey", "~0\r\n"},
		{"SADD one 7", ":1\r\n"},
		{"SUNION one", "~1\r\n$1\r\n7\r\n"},
		{"SRANDMEMBER one 5", "*1\r\n$1\r\n7\r\n"},
		{"SPOP one 5", "~1\r\n$1\r\n7\r\n"},
	} {
		if got := rc.do(strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("RESP3 %s: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
