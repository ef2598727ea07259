package cluster

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// stream is the raft.StreamLayer under the node's NetworkTransport, plain
// TCP or TLS (tls.go). It is raft's own TCP stream layer plus one duty:
// Close also closes the connections it accepted. raft serves each accepted
// connection from a goroutine that reads until the other node hangs up,
// and its transport's Close stops only the listener, so without this a
// closed node kept one goroutine per connection of every node still
// running. (The node's Close closes the connections it dialled itself:
// NetworkTransport.CloseStreams.)
type stream struct {
	net.Listener
	dial func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error)

	accepted connSet
}

// listenStream binds addr for a stream that dials with dial; wrap, if not
// nil, wraps the listener (TLS). As raft's TCP transport does, it refuses
// an address peers could not dial.
func listenStream(addr string, wrap func(net.Listener) net.Listener, dial func(raft.ServerAddress, time.Duration) (net.Conn, error)) (*stream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%w: %s", errNotAdvertisable, ln.Addr())
	}
	s := &stream{Listener: ln, dial: dial}
	if wrap != nil {
		s.Listener = wrap(ln)
	}
	return s, nil
}

var errNotAdvertisable = errors.New("cluster: the raft address is not one peers can dial (unspecified host)")

// newTCPTransport binds addr and returns raft's NetworkTransport over
// plain TCP.
func newTCPTransport(addr string, cfg *raft.NetworkTransportConfig) (*raft.NetworkTransport, error) {
	s, err := listenStream(addr, nil, func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout("tcp", string(addr), timeout)
	})
	if err != nil {
		return nil, err
	}
	cfg.Stream = s
	return raft.NewNetworkTransportWithConfig(cfg), nil
}

// Dial opens a connection to another node.
func (s *stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dial(addr, timeout)
}

// Accept returns the next connection, tracked until it is closed.
func (s *stream) Accept() (net.Conn, error) {
	nc, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c, ok := s.accepted.add(nc)
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}

// Close stops the listener and closes every accepted connection still
// open, so that raft's goroutines serving them return. Idempotent.
func (s *stream) Close() error {
	s.accepted.close()
	return s.Listener.Close()
}
