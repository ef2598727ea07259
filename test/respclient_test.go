package test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ioTimeout bounds every raw read and write: a server that stops answering
// fails the test instead of hanging it.
const ioTimeout = 10 * time.Second

// A Value is one RESP2 or RESP3 reply, parsed just enough to compare and
// normalise replies while keeping the exact bytes the server sent.
type Value struct {
	Kind  byte    // the type byte: + - : $ * _ , # ! = ( % ~ >
	Str   string  // text of simple strings, errors, numbers, bulk and verbatim strings
	Null  bool    // RESP2 null bulk or array ($-1, *-1) or RESP3 null (_)
	Elems []Value // array, set and push elements; a map's keys and values alternate
	Raw   []byte  // the reply exactly as received
}

// IsError reports whether v is an error reply (simple or bulk).
func (v Value) IsError() bool { return v.Kind == '-' || v.Kind == '!' }

// String renders v as its raw bytes with CR LF made visible, which is how
// replies are shown in failure messages.
func (v Value) String() string { return strconv.Quote(string(v.Raw)) }

// readValue reads exactly one reply from r.
func readValue(r *bufio.Reader) (Value, error) {
	var raw bytes.Buffer
	v, err := readValueInto(r, &raw)
	v.Raw = raw.Bytes()
	return v, err
}

// readValueInto reads one reply, appending its bytes to raw; each value
// nested in it gets its own bytes as Raw (the top one's are set by
// readValue).
func readValueInto(r *bufio.Reader, raw *bytes.Buffer) (Value, error) {
	start := raw.Len()
	v, err := readValueBody(r, raw)
	v.Raw = bytes.Clone(raw.Bytes()[start:])
	return v, err
}

func readValueBody(r *bufio.Reader, raw *bytes.Buffer) (Value, error) {
	line, err := r.ReadString('\n')
	raw.WriteString(line)
	if err != nil {
		return Value{}, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return Value{}, fmt.Errorf("malformed reply line %q", line)
	}
	v := Value{Kind: line[0], Str: line[1 : len(line)-2]}
	switch v.Kind {
	case '+', '-', ':', ',', '#', '(':
		return v, nil
	case '_':
		v.Null = true
		return v, nil
	case '$', '!', '=':
		n, err := strconv.Atoi(v.Str)
		if err != nil {
			return v, fmt.Errorf("bad bulk length in %q", line)
		}
		if n < 0 {
			v.Null, v.Str = true, ""
			return v, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return v, err
		}
		raw.Write(buf)
		if string(buf[n:]) != "\r\n" {
			return v, fmt.Errorf("bulk of %d bytes not followed by CR LF", n)
		}
		v.Str = string(buf[:n])
		return v, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(v.Str)
		if err != nil {
			return v, fmt.Errorf("bad aggregate length in %q", line)
		}
		v.Str = ""
		if n < 0 {
			v.Null = true
			return v, nil
		}
		if v.Kind == '%' || v.Kind == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			e, err := readValueInto(r, raw)
			if err != nil {
				return v, err
			}
			v.Elems = append(v.Elems, e)
		}
		if v.Kind == '|' { // attributes annotate the reply that follows them
			return readValueInto(r, raw)
		}
		return v, nil
	}
	return v, fmt.Errorf("unknown reply type in %q", line)
}

// encodeCommand renders args as a RESP multibulk request.
func encodeCommand(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// rawConn is a minimal client: it writes the bytes it is given and reads
// replies byte for byte, so tests see exactly what the server sends.
type rawConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// dialHello dials each of addrs and says HELLO proto on each connection.
func dialHello(t testing.TB, proto string, addrs ...string) []*rawConn {
	t.Helper()
	conns := make([]*rawConn, len(addrs))
	for i, addr := range addrs {
		conns[i] = dialRaw(t, addr)
		if v := conns[i].Do("HELLO", proto); v.IsError() {
			t.Fatalf("HELLO %s on %s: %s", proto, addr, v.Str)
		}
	}
	return conns
}

// Write sends raw bytes.
func (c *rawConn) Write(s string) {
	c.t.Helper()
	if err := c.write([]byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) write(b []byte) error {
	c.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := c.c.Write(b)
	return err
}

// Read reads one reply.
func (c *rawConn) Read() Value {
	c.t.Helper()
	v, err := c.read()
	if err != nil {
		c.t.Fatalf("read reply: %v (got so far %q)", err, v.Raw)
	}
	return v
}

func (c *rawConn) read() (Value, error) {
	c.c.SetReadDeadline(time.Now().Add(ioTimeout))
	return readValue(c.r)
}

// Do sends one command and reads its reply.
func (c *rawConn) Do(args ...string) Value {
	c.t.Helper()
	v, err := c.do(args...)
	if err != nil {
		c.t.Fatalf("%s: %v (got so far %q)", showCommand(args), err, v.Raw)
	}
	return v
}

func (c *rawConn) do(args ...string) (Value, error) {
	if err := c.write(encodeCommand(args...)); err != nil {
		return Value{}, err
	}
	return c.read()
}

// expectClosed checks that the server closes the connection without
// sending anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := c.r.ReadByte()
	if err == nil {
		rest, _ := c.r.Peek(c.r.Buffered())
		c.t.Fatalf("expected the server to close the connection; it sent %q", append([]byte{b}, rest...))
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatalf("expected the server to close the connection; it stayed open for %v", ioTimeout)
	}
}

// showCommand renders a command for messages, quoting each argument.
func showCommand(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if len(a) > 60 {
			a = a[:60] + fmt.Sprintf("...(%d bytes)", len(a))
		}
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
