package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"kvs/resp"
)

// The pool of connections a follower keeps to the leader's RESP address,
// for forwarded batches and relayed admin commands. Each request takes a
// connection of its own (an idle one, or a new one), so concurrent
// forwards never queue behind one another; at most maxIdlePeerConns stay
// open between requests. The pool serves one address at a time: when the
// leader changes, the connections to the old one are closed.
//
// Every connection announces itself with KVS.PEER before its first
// request, logging in as the node's peer login then (acl_peer.go); the
// leader then never relays that connection's requests again, so a request
// makes one hop at most even while two nodes disagree about who leads. A
// connection that logged in otherwise than the node now does is not used
// again: closed when idle, and when its request is answered if busy.

const (
	maxIdlePeerConns = 64
	// maxPeerReply bounds the bulk reply a leader may send (the replies of
	// one forwarded batch).
	maxPeerReply = 4 << 30
)

type peerPool struct {
	timeout time.Duration
	dial    func(addr string, timeout time.Duration) (net.Conn, error) // Server.dialNode
	login   func() peerLogin                                           // Server.peerLogin
	// applyingScript reports whether this node's store runs a script:
	// the leader's reply then waits for the same entries' apply, which
	// a long script holds up (awaitReply); nil: never.
	applyingScript func() bool

	mu     sync.Mutex // guards the fields below
	addr   string     // the address the idle connections lead to
	idle   []*peerConn
	busy   map[*peerConn]struct{}
	closed bool
}

type peerConn struct {
	addr  string
	login peerLogin // what it announces itself, or did, with
	nc    net.Conn
	br    *bufio.Reader
	fresh bool   // not yet announced with KVS.PEER
	blob  []byte // scratch for encoding a request, reused
	hdr   []byte
}

// peerReply is the leader's answer: kind is '+', '-' or '$'; text holds a
// status or error line, bulk a bulk string (nil for a null bulk).
type peerReply struct {
	kind byte
	text string
	bulk []byte
}

func newPeerPool(timeout time.Duration, dial func(string, time.Duration) (net.Conn, error), login func() peerLogin) *peerPool {
	return &peerPool{timeout: timeout, dial: dial, login: login, busy: make(map[*peerConn]struct{})}
}

// get returns a connection to addr, logged in (or to log in) as login, for
// the caller's exclusive use.
func (p *peerPool) get(addr string, login peerLogin) (*peerConn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: server closing", ErrLeaderUnreachable)
	}
	if addr != p.addr {
		for _, pc := range p.idle {
			pc.nc.Close()
		}
		clear(p.idle)
		p.idle = p.idle[:0]
		p.addr = addr
	}
	for len(p.idle) > 0 {
		pc := p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if pc.login != login || peerClosed(pc.nc) {
			// Logged in otherwise than the node now does; or the
			// leader closed it while idle (a restart), and a request
			// written to it would be lost without telling whether it
			// arrived.
			pc.nc.Close()
			continue
		}
		p.busy[pc] = struct{}{}
		p.mu.Unlock()
		return pc, nil
	}
	p.mu.Unlock()

	nc, err := p.dial(addr, p.timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLeaderUnreachable, err)
	}
	pc := &peerConn{addr: addr, login: login, nc: nc, br: bufio.NewReaderSize(nc, 16<<10), fresh: true}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		nc.Close()
		return nil, fmt.Errorf("%w: server closing", ErrLeaderUnreachable)
	}
	p.busy[pc] = struct{}{}
	p.mu.Unlock()
	return pc, nil
}

// put ends the caller's use of pc: it goes back to the idle list when it is
// still in a known state (reusable), logged in as the node now logs in, and
// the pool has room, else it is closed.
func (p *peerPool) put(pc *peerConn, reusable bool) {
	login := p.login()
	p.mu.Lock()
	delete(p.busy, pc)
	keep := reusable && !p.closed && pc.addr == p.addr && pc.login == login && len(p.idle) < maxIdlePeerConns
	if keep {
		if cap(pc.blob) > 1<<20 {
			pc.blob = nil
		}
		p.idle = append(p.idle, pc)
	}
	p.mu.Unlock()
	if !keep {
		pc.nc.Close()
	}
}

// expire closes the idle connections that logged in otherwise than the
// node now does; busy ones are closed by put.
func (p *peerPool) expire() {
	login := p.login()
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.idle[:0]
	for _, pc := range p.idle {
		if pc.login == login {
			kept = append(kept, pc)
		} else {
			pc.nc.Close()
		}
	}
	clear(p.idle[len(kept):])
	p.idle = kept
}

// close closes every connection, idle or in use (a request in flight then
// fails at once instead of waiting for its deadline). Idempotent.
func (p *peerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pc := range p.idle {
		pc.nc.Close()
	}
	p.idle = nil
	for pc := range p.busy {
		pc.nc.Close()
	}
}

// roundTrip sends one request (the RESP bytes of bufs, written at once) to
// the leader at addr and reads its reply, within timeout.
//
// Its errors say what is known about the request: wrapping
// ErrLeaderUnreachable when nothing was sent (it certainly did not take
// effect), ErrUnknownOutcome when the connection failed after the request
// was written (it may have).
func (p *peerPool) roundTrip(addr string, timeout time.Duration, build func(pc *peerConn) net.Buffers) (peerReply, error) {
	pc, err := p.get(addr, p.login())
	if err != nil {
		return peerReply{}, err
	}
	announce := pc.fresh
	bufs := build(pc)
	if announce {
		bufs = append(net.Buffers{pc.login.hello()}, bufs...)
	}
	pc.nc.SetDeadline(time.Now().Add(timeout))
	n, err := bufs.WriteTo(pc.nc)
	if err != nil {
		p.put(pc, false)
		if n == 0 {
			return peerReply{}, fmt.Errorf("%w: writing to %s: %v", ErrLeaderUnreachable, addr, err)
		}
		return peerReply{}, fmt.Errorf("%w: writing to the leader at %s: %v", ErrUnknownOutcome, addr, err)
	}
	if announce {
		r, err := readPeerReply(pc.br)
		if err == nil && r.kind == '-' && peerLoginRefused(r.text) {
			// Not logged in, the request that follows is refused with
			// NOAUTH: it certainly did not take effect.
			p.put(pc, false)
			return peerReply{}, peerLoginRefusal(addr, pc.login, r.text)
		}
		if err == nil && (r.kind != '+' || r.text != "OK") {
			// A leader that refuses KVS.PEER is too old to take the
			// request that follows; it answers that one itself.
			err = fmt.Errorf("KVS.PEER answered %c%s", r.kind, r.text)
		}
		if err != nil {
			p.put(pc, false)
			return peerReply{}, fmt.Errorf("%w: the leader at %s: %v", ErrUnknownOutcome, addr, err)
		}
		pc.fresh = false
	}
	err = p.awaitReply(pc, timeout)
	var r peerReply
	if err == nil {
		r, err = readPeerReply(pc.br)
	}
	if err != nil {
		p.put(pc, false)
		return peerReply{}, fmt.Errorf("%w: the connection to the leader at %s failed after the request was sent: %v", ErrUnknownOutcome, addr, err)
	}
	pc.nc.SetDeadline(time.Time{})
	// After a protocol error (a request over the leader's
	// proto-max-bulk-len) the leader closes the connection.
	p.put(pc, !(r.kind == '-' && strings.HasPrefix(r.text, "ERR Protocol error")))
	return r, nil
}

// awaitReply waits for the first byte of the leader's reply. While this
// node runs a script when the wait times out, it waits again: the script's
// entry is applied on every node, the leader's too, and the writes sent
// wait behind it there, for as long as its budget lets it run.
func (p *peerPool) awaitReply(pc *peerConn, timeout time.Duration) error {
	for {
		_, err := pc.br.Peek(1)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() || p.applyingScript == nil || !p.applyingScript() {
			return err
		}
		pc.nc.SetDeadline(time.Now().Add(timeout))
	}
}

// encodeArgs is a request in RESP, for the leader.
func encodeArgs(args ...string) []byte {
	b := appendArrayLen(nil, len(args))
	for _, a := range args {
		b = appendBulkString(b, a)
	}
	return b
}

var errPeerProtocol = errors.New("protocol error in the leader's reply")

// peerLimits bound a leader's reply: a bulk string of at most
// maxPeerReply bytes (the replies of one forwarded batch).
var peerLimits = resp.Limits{MaxBulk: maxPeerReply}

// readPeerReply reads one status, error or bulk reply, the only kinds a
// leader sends to a peer connection; any other is a protocol error. A bulk
// is read into a buffer of its own, so it stays valid after the connection
// is reused.
func readPeerReply(br *bufio.Reader) (peerReply, error) {
	v, err := resp.ReadReply(br, peerLimits)
	if err != nil {
		return peerReply{}, err
	}
	switch v.Kind {
	case resp.KindStatus, resp.KindError:
		return peerReply{kind: byte(v.Kind), text: string(v.Str)}, nil
	case resp.KindBulk:
		return peerReply{kind: '$', bulk: v.Str}, nil
	}
	return peerReply{}, fmt.Errorf("%w: a reply of type %q", errPeerProtocol, byte(v.Kind))
}
