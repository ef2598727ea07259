package fsm

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// redisConn is a minimal RESP2 client for differential tests against a real
// redis-server, the reference for every reply kvs gives.
type redisConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

// startRedis starts a private redis-server on a unix socket, or skips the
// test when none is installed. It waits for the server's own "Ready" log
// line rather than polling.
func startRedis(t *testing.T) *redisConn {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed: differential test skipped")
	}
	sock := filepath.Join(t.TempDir(), "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(strings.ToLower(sc.Text()), "ready to accept connections") {
			break
		}
	}
	go io.Copy(io.Discard, out)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("redis-server did not come up: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &redisConn{t: t, c: c, rd: bufio.NewReader(c)}
}

func (r *redisConn) do(args ...string) Reply {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(r.c, b.String()); err != nil {
		r.t.Fatal(err)
	}
	rep, err := readReply(r.rd)
	if err != nil {
		r.t.Fatal(err)
	}
	return rep
}

func readReply(rd *bufio.Reader) (Reply, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return Reply{}, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	body := line[1:]
	switch line[0] {
	case '+':
		return Reply{Kind: ReplyStatus, Str: body}, nil
	case '-':
		return Reply{Kind: ReplyError, Str: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return IntReply(n), err
	case '$':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return replyNil, nil
		}
		buf := make([]byte, n+2)
		_, err := io.ReadFull(rd, buf)
		return BulkReply(buf[:n]), err
	case '*':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return replyNil, nil
		}
		out := make([]Reply, n)
		for i := range out {
			if out[i], err = readReply(rd); err != nil {
				return Reply{}, err
			}
		}
		return Reply{Kind: ReplyArray, Array: out}, nil
	}
	return Reply{}, fmt.Errorf("bad reply line %q", line)
}

func TestGlobAgainstRedis(t *testing.T) {
	r := startRedis(t)
	for _, tt := range globTests {
		r.do("FLUSHALL")
		r.do("SET", tt.str, "x")
		got := len(r.do("KEYS", tt.pattern).Array) == 1
		if got != tt.want {
			t.Errorf("redis: KEYS %q with key %q: %v, table says %v", tt.pattern, tt.str, got, tt.want)
		}
		s := NewStore()
		s.Apply(0, t0, []Command{c(OpSet, tt.str, "x")})
		if mine := s.Read(t0, c(OpKeys, tt.pattern)); len(mine.Array) == 1 != got {
			t.Errorf("KEYS %q with key %q: %v, redis says %v", tt.pattern, tt.str, !got, got)
		}
	}
}

func TestStringsAgainstRedis(t *testing.T) {
	r := startRedis(t)
	s := NewStore()
	check := func(what string, mine, theirs Reply) {
		t.Helper()
		if mine.String() != theirs.String() || mine.Kind != theirs.Kind {
			t.Errorf("%s: kvs %v, redis %v", what, mine, theirs)
		}
	}
	set := func(k, v string) {
		r.do("SET", k, v)
		s.Apply(0, t0, []Command{c(OpSet, k, v)})
	}

	for _, v := range []string{"", "0", "-0", "007", "+1", " 1", "1 ", "1\x00",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "12a", "1.0", "-", "99999999999999999999", "123456789012345678901"} {
		for _, d := range []int64{0, 1, -1, maxInt64, minInt64} {
			set("i", v)
			ds := strconv.FormatInt(d, 10)
			check(fmt.Sprintf("INCRBY %q %d", v, d), s.Apply(0, t0, []Command{c(OpIncrBy, "i").i(d)})[0], r.do("INCRBY", "i", ds))
		}
	}

	floats := []string{"0", "1", "-1", "10.5", "0.1", "0.2", "0.3", "1e10", "1.5e-7", "3.0e3",
		"123456789.123456789", "-0.0001", "1e17", "1e18", "99999999999999999", "2.5", "0x1p-10",
		"1e308", "-1e308", "5e-324", "7", "0.30000000000000004", "1.7976931348623157e308"}
	for _, a := range floats {
		for _, b := range floats {
			set("f", a)
			check(fmt.Sprintf("%s INCRBYFLOAT %s", a, b), s.Apply(0, t0, []Command{c(OpIncrByFloat, "f", b)})[0], r.do("INCRBYFLOAT", "f", b))
		}
	}

	for _, v := range []string{"", "hello", "x"} {
		set("g", v)
		for start := int64(-7); start <= 7; start++ {
			for end := int64(-7); end <= 7; end++ {
				ss, es := strconv.FormatInt(start, 10), strconv.FormatInt(end, 10)
				check(fmt.Sprintf("GETRANGE %q %d %d", v, start, end), s.Read(t0, c(OpGetRange, "g").i(start).i2(end)), r.do("GETRANGE", "g", ss, es))
			}
		}
	}
	check("GETRANGE missing", s.Read(t0, c(OpGetRange, "nokey").i(0).i2(-1)), r.do("GETRANGE", "nokey", "0", "-1"))

	for _, off := range []int64{0, 1, 3, 10} {
		for _, v := range []string{"", "ab"} {
			set("sr", "hello")
			check(fmt.Sprintf("SETRANGE %d %q", off, v), s.Apply(0, t0, []Command{c(OpSetRange, "sr", v).i(off)})[0], r.do("SETRANGE", "sr", strconv.FormatInt(off, 10), v))
			check("GET after SETRANGE", s.Read(t0, c(OpGet, "sr")), r.do("GET", "sr"))
		}
	}
}
