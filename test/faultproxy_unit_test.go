package test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The Proxy's own tests run against loopback servers in this process, so
// they need no kvs binary and finish in about a second.

// proxyWait bounds every poll in these tests; it detects hangs only.
const proxyWait = 5 * time.Second

// quiet is how long a read must stay silent to count as blackholed. A
// silence can only be shown by waiting, so this is the one place the tests
// spend time on purpose; a broken proxy that forwards late would slip past
// it, which the Stats checks beside it catch.
const quiet = 100 * time.Millisecond

// A tcpServer accepts on loopback and either echoes every connection or
// hands it to the test.
type tcpServer struct {
	ln       net.Listener
	echo     bool
	accepted atomic.Int64
	received atomic.Int64 // bytes echoed
	conns    chan net.Conn
	wg       sync.WaitGroup
	mu       sync.Mutex // guards open
	open     []net.Conn
}

func startServer(t testing.TB, echo bool) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln, echo: echo, conns: make(chan net.Conn, 16)}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Close)
	return s
}

func (s *tcpServer) Addr() string { return s.ln.Addr().String() }

func (s *tcpServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.mu.Lock()
		s.open = append(s.open, c)
		s.mu.Unlock()
		if !s.echo {
			s.conns <- c
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			io.Copy(c, io.TeeReader(c, countWriter{&s.received}))
			c.Close()
		}()
	}
}

// Close stops the server, closes its connections and waits for its
// goroutines. It is idempotent.
func (s *tcpServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

type countWriter struct{ n *atomic.Int64 }

func (w countWriter) Write(b []byte) (int, error) {
	w.n.Add(int64(len(b)))
	return len(b), nil
}

func dialT(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serverSide returns the server's end of the connection the proxy made.
func serverSide(t testing.TB, s *tcpServer) net.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(proxyWait):
		t.Fatal("the proxy never connected to the target")
		return nil
	}
}

func send(t testing.TB, c net.Conn, msg string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(proxyWait))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// expect reads exactly want from c.
func expect(t testing.TB, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(proxyWait))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: %v (got %q)", want, err, got)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectSilence requires that nothing arrives on c for a while and the
// connection stays open.
func expectSilence(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(quiet))
	b := make([]byte, 1)
	n, err := c.Read(b)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want a timeout on a blackholed connection", b[:n], err)
	}
}

// expectClosed requires that c is closed by its peer (EOF or reset), not
// merely silent.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(proxyWait))
	b := make([]byte, 64)
	for {
		n, err := c.Read(b)
		if err == nil {
			continue // bytes forwarded before the close
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open after %v (last read %q)", proxyWait, b[:n])
		}
		return
	}
}

// pollUntil polls cond until it returns nil or proxyWait passes.
func pollUntil(t testing.TB, what string, cond func() error) {
	t.Helper()
	pollFor(t, what, proxyWait, 5*time.Millisecond, cond)
}

func TestProxyForwards(t *testing.T) {
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	c := dialT(t, p.Addr())
	send(t, c, "hello")
	expect(t, c, "hello")
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB: several chunks
	go c.Write(big)
	got := make([]byte, len(big))
	c.SetReadDeadline(time.Now().Add(proxyWait))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("128 KiB echo: %v, equal %v", err, bytes.Equal(got, big))
	}
	want := int64(len("hello") + len(big))
	pollUntil(t, "stats", func() error {
		st := p.Stats()
		if st != (ProxyStats{Accepted: 1, ToTarget: want, FromTarget: want}) {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
}

// TestProxyHalfClose: an EOF from one side reaches the other, and the
// reply that follows it still flows back.
func TestProxyHalfClose(t *testing.T) {
	srv := startServer(t, false)
	p := NewProxy(t, srv.Addr())
	c := dialT(t, p.Addr())
	send(t, c, "req")
	s := serverSide(t, srv)
	expect(t, s, "req")
	c.(*net.TCPConn).CloseWrite()
	s.SetReadDeadline(time.Now().Add(proxyWait))
	if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("server read after the client's CloseWrite: %d, %v; want EOF", n, err)
	}
	send(t, s, "reply")
	expect(t, c, "reply")
}

func TestProxyCut(t *testing.T) {
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	old := dialT(t, p.Addr())
	send(t, old, "a")
	expect(t, old, "a")

	p.Cut()
	send(t, old, "lost")
	expectSilence(t, old)
	fresh := dialT(t, p.Addr()) // accepted, never forwarded
	send(t, fresh, "void")
	expectSilence(t, fresh)
	pollUntil(t, "discarded bytes", func() error {
		if st := p.Stats(); st.Discarded != int64(len("lost")+len("void")) {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	if n := echo.accepted.Load(); n != 1 {
		t.Errorf("target accepted %d connections; a blackholed dial must not reach it", n)
	}
	if n := echo.received.Load(); n != 1 {
		t.Errorf("target received %d bytes during the cut, want only the 1 before it", n)
	}

	p.Heal()
	expectClosed(t, old) // lost bytes: closed so the peer redials
	expectClosed(t, fresh)
	c := dialT(t, p.Addr())
	send(t, c, "back")
	expect(t, c, "back")
}

func TestProxyReset(t *testing.T) {
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	old := dialT(t, p.Addr())
	send(t, old, "a")
	expect(t, old, "a")

	p.Reset()
	expectClosed(t, old)
	refused := dialT(t, p.Addr())
	expectClosed(t, refused)

	p.Heal()
	c := dialT(t, p.Addr())
	send(t, c, "back")
	expect(t, c, "back")
	if st := p.Stats(); st.Accepted != 3 {
		t.Errorf("accepted %d, want 3", st.Accepted)
	}
}

func TestProxyCutOneWay(t *testing.T) {
	for _, dir := range []Direction{ToTarget, FromTarget} {
		t.Run(dir.String(), func(t *testing.T) {
			srv := startServer(t, false)
			p := NewProxy(t, srv.Addr())
			c := dialT(t, p.Addr())
			send(t, c, "x")
			s := serverSide(t, srv)
			expect(t, s, "x")

			p.CutOneWay(dir)
			from, to, open, openTo := c, s, s, c // the cut way, then the open way
			if dir == FromTarget {
				from, to, open, openTo = s, c, c, s
			}
			send(t, from, "cut")
			expectSilence(t, to)
			send(t, open, "flows")
			expect(t, openTo, "flows")
			pollUntil(t, "discarded bytes", func() error {
				if st := p.Stats(); st.Discarded != 3 {
					return fmt.Errorf("stats %+v", st)
				}
				return nil
			})

			p.Heal()
			expectClosed(t, c)
		})
	}
}

func TestProxyDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	c := dialT(t, p.Addr())
	p.Delay(d)
	start := time.Now()
	for _, s := range []string{"1", "2", "3"} {
		send(t, c, s)
	}
	expect(t, c, "123") // order kept
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip took %v with %v each way", rtt, d)
	}

	p.Heal() // a delay loses nothing, so the connection survives
	send(t, c, "4")
	expect(t, c, "4")
}

func TestProxyDrop(t *testing.T) {
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	c := dialT(t, p.Addr())
	p.Drop(1, rand.New(rand.NewSource(1)))
	send(t, c, "x")
	expectClosed(t, c)
	if st := p.Stats(); st.Dropped != 1 {
		t.Errorf("dropped %d, want 1", st.Dropped)
	}
	p.Drop(0, nil)
	c = dialT(t, p.Addr())
	send(t, c, "y")
	expect(t, c, "y")
}

func TestProxySetTarget(t *testing.T) {
	a, b := startServer(t, true), startServer(t, true)
	p := NewProxy(t, a.Addr())
	ca := dialT(t, p.Addr())
	send(t, ca, "a")
	expect(t, ca, "a")
	p.SetTarget(b.Addr())
	cb := dialT(t, p.Addr())
	send(t, cb, "b")
	expect(t, cb, "b")
	send(t, ca, "a") // existing connections keep their target
	expect(t, ca, "a")
	if a.accepted.Load() != 1 || b.accepted.Load() != 1 {
		t.Errorf("accepted %d and %d, want 1 each", a.accepted.Load(), b.accepted.Load())
	}
}

// TestProxyCloseLeavesNoGoroutines closes a proxy with connections in every
// state (forwarding, delayed, blackholed) and requires that all its
// goroutines end.
func TestProxyCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	idle := dialT(t, p.Addr())
	send(t, idle, "a")
	expect(t, idle, "a")
	p.Delay(time.Hour)
	delayed := dialT(t, p.Addr())
	send(t, delayed, "b")
	p.Cut()
	holed := dialT(t, p.Addr())
	send(t, holed, "c")
	pollUntil(t, "the blackholed bytes", func() error {
		if st := p.Stats(); st.Accepted != 3 || st.Discarded == 0 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})

	p.Close()
	p.Close()
	for _, c := range []net.Conn{idle, delayed, holed} {
		expectClosed(t, c)
	}
	echo.Close() // its per-connection goroutines end with the proxy's dials
	pollUntil(t, "goroutines to end", func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before the proxy and its target", n, before)
		}
		return nil
	})
}

// TestProxyTable: a table that blocks all or none of each node's callers
// is applied; one that blocks only some callers is refused untouched.
func TestProxyTable(t *testing.T) {
	servers := []*tcpServer{startServer(t, true), startServer(t, true), startServer(t, true)}
	ps := NewRaftProxies(t, []string{servers[0].Addr(), servers[1].Addr(), servers[2].Addr()})
	deaf1 := [][]bool{{false, true, false}, {false, false, false}, {false, true, false}}
	if err := ps.Block(deaf1); err != nil {
		t.Fatal(err)
	}
	c := dialT(t, ps[1].Addr())
	send(t, c, "x")
	expectSilence(t, c)
	c = dialT(t, ps[0].Addr())
	send(t, c, "y")
	expect(t, c, "y")

	// {n0} | {n1, n2}: n1's callers are split.
	split := [][]bool{{false, true, true}, {true, false, false}, {true, false, false}}
	if err := ps.Block(split); err == nil {
		t.Fatal("a symmetric 1|2 split was accepted")
	}
	c = dialT(t, ps[1].Addr())
	send(t, c, "z")
	expectSilence(t, c) // the refused table left the earlier cut in place

	ps.HealAll()
	c = dialT(t, ps[1].Addr())
	send(t, c, "w")
	expect(t, c, "w")
}
