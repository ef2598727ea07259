package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// TLS runs Raft's transport over mutual TLS: raft's NetworkTransport on a
// stream layer of TLS connections instead of its TCP one. Both sides
// authenticate: the listener's config must require and verify a client
// certificate (tls.RequireAndVerifyClientCert with the cluster's CA as
// ClientCAs), and each dial presents this node's certificate and verifies
// the other's. A process without a certificate the CA signed then gets no
// RPC through: it cannot vote, append or install a snapshot, and is not
// answered.
//
// Both configs are consulted per connection (a GetConfigForClient on the
// listener's, a fresh Dial call per dial), so certificates the caller
// reloads apply to new connections; raft's pooled connections keep what
// they agreed until they close.
type TLS struct {
	// Listener configures accepted connections. Required.
	Listener *tls.Config
	// Dial returns the config of one outgoing connection. Required.
	Dial func() *tls.Config
}

// handshakeTimeout bounds the TLS handshake of an accepted connection, so
// a peer that connects and says nothing does not hold raft's connection
// handler forever.
const handshakeTimeout = 10 * time.Second

// newTLSTransport binds addr and returns raft's NetworkTransport over TLS.
func newTLSTransport(addr string, t *TLS, cfg *raft.NetworkTransportConfig) (*raft.NetworkTransport, error) {
	if t.Listener == nil || t.Dial == nil {
		return nil, errors.New("cluster: Config.TLS needs Listener and Dial")
	}
	wrap := func(ln net.Listener) net.Listener {
		return &handshakeListener{Listener: tls.NewListener(ln, t.Listener)}
	}
	s, err := listenStream(addr, wrap, func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
		return dialTLS(addr, timeout, t.Dial())
	})
	if err != nil {
		return nil, err
	}
	cfg.Stream = s
	return raft.NewNetworkTransportWithConfig(cfg), nil
}

// dialTLS opens a TLS connection to another node; the handshake is
// complete (and the other node's certificate verified) when it returns.
func dialTLS(addr raft.ServerAddress, timeout time.Duration, cfg *tls.Config) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", string(addr))
}

// handshakeListener returns connections that complete their handshake,
// within handshakeTimeout, before the first byte is read.
type handshakeListener struct{ net.Listener }

func (l *handshakeListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: nc.(*tls.Conn)}, nil
}

type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error // the handshake's
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		defer cancel()
		c.err = c.HandshakeContext(ctx)
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}
