package test

import (
	"bufio"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDifferentialUnauthenticated: with a password set, what a client
// gets before and around its login is byte for byte redis-server's: the
// unauthenticated request limits (10 arguments, 16 KiB bulks), Redis's own
// limits checked first, inline requests held only to their line limit,
// requests pipelined after AUTH or HELLO AUTH judged once the login ran,
// after a failed AUTH, after RESET, for another user's login, and the
// close of a client whose unread replies pass 16 KiB. RESP3 sessions log
// in with HELLO 3 AUTH, whose reply (versions and client ids differ) is
// left out of the comparison.
func TestDifferentialUnauthenticated(t *testing.T) {
	r := startRedis(t)
	n := startKVS(t, KVSOptions{})
	for _, node := range []*Node{r, n} {
		c := dialRaw(t, node.Addr)
		for _, cmd := range [][]string{
			{"ACL", "SETUSER", "alice", "on", ">apw", "+@all", "~*"},
			{"CONFIG", "SET", "requirepass", "pw"},
		} {
			if v := c.Do(cmd...); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("%s: %v: %s", node.Name, cmd, v)
			}
		}
	}
	big := string(encodeCommand("SET", "k", strings.Repeat("v", 20000)))
	args11 := string(encodeCommand("DEL", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"))
	cases := []struct {
		name  string
		proto int // 3: the session opens with HELLO 3 AUTH default pw
		req   string
	}{
		{"11 arguments", 2, args11},
		{"10 arguments", 2, string(encodeCommand("DEL", "a", "b", "c", "d", "e", "f", "g", "h", "i")) + "QUIT\r\n"},
		{"a count alone", 2, "*11\r\n"},
		{"a bulk over 16 KiB", 2, big},
		{"a bulk of 16 KiB", 2, string(encodeCommand("ECHO", strings.Repeat("e", 16384))) + "QUIT\r\n"},
		{"a 300 MB bulk header", 2, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$300000000\r\n"},
		{"a negative bulk", 2, "*1\r\n$-1\r\n"},
		{"a count past INT_MAX", 2, "*3000000000\r\n"},
		{"a bulk past proto-max-bulk-len", 2, "*1\r\n$600000000\r\n"},
		{"an inline of 12 arguments", 2, "DEL a b c d e f g h i j k\r\nQUIT\r\n"},
		{"an inline line past 64 KiB", 2, "SET k " + strings.Repeat("x", 70000)},
		{"AUTH then a large SET", 2, string(encodeCommand("AUTH", "pw")) + big + "QUIT\r\n"},
		{"a failed AUTH then a large SET", 2, string(encodeCommand("AUTH", "nope")) + big},
		{"AUTH alice then 11 arguments", 2, string(encodeCommand("AUTH", "alice", "apw")) + args11 + "QUIT\r\n"},
		{"HELLO 3 without AUTH then 11 arguments", 2, "HELLO 3\r\n" + args11},
		{"481 NOAUTH errors", 2, strings.Repeat("PING\r\n", 481) + "QUIT\r\n"},
		{"482 NOAUTH errors", 2, strings.Repeat("PING\r\n", 482)},
		{"RESP3: a large SET", 3, big + "QUIT\r\n"},
		{"RESP3: 11 arguments", 3, args11 + "QUIT\r\n"},
		{"RESP3: RESET, then a large SET", 3, "RESET\r\n"},
		{"RESP3: many replies", 3, strings.Repeat("PING\r\n", 1000) + "QUIT\r\n"},
	}
	for _, tc := range cases {
		var got [2]string
		for i, node := range []*Node{r, n} {
			got[i] = unauthSession(t, node.Addr, tc.proto, tc.req, tc.name == "RESP3: RESET, then a large SET")
		}
		if got[0] != got[1] {
			t.Errorf("%s:\n  redis: %.300q\n  kvs:   %.300q", tc.name, got[0], got[1])
		}
	}
}

// unauthSession sends req on a fresh connection (after HELLO 3 AUTH for
// proto 3, whose reply it reads and drops) and returns what the server
// sends until it closes the connection. thenBig sends a large SET once
// the replies to req have come (RESET must run before it is read).
func unauthSession(t *testing.T, addr string, proto int, req string, thenBig bool) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	br := bufio.NewReader(c)
	if proto == 3 {
		c.Write([]byte("HELLO 3 AUTH default pw\r\n"))
		if v, err := readValue(br); err != nil || v.Kind != '%' {
			t.Fatalf("%s: HELLO 3 AUTH: %q %v", addr, v.Raw, err)
		}
	}
	go c.Write([]byte(req)) // may block until the server closes
	var out strings.Builder
	if thenBig {
		v, err := readValue(br)
		if err != nil {
			t.Fatalf("%s: reply to %.40q: %v", addr, req, err)
		}
		out.Write(v.Raw)
		c.Write(encodeCommand("SET", "k", strings.Repeat("v", 20000)))
	}
	for {
		v, err := readValue(br)
		out.Write(v.Raw)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				out.WriteString("<open>")
			}
			return out.String()
		}
	}
}

// TestDifferentialInfoFields: INFO cpu and INFO replication (outside a
// cluster) have redis-server's fields in its order, and INFO memory's
// fields are among redis-server's, in its order.
func TestDifferentialInfoFields(t *testing.T) {
	r := startRedis(t)
	n := startKVS(t, KVSOptions{})
	fields := func(addr, section string) []string {
		var names []string
		for _, line := range strings.Split(string(dialRaw(t, addr).Do("INFO", section).Raw), "\r\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "$") {
				names = append(names, name)
			}
		}
		return names
	}
	for _, section := range []string{"cpu", "replication"} {
		if want, got := fields(r.Addr, section), fields(n.Addr, section); !slices.Equal(want, got) {
			t.Errorf("INFO %s: kvs has %v, redis-server %v", section, got, want)
		}
	}
	ref, got := fields(r.Addr, "memory"), fields(n.Addr, "memory")
	i := 0
	for _, name := range got {
		for i < len(ref) && ref[i] != name {
			i++
		}
		if i == len(ref) {
			t.Errorf("INFO memory: %s is not among redis-server's fields, or not in their order: %v", name, ref)
			break
		}
	}
}
