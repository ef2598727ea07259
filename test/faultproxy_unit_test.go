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

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
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
		if st.Senders[""] != 1 || len(st.Senders) != 1 {
			return fmt.Errorf("senders %v, want one unknown", st.Senders)
		}
		if st.Accepted != 1 || st.Dropped != 0 || st.ToTarget != want || st.FromTarget != want || st.Discarded != 0 {
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

// A raftPeer is a real hashicorp/raft NetworkTransport on loopback that
// answers every RPC at once and counts what it received, by sender ID.
type raftPeer struct {
	id    string
	trans *raft.NetworkTransport
	mu    sync.Mutex
	got   map[string]int // sender ID -> RPCs received
}

// rpcTimeout is the peers' transport timeout: an RPC whose request or
// reply is blackholed fails after it.
const rpcTimeout = 300 * time.Millisecond

func startRaftPeer(t testing.TB, id string) *raftPeer {
	t.Helper()
	return startRaftPeerTimeout(t, id, rpcTimeout)
}

func startRaftPeerTimeout(t testing.TB, id string, timeout time.Duration) *raftPeer {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, timeout, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := &raftPeer{id: id, trans: trans, got: map[string]int{}}
	go func() {
		for rpc := range trans.Consumer() {
			var from string
			var resp any
			switch cmd := rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				from, resp = string(cmd.ID), &raft.AppendEntriesResponse{Term: cmd.Term, Success: true}
			case *raft.RequestVoteRequest:
				from, resp = string(cmd.ID), &raft.RequestVoteResponse{Term: cmd.Term, Granted: true}
			case *raft.RequestPreVoteRequest:
				from, resp = string(cmd.ID), &raft.RequestPreVoteResponse{Term: cmd.Term, Granted: true}
			case *raft.TimeoutNowRequest:
				from, resp = string(cmd.ID), &raft.TimeoutNowResponse{}
			case *raft.InstallSnapshotRequest:
				io.Copy(io.Discard, rpc.Reader)
				from, resp = string(cmd.ID), &raft.InstallSnapshotResponse{Term: cmd.Term, Success: true}
			}
			p.mu.Lock()
			p.got[from]++
			p.mu.Unlock()
			rpc.Respond(resp, nil)
		}
	}()
	// The transport never closes its consumer channel, so the goroutine
	// above stays blocked, idle, until the test binary exits.
	t.Cleanup(func() { trans.Close() })
	return p
}

func (p *raftPeer) received(from string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got[from]
}

func (p *raftPeer) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(p.id), Addr: []byte(p.trans.LocalAddr())}
}

// heartbeat sends one AppendEntries from p to the node behind addr.
func (p *raftPeer) heartbeat(to, addr string) error {
	var resp raft.AppendEntriesResponse
	return p.trans.AppendEntries(raft.ServerID(to), raft.ServerAddress(addr),
		&raft.AppendEntriesRequest{RPCHeader: p.header(), Term: 1}, &resp)
}

// TestProxyLearnsRaftSender: for every raft RPC type, the proxy learns the
// sender's server ID from the first request on a connection, and forwards
// that request intact.
func TestProxyLearnsRaftSender(t *testing.T) {
	t.Parallel()
	b := startRaftPeerTimeout(t, "b", proxyWait)
	p := NewProxy(t, string(b.trans.LocalAddr()))
	for _, id := range []string{"a", "c", "d", "e", "f"} {
		peer := startRaftPeerTimeout(t, id, proxyWait)
		to, addr := raft.ServerID("b"), raft.ServerAddress(p.Addr())
		var err error
		switch id {
		case "a":
			err = peer.heartbeat("b", p.Addr())
		case "c":
			err = peer.trans.RequestVote(to, addr, &raft.RequestVoteRequest{RPCHeader: peer.header(), Term: 2}, &raft.RequestVoteResponse{})
		case "d":
			err = peer.trans.RequestPreVote(to, addr, &raft.RequestPreVoteRequest{RPCHeader: peer.header(), Term: 2}, &raft.RequestPreVoteResponse{})
		case "e":
			err = peer.trans.TimeoutNow(to, addr, &raft.TimeoutNowRequest{RPCHeader: peer.header()}, &raft.TimeoutNowResponse{})
		case "f":
			data := bytes.Repeat([]byte("snapshot"), 64<<10)
			err = peer.trans.InstallSnapshot(to, addr, &raft.InstallSnapshotRequest{RPCHeader: peer.header(), Term: 2, Size: int64(len(data))},
				&raft.InstallSnapshotResponse{}, bytes.NewReader(data))
		}
		if err != nil {
			t.Fatalf("RPC from %s through the proxy: %v", id, err)
		}
		if b.received(id) != 1 {
			t.Errorf("b received %d RPCs from %s, want 1", b.received(id), id)
		}
	}
	// A large first request, spanning many reads, is identified too. The
	// transport timeout is long: the race detector slows its encoding.
	big := startRaftPeerTimeout(t, "big", proxyWait)
	var entries []*raft.Log
	for i := range 2000 {
		entries = append(entries, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, 512)})
	}
	err := big.trans.AppendEntries("b", raft.ServerAddress(p.Addr()),
		&raft.AppendEntriesRequest{RPCHeader: big.header(), Term: 1, Entries: entries}, &raft.AppendEntriesResponse{})
	if err != nil || b.received("big") != 1 {
		t.Fatalf("a 1 MiB AppendEntries: %v, received %d", err, b.received("big"))
	}
	st := p.Stats()
	for _, id := range []string{"a", "c", "d", "e", "f", "big"} {
		if st.Senders[id] != 1 {
			t.Errorf("senders %v: want one connection from %s", st.Senders, id)
		}
	}
	if st.Senders[""] != 0 {
		t.Errorf("senders %v: some raft connection was not identified", st.Senders)
	}
}

// TestProxyLearnsSenderOfSplitRequest: a first request that arrives in
// pieces, as from a sender paused in mid-write, is still identified and
// forwarded intact.
func TestProxyLearnsSenderOfSplitRequest(t *testing.T) {
	t.Parallel()
	srv := startServer(t, false)
	p := NewProxy(t, srv.Addr())
	var req bytes.Buffer
	req.WriteByte(0) // AppendEntries
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("slow"), Addr: []byte("127.0.0.1:1")}
	if err := codec.NewEncoder(&req, &codec.MsgpackHandle{}).Encode(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7}); err != nil {
		t.Fatal(err)
	}
	b := req.Bytes()
	c := dialT(t, p.Addr())
	for _, part := range [][]byte{b[:1], b[1:4], b[4:]} {
		send(t, c, string(part))
		time.Sleep(20 * time.Millisecond) // a sender that stalls between writes
	}
	expect(t, serverSide(t, srv), string(b))
	if st := p.Stats(); st.Senders["slow"] != 1 || len(st.Senders) != 1 {
		t.Errorf("senders %v, want one connection from slow", st.Senders)
	}
}

// TestProxyLearnsSenderOfGroup: a connection to a raft group other than
// 0 of a sharded node opens with the group header; the proxy reads past
// it, learns the sender, counts the connection under its group, and
// forwards header and request untouched, even when the header arrives
// in pieces. Group 0's connections, without a header, count as group 0.
func TestProxyLearnsSenderOfGroup(t *testing.T) {
	t.Parallel()
	srv := startServer(t, false)
	p := NewProxy(t, srv.Addr())
	request := func(id string) []byte {
		var req bytes.Buffer
		req.WriteByte(0) // AppendEntries
		hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte("127.0.0.1:1")}
		if err := codec.NewEncoder(&req, &codec.MsgpackHandle{}).Encode(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7}); err != nil {
			t.Fatal(err)
		}
		return req.Bytes()
	}
	grouped := append([]byte{muxMagic, 0, 0, 1, 2}, request("a")...) // group 258
	c := dialT(t, p.Addr())
	for _, part := range [][]byte{grouped[:1], grouped[1:3], grouped[3:6], grouped[6:]} {
		send(t, c, string(part))
		time.Sleep(20 * time.Millisecond) // a sender that stalls between writes
	}
	expect(t, serverSide(t, srv), string(grouped))
	plain := request("b")
	send(t, dialT(t, p.Addr()), string(plain))
	expect(t, serverSide(t, srv), string(plain))
	st := p.Stats()
	if st.Senders["a"] != 1 || st.Senders["b"] != 1 || len(st.Senders) != 2 {
		t.Errorf("senders %v, want one connection from a and one from b", st.Senders)
	}
	if st.Groups[258]["a"] != 1 || st.Groups[0]["b"] != 1 || len(st.Groups) != 2 {
		t.Errorf("groups %v, want a's connection in group 258 and b's in group 0", st.Groups)
	}
	// A link fault on a sender cuts its grouped connection too.
	p.SetLink("a", true, false)
	send(t, c, "more")
	pollUntil(t, "a's bytes discarded", func() error {
		if st := p.Stats(); st.Discarded != 4 {
			return fmt.Errorf("discarded %d bytes, want 4", st.Discarded)
		}
		return nil
	})
}

// TestProxyNotRaft: bytes that are not a raft request are forwarded
// untouched, including ones that start like one, and the sender stays
// unknown.
func TestProxyNotRaft(t *testing.T) {
	t.Parallel()
	echo := startServer(t, true)
	p := NewProxy(t, echo.Addr())
	c := dialT(t, p.Addr())
	send(t, c, "\x00\xc1garbage") // AppendEntries' type, then a byte msgpack never uses
	expect(t, c, "\x00\xc1garbage")
	p.SetLink("", true, true) // an unknown sender is never subject to a link
	send(t, c, "more")
	expect(t, c, "more")
	if st := p.Stats(); st.Senders[""] != 1 || st.Discarded != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestProxyLinks: a link fault on one sender leaves the others alone,
// blackholes requests or replies as asked, and heals by closing the
// connections that lost bytes so the sender redials.
func TestProxyLinks(t *testing.T) {
	t.Parallel()
	a, b, c := startRaftPeer(t, "a"), startRaftPeer(t, "b"), startRaftPeer(t, "c")
	p := NewProxy(t, string(b.trans.LocalAddr()))
	for _, peer := range []*raftPeer{a, c} {
		if err := peer.heartbeat("b", p.Addr()); err != nil {
			t.Fatalf("%s -> b: %v", peer.id, err)
		}
	}

	// a's requests to b vanish; c's pass.
	p.SetLink("a", true, false)
	before := b.received("a")
	if err := a.heartbeat("b", p.Addr()); err == nil {
		t.Fatal("a -> b succeeded with a's requests cut")
	}
	if b.received("a") != before {
		t.Error("b received a request from a through a cut link")
	}
	if err := c.heartbeat("b", p.Addr()); err != nil {
		t.Fatalf("c -> b with only a's link cut: %v", err)
	}

	// b's replies to a vanish: b receives a's request, a never learns.
	p.SetLink("a", false, true)
	before = b.received("a")
	pollUntil(t, "a's request to reach b", func() error {
		a.heartbeat("b", p.Addr()) // fails: the reply is cut
		if b.received("a") == before {
			return errors.New("not yet")
		}
		return nil
	})
	if err := a.heartbeat("b", p.Addr()); err == nil {
		t.Fatal("a -> b succeeded with b's replies to a cut")
	}

	p.SetLink("a", false, false)
	pollUntil(t, "a -> b after healing", func() error { return a.heartbeat("b", p.Addr()) })
	if st := p.Stats(); st.Discarded == 0 || st.Senders["a"] < 2 {
		t.Errorf("stats %+v: want bytes discarded and a redial by a", st)
	}
}

// TestRaftProxiesPartition builds a three-node mesh of raft transports,
// each behind its RaftProxies entry, and checks which RPCs pass under the
// partitions the chaos schedule uses.
func TestRaftProxiesPartition(t *testing.T) {
	t.Parallel()
	ids := []string{"n1", "n2", "n3"}
	var peers []*raftPeer
	var addrs []string
	for _, id := range ids {
		p := startRaftPeer(t, id)
		peers = append(peers, p)
		addrs = append(addrs, string(p.trans.LocalAddr()))
	}
	ps := NewRaftProxies(t, ids, addrs)
	// reach reports, for every ordered pair, whether an RPC gets through.
	reach := func() [][]bool {
		r := noLinks(3)
		var wg sync.WaitGroup
		for i := range 3 {
			for j := range 3 {
				if i == j {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A healed link may fail once on a pooled connection
					// the heal closed; the second try redials.
					for range 2 {
						if peers[i].heartbeat(ids[j], ps.P[j].Addr()) == nil {
							r[i][j] = true
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		return r
	}
	all := [][]bool{{true, true, true}, {true, true, true}, {true, true, true}}
	check := func(name string, want [][]bool) {
		t.Helper()
		got := reach()
		for i := range 3 {
			got[i][i] = true
			for j := range 3 {
				if got[i][j] != want[i][j] {
					t.Errorf("%s: %s -> %s reachable %v, want %v", name, ids[i], ids[j], got[i][j], want[i][j])
				}
			}
		}
	}
	check("healthy", all)

	// n1 isolated both ways (the leader in the minority).
	if err := ps.Partition([]int{0}, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	check("n1 | n2 n3", [][]bool{{true, false, false}, {false, true, true}, {false, true, true}})

	// A bridge: n1 and n3 cannot talk, n2 talks to both.
	blocked := noLinks(3)
	blocked[0][2], blocked[2][0] = true, true
	if err := ps.Block(blocked); err != nil {
		t.Fatal(err)
	}
	check("bridge n1 - n2 - n3", [][]bool{{true, true, false}, {true, true, true}, {false, true, true}})

	// One way: nothing from n2 reaches n1. n2's requests to n1 fail, and
	// so do n1's requests to n2, whose replies are lost.
	blocked = noLinks(3)
	blocked[1][0] = true
	if err := ps.Block(blocked); err != nil {
		t.Fatal(err)
	}
	before := peers[1].received("n1")
	check("n2 -/-> n1", [][]bool{{true, false, true}, {false, true, true}, {true, true, true}})
	if peers[1].received("n1") == before {
		t.Error("n2 never received n1's requests, whose replies alone are cut")
	}

	ps.HealAll()
	check("healed", all)
}

// TestProxyCutGroup: CutGroup discards the traffic of one raft group's
// connections, of one sender or of any, and leaves the other groups'
// alone; HealGroup lifts it and closes the connections that lost bytes.
func TestProxyCutGroup(t *testing.T) {
	t.Parallel()
	srv := startServer(t, false)
	p := NewProxy(t, srv.Addr())
	request := func(id string) []byte {
		var req bytes.Buffer
		req.WriteByte(0) // AppendEntries
		hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte("127.0.0.1:1")}
		if err := codec.NewEncoder(&req, &codec.MsgpackHandle{}).Encode(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7}); err != nil {
			t.Fatal(err)
		}
		return req.Bytes()
	}
	grouped := append([]byte{muxMagic, 0, 0, 0, 2}, request("a")...) // group 2
	ca := dialT(t, p.Addr())
	send(t, ca, string(grouped))
	sa := serverSide(t, srv)
	expect(t, sa, string(grouped))
	plain := request("b") // group 0
	cb := dialT(t, p.Addr())
	send(t, cb, string(plain))
	sb := serverSide(t, srv)
	expect(t, sb, string(plain))

	p.CutGroup(2, "")
	p.CutGroup(0, "c") // another sender's: b's connection goes on
	send(t, ca, "lost")
	send(t, cb, "kept")
	expect(t, sb, "kept")
	pollUntil(t, "a's bytes discarded", func() error {
		if st := p.Stats(); st.Discarded != 4 {
			return fmt.Errorf("discarded %d bytes, want 4", st.Discarded)
		}
		return nil
	})
	p.HealGroup(2)
	pollUntil(t, "a's connection, which lost bytes, closed", func() error {
		ca.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := ca.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("a's connection still open: %v", err)
		}
		return nil
	})
	p.CutGroup(0, "b")
	send(t, cb, "gone")
	pollUntil(t, "b's bytes discarded", func() error {
		if st := p.Stats(); st.Discarded != 8 {
			return fmt.Errorf("discarded %d bytes, want 8", st.Discarded)
		}
		return nil
	})
}
