package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvs/fsm"
)

// startServer runs a Server on a free loopback port with a fresh store
// (unless cfg has one) and closes it when the test ends.
func startServer(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	if cfg.Store == nil {
		cfg.Store = fsm.NewStore()
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if os.Getenv("KVS_TEST_CONN_GOROUTINES") != "" {
		cfg.ConnGoroutines = true // make test runs the suite this way too
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	tb.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			tb.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s
}

// rawConn speaks RESP over a plain TCP connection and returns replies as
// the exact bytes the server sent.
type rawConn struct {
	tb testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(tb testing.TB, s *Server) *rawConn {
	tb.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return &rawConn{tb: tb, nc: nc, br: bufio.NewReader(nc)}
}

func encodeCommand(args ...string) []byte {
	b := appendArrayLen(nil, len(args))
	for _, a := range args {
		b = appendBulkString(b, a)
	}
	return b
}

// do sends one command and returns its reply's bytes.
func (rc *rawConn) do(args ...string) string {
	rc.tb.Helper()
	rc.send(encodeCommand(args...))
	return rc.reply()
}

func (rc *rawConn) send(b []byte) {
	rc.tb.Helper()
	rc.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.nc.Write(b); err != nil {
		rc.tb.Fatal(err)
	}
}

// reply reads one complete RESP2 or RESP3 reply.
func (rc *rawConn) reply() string {
	rc.tb.Helper()
	rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sb strings.Builder
	if err := readReply(rc.br, &sb); err != nil {
		rc.tb.Fatalf("reading reply: %v (so far %q)", err, sb.String())
	}
	return sb.String()
}

// readEOF reads what is left until the server closes the connection.
func (rc *rawConn) readEOF() (string, error) {
	rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(rc.br)
	return string(b), err
}

func readReply(br *bufio.Reader, sb *strings.Builder) error {
	line, err := br.ReadString('\n')
	sb.WriteString(line)
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return errors.New("short line")
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '=', '!':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return err
		}
		sb.Write(buf)
		return nil
	case '*', '~', '>', '%':
		n, _ := strconv.Atoi(body)
		if line[0] == '%' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := readReply(br, sb); err != nil {
				return err
			}
		}
		return nil
	}
	return errors.New("unknown reply type " + string(line[0]))
}

// eventually polls cond until it holds or a deadline passes.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
}
