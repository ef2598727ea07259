package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"kvs/resp"
)

// The tests in this file drive what is particular to memory mode's event
// loops (reads that fill the buffer, replies the socket cannot take at
// once, clients that do not read, shutdown); make test runs them with a
// goroutine per connection too, where they must hold as well.

// TestLoopServesOnLinux guards against the loops silently not being used:
// with them, a connection's socket leaves Go's poller.
func TestLoopServesOnLinux(t *testing.T) {
	s := startServer(t, Config{})
	dialRaw(t, s).do("PING")
	want := runtime.GOOS == "linux" && !s.cfg.ConnGoroutines
	if got := usesLoops(s); got != want {
		t.Fatalf("event loops in use: %v, want %v", got, want)
	}
	info := dialRaw(t, s).do("INFO", "server")
	wantIO := "kvs_io:goroutines\r\n"
	if want {
		wantIO = fmt.Sprintf("kvs_io:loop\r\nkvs_event_loops:%d\r\n", runtime.NumCPU())
	}
	if !strings.Contains(info, wantIO) {
		t.Fatalf("INFO server does not say %q:\n%s", wantIO, info)
	}
}

// TestLoopLargeValues sends requests and replies far larger than one read
// or one write of the socket.
func TestLoopLargeValues(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, size := range []int{resp.ReadChunk - 1, resp.ReadChunk, resp.ReadChunk + 1, 1 << 20, 16 << 20} {
		val := strings.Repeat("v", size)
		if got := rc.do("SET", "big", val); got != "+OK\r\n" {
			t.Fatalf("SET of %d bytes: %q", size, got)
		}
		want := fmt.Sprintf("$%d\r\n%s\r\n", size, val)
		if got := rc.do("GET", "big"); got != want {
			t.Fatalf("GET of %d bytes: got %d bytes of reply, want %d", size, len(got), len(want))
		}
	}
}

// TestLoopLongPipeline sends a pipeline much longer than one read, in one
// write, and expects every reply in order.
func TestLoopLongPipeline(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	const n = 20000
	var req []byte
	for i := range n {
		req = append(req, encodeCommand("INCR", "n")...)
		req = append(req, encodeCommand("ECHO", fmt.Sprint(i))...)
	}
	sent := make(chan error, 1)
	go func() { // the replies must be read while the requests are sent
		_, err := rc.nc.Write(req)
		sent <- err
	}()
	for i := range n {
		if got, want := rc.reply(), fmt.Sprintf(":%d\r\n", i+1); got != want {
			t.Fatalf("reply %d to INCR: %q, want %q", i, got, want)
		}
		if got, want := rc.reply(), fmt.Sprintf("$%d\r\n%d\r\n", len(fmt.Sprint(i)), i); got != want {
			t.Fatalf("reply %d to ECHO: %q, want %q", i, got, want)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// sendBigGets stores a 1 MiB value and, on a new connection, pipelines
// gets GETs of it without reading, then gives the server time to fill the
// socket. It returns the connection and the reply each GET is owed.
func sendBigGets(t *testing.T, s *Server, gets int) (*rawConn, string) {
	t.Helper()
	val := strings.Repeat("x", 1<<20)
	if got := dialRaw(t, s).do("SET", "big", val); got != "+OK\r\n" {
		t.Fatal(got)
	}
	rc := dialRaw(t, s)
	var req []byte
	for range gets {
		req = append(req, encodeCommand("GET", "big")...)
	}
	rc.send(req)
	time.Sleep(100 * time.Millisecond)
	return rc, fmt.Sprintf("$%d\r\n%s\r\n", len(val), val)
}

// TestLoopClientNotReading: a client that pipelines large replies and
// never reads them fills its socket; the server keeps serving the others,
// and the stuck client gets every reply once it reads.
func TestLoopClientNotReading(t *testing.T) {
	s := startServer(t, Config{})
	const gets = 64 // 64 MiB of replies: far beyond the socket buffers
	stuck, want := sendBigGets(t, s, gets)

	// Every other client of every loop is still served.
	for i := range 2 * runtime.NumCPU() {
		rc := dialRaw(t, s)
		rc.nc.SetDeadline(time.Now().Add(10 * time.Second))
		if got := rc.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("client %d while another does not read: %q", i, got)
		}
	}

	stuck.nc.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range gets {
		if got := stuck.reply(); got != want {
			t.Fatalf("reply %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
}

// TestLoopShutdownWritesReplies: Shutdown lets a client that is owed
// replies the socket could not take yet receive all of them, then closes
// it; the client's later requests are not read.
func TestLoopShutdownWritesReplies(t *testing.T) {
	s := startServer(t, Config{})
	idle := dialRaw(t, s)
	idle.do("PING")
	const gets = 16
	rc, want := sendBigGets(t, s, gets)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	rc.nc.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range gets {
		if got := rc.reply(); got != want {
			t.Fatalf("reply %d during shutdown: %d bytes, want %d", i, len(got), len(want))
		}
	}
	rest, err := io.ReadAll(rc.br)
	if err != nil || len(rest) != 0 {
		t.Fatalf("after the replies: %q, %v; want the connection closed", rest, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	idle.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(idle.br); err != nil || len(b) != 0 {
		t.Fatalf("idle client after Shutdown: %q, %v; want it closed", b, err)
	}
}

// TestLoopManyClients runs many clients at once, each with pipelines, so
// every loop has several connections ready in the same round.
func TestLoopManyClients(t *testing.T) {
	s := startServer(t, Config{})
	const clients, rounds, depth = 64, 50, 8
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			rc := dialRaw(t, s)
			key := fmt.Sprint("c", c)
			for r := range rounds {
				var req []byte
				for range depth {
					req = append(req, encodeCommand("INCR", key)...)
				}
				if _, err := rc.nc.Write(req); err != nil {
					errs <- err
					return
				}
				for d := range depth {
					want := fmt.Sprintf(":%d\r\n", r*depth+d+1)
					line, err := rc.br.ReadString('\n')
					if err != nil || line != want {
						errs <- fmt.Errorf("client %d: %q, %v; want %q", c, line, err, want)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := dialRaw(t, s).do("DBSIZE"); got != fmt.Sprintf(":%d\r\n", clients) {
		t.Fatalf("DBSIZE = %q", got)
	}
}

// TestLoopRequestInPieces sends requests a byte at a time, and a pipeline
// split at every offset.
func TestLoopRequestInPieces(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	req := encodeCommand("SET", "piece", "value")
	for i := range req {
		rc.send(req[i : i+1])
		if i < len(req)-1 {
			time.Sleep(time.Millisecond)
		}
	}
	if got := rc.reply(); got != "+OK\r\n" {
		t.Fatalf("SET sent byte by byte: %q", got)
	}
	pipe := bytes.Join([][]byte{encodeCommand("GET", "piece"), encodeCommand("PING"), encodeCommand("ECHO", "e")}, nil)
	for cut := 1; cut < len(pipe); cut++ {
		rc.send(pipe[:cut])
		time.Sleep(100 * time.Microsecond)
		rc.send(pipe[cut:])
		for _, want := range []string{"$5\r\nvalue\r\n", "+PONG\r\n", "$1\r\ne\r\n"} {
			if got := rc.reply(); got != want {
				t.Fatalf("pipeline cut at %d: %q, want %q", cut, got, want)
			}
		}
	}
}

// TestHangUpDuringLargeRequest: clients that close while the server is
// still reading their large unfinished requests are closed by the server
// too, and their buffers stop counting. On a loop the hang-up's edge can
// come with the last bytes, read by a short read; the loop must read on
// to see the end of the stream rather than wait for an edge that will not
// come (it used to keep such connections, and their buffers, forever).
func TestHangUpDuringLargeRequest(t *testing.T) {
	s := startServer(t, Config{})
	chunk := make([]byte, 1<<20)
	for round := range 5 {
		for range 3 {
			rc := dialRaw(t, s)
			rc.send([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$300000000\r\n"))
			for n := 0; n < 12<<20; n += len(chunk) {
				rc.send(chunk)
			}
			rc.nc.Close()
		}
		eventually(t, fmt.Sprintf("round %d: every connection closed", round), func() bool {
			return s.connectedClients() == 0 && s.mem.clients.Load() == 0
		})
	}
}
