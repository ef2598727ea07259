package cluster

import (
	"net"
	"sync"
)

// connSet is the connections a stream layer accepted and raft has not
// closed yet, so that closing the layer closes them too: raft serves each
// accepted connection from a goroutine that reads until the other node
// hangs up, and its transport's Close stops only the listener.
type connSet struct {
	mu     sync.Mutex // guards conns and closed
	conns  map[*trackedConn]struct{}
	closed bool
}

// add tracks nc and returns it as raft should see it; false (nc closed)
// once the set is closed.
func (s *connSet) add(nc net.Conn) (net.Conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil, false
	}
	if s.conns == nil {
		s.conns = map[*trackedConn]struct{}{}
	}
	c := &trackedConn{Conn: nc, set: s}
	s.conns[c] = struct{}{}
	return c, true
}

// close closes every connection still tracked, and those added later;
// it reports false if it had been closed already.
func (s *connSet) close() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return true
}

// trackedConn leaves its set when raft closes it.
type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}
