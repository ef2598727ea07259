package cluster

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Mux serves the Raft transports of several groups on one listener: a node
// has one Raft port however many groups it holds replicas of. Each group
// opens its Node over a layer of the Mux (Config.Mux and Config.Group),
// and raft's NetworkTransport for that group runs over the layer as over a
// listener of its own.
//
// A connection names its group first: muxMagic, then the group's id as
// four bytes, big-endian. Group 0 sends no header at all, so its
// connections are byte for byte those of a node before groups: a node
// that has not been upgraded yet, dialling or dialled, still speaks to
// group 0 of an upgraded one during a rolling upgrade. raft's first byte
// on a connection is an RPC type (0 to 4 in raft 1.7), never muxMagic.
//
// With TLS the header travels inside the mutually authenticated
// connection, after the handshake.
type Mux struct {
	ln   net.Listener
	dial func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error)

	mu       sync.Mutex // guards the fields below
	layers   map[uint32]*muxLayer
	pending  map[net.Conn]struct{} // accepted, group not read yet
	closed   bool
	acceptWG sync.WaitGroup
}

// muxMagic opens the header of a connection to a group other than 0.
const muxMagic = 0xF7

// ListenMux binds addr for the Raft traffic of every group on this node,
// over mutual TLS when t is not nil. As raft's TCP transport does, it
// refuses an address peers could not dial.
func ListenMux(addr string, t *TLS) (*Mux, error) {
	var (
		wrap func(net.Listener) net.Listener
		dial = func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
			return net.DialTimeout("tcp", string(addr), timeout)
		}
	)
	if t != nil {
		if t.Listener == nil || t.Dial == nil {
			return nil, errors.New("cluster: Config.TLS needs Listener and Dial")
		}
		wrap = func(ln net.Listener) net.Listener {
			return &handshakeListener{Listener: tls.NewListener(ln, t.Listener)}
		}
		dial = func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
			return dialTLS(addr, timeout, t.Dial())
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%w: %s", errNotAdvertisable, ln.Addr())
	}
	m := &Mux{ln: ln, dial: dial, layers: map[uint32]*muxLayer{}, pending: map[net.Conn]struct{}{}}
	if wrap != nil {
		m.ln = wrap(ln)
	}
	m.acceptWG.Add(1)
	go m.accept()
	return m, nil
}

// Addr is the address the Mux listens on.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// accept hands each connection to a goroutine that reads its group.
func (m *Mux) accept() {
	defer m.acceptWG.Done()
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			nc.Close()
			return
		}
		m.pending[nc] = struct{}{}
		m.mu.Unlock()
		go m.route(nc)
	}
}

// route reads the connection's group and queues it on that group's layer;
// a connection to a group this node does not hold, or one that says
// nothing within the transport's timeout, is closed.
func (m *Mux) route(nc net.Conn) {
	group, first, err := readGroup(nc)
	m.mu.Lock()
	delete(m.pending, nc)
	l := m.layers[group]
	m.mu.Unlock()
	if err != nil || l == nil {
		nc.Close()
		return
	}
	var c net.Conn = nc
	if first >= 0 {
		c = &replayConn{Conn: nc, first: byte(first)}
	}
	if !l.deliver(c) {
		nc.Close()
	}
}

// readGroup reads a connection's header: the group, and for group 0 the
// first byte of raft's traffic, which it read to tell (-1 otherwise).
func readGroup(nc net.Conn) (group uint32, first int, err error) {
	nc.SetReadDeadline(time.Now().Add(transportTimeout))
	defer nc.SetReadDeadline(time.Time{})
	var b [5]byte
	if _, err := io.ReadFull(nc, b[:1]); err != nil {
		return 0, -1, err
	}
	if b[0] != muxMagic {
		return 0, int(b[0]), nil
	}
	if _, err := io.ReadFull(nc, b[1:5]); err != nil {
		return 0, -1, err
	}
	return binary.BigEndian.Uint32(b[1:5]), -1, nil
}

// Layer returns the stream layer of group, for Config.Mux/Config.Group;
// a group has at most one open at a time, and Close on it (raft's
// transport closes it at shutdown) frees the group for another.
func (m *Mux) Layer(group uint32) (raft.StreamLayer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, net.ErrClosed
	}
	if m.layers[group] != nil {
		return nil, fmt.Errorf("cluster: group %d already has a transport on %s", group, m.ln.Addr())
	}
	l := &muxLayer{m: m, group: group, conns: make(chan net.Conn, 16), done: make(chan struct{})}
	m.layers[group] = l
	return l, nil
}

// Close stops the listener and every layer still open, closing the
// connections they accepted. Idempotent.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	layers := make([]*muxLayer, 0, len(m.layers))
	for _, l := range m.layers {
		layers = append(layers, l)
	}
	pending := m.pending
	m.pending = map[net.Conn]struct{}{}
	m.mu.Unlock()
	err := m.ln.Close()
	for nc := range pending {
		nc.Close()
	}
	for _, l := range layers {
		l.Close()
	}
	m.acceptWG.Wait()
	return err
}

// muxLayer is one group's raft.StreamLayer over a Mux. Like stream, its
// Close also closes the connections it accepted (connSet).
type muxLayer struct {
	m     *Mux
	group uint32
	conns chan net.Conn // routed to this group, not accepted yet
	done  chan struct{} // closed by Close

	accepted connSet
}

// deliver queues c for Accept; false once the layer is closed.
func (l *muxLayer) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *muxLayer) Accept() (net.Conn, error) {
	select {
	case nc := <-l.conns:
		c, ok := l.accepted.add(nc)
		if !ok {
			return nil, net.ErrClosed
		}
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the layer (not the Mux) and the connections it accepted,
// and frees its group. Idempotent.
func (l *muxLayer) Close() error {
	if !l.accepted.close() {
		return nil
	}
	close(l.done)
	l.m.mu.Lock()
	if l.m.layers[l.group] == l {
		delete(l.m.layers, l.group)
	}
	l.m.mu.Unlock()
	for {
		select {
		case nc := <-l.conns:
			nc.Close()
		default:
			return nil
		}
	}
}

func (l *muxLayer) Addr() net.Addr { return l.m.ln.Addr() }

// Dial connects to the same group on another node.
func (l *muxLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nc, err := l.m.dial(addr, timeout)
	if err != nil || l.group == 0 {
		return nc, err
	}
	var hdr [5]byte
	hdr[0] = muxMagic
	binary.BigEndian.PutUint32(hdr[1:], l.group)
	nc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := nc.Write(hdr[:]); err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetWriteDeadline(time.Time{})
	return nc, nil
}

// replayConn gives back the byte readGroup read from a group 0 connection
// before the rest.
type replayConn struct {
	net.Conn
	first byte
	done  bool
}

func (c *replayConn) Read(b []byte) (int, error) {
	if !c.done && len(b) > 0 {
		c.done = true
		b[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(b)
}
