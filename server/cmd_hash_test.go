package server

import (
	"strings"
	"testing"
)

// TestHashCommandReplies checks argument parsing and the order of Redis's
// checks (arity, then the arguments, then the key), with replies taken
// from redis-server 7.0. Hashes of one field keep the order out of it.
func TestHashCommandReplies(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	const wrongType = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	for _, tc := range []struct {
		cmd, want string
	}{
		{"set s x", "+OK\r\n"},
		{"hset h", "-ERR wrong number of arguments for 'hset' command\r\n"},
		{"hset h a", "-ERR wrong number of arguments for 'hset' command\r\n"},
		{"hset h a 1 b", "-ERR wrong number of arguments for 'hset' command\r\n"},
		{"HMSET h a 1 b", "-ERR wrong number of arguments for 'hmset' command\r\n"},
		{"hset h a 1", ":1\r\n"},
		{"hmset h a 2", "+OK\r\n"},
		{"hset s a 1", wrongType},
		{"hget h a", "$1\r\n2\r\n"},
		{"hget h", "-ERR wrong number of arguments for 'hget' command\r\n"},
		{"hgetall h", "*2\r\n$1\r\na\r\n$1\r\n2\r\n"},
		{"hincrby h a abc", "-ERR value is not an integer or out of range\r\n"},
		{"hincrby s a abc", "-ERR value is not an integer or out of range\r\n"},
		{"hincrby s a 1", wrongType},
		{"hincrby h a 1", ":3\r\n"},
		{"hincrbyfloat h a abc", "-ERR value is not a valid float\r\n"},
		{"hincrbyfloat h a nan", "-ERR value is not a valid float\r\n"},
		{"hincrbyfloat s a inf", "-ERR value is NaN or Infinity\r\n"},
		{"hincrbyfloat nokey a -Infinity", "-ERR value is NaN or Infinity\r\n"},
		{"hincrbyfloat h b 1e400", "$401\r\n10000000000000000000"}, // a prefix: no CRLF at its end
		{"hrandfield s abc", "-ERR value is not an integer or out of range\r\n"},
		{"hrandfield s abc bogus", "-ERR value is not an integer or out of range\r\n"},
		{"hrandfield s 1 bogus", "-ERR syntax error\r\n"},
		{"hrandfield h 1 withvalues x", "-ERR syntax error\r\n"},
		{"hrandfield s 1", wrongType},
		{"hrandfield nokey 1", "*0\r\n"},
		{"hrandfield nokey", "$-1\r\n"},
		{"hrandfield h -9223372036854775808", "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"},
		{"hrandfield nokey -4611686018427387904 withvalues", "-ERR value is out of range\r\n"},
		{"hrandfield nokey 4611686018427387904 withvalues", "-ERR value is out of range\r\n"},
		{"hrandfield nokey -4611686018427387903 withvalues", "*0\r\n"},
		{"hrandfield h -4194305", "-ERR value is out of range\r\n"}, // kvs's bound (Redis sends them all)
		{"hscan h abc", "-ERR invalid cursor\r\n"},
		{"hscan nokey ''", "*2\r\n$1\r\n0\r\n*0\r\n"}, // strtoul leaves nothing unparsed
		{"incrbyfloat h abc", wrongType},              // the type before the increment
		{"hscan s abc", "-ERR invalid cursor\r\n"},
		{"hscan nokey 0 count abc", "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"hscan s 0 count abc", wrongType},
		{"hscan h 0 count abc", "-ERR value is not an integer or out of range\r\n"},
		{"hscan h 0 count 0", "-ERR syntax error\r\n"},
		{"hscan h 0 match", "-ERR syntax error\r\n"},
		{"hscan h 0 type hash", "-ERR syntax error\r\n"},
		{"hdel h b", ":1\r\n"},
		{"hset p a 3", ":1\r\n"},
		{"hscan p 18446744073709551615 match a", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n3\r\n"},
		{"hset p '' e", ":1\r\n"},
		{"hscan p 0 match ''", "*2\r\n$1\r\n0\r\n*2\r\n$0\r\n\r\n$1\r\ne\r\n"},
		{"hdel p ''", ":1\r\n"},
		{"hscan p -1", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n3\r\n"},
	} {
		args := strings.Fields(tc.cmd)
		for i, a := range args {
			if a == "''" {
				args[i] = ""
			}
		}
		got := rc.do(args...)
		if got != tc.want && (strings.HasSuffix(tc.want, "\r\n") || !strings.HasPrefix(got, tc.want)) {
			t.Errorf("%s: got %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func TestHashRESP3Shapes(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("HELLO", "3")
	for _, tc := range []struct {
		cmd, want string
	}{
		{"hset h a 1", ":1\r\n"},
		{"hgetall h", "%1\r\n$1\r\na\r\n$1\r\n1\r\n"},
		{"hgetall nokey", "%0\r\n"},
		{"hkeys h", "*1\r\n$1\r\na\r\n"},
		{"hrandfield h 1 withvalues", "*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"},
		{"hrandfield h -2 withvalues", "*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"},
		{"hrandfield h 0 withvalues", "*0\r\n"},
		{"hrandfield nokey", "_\r\n"},
		{"hmget h a b", "*2\r\n$1\r\n1\r\n_\r\n"},
		{"hscan h 0", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"},
	} {
		if got := rc.do(strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
