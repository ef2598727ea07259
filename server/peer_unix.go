//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import (
	"crypto/tls"
	"net"
	"syscall"
)

// peerClosed reports whether the other end has closed (or reset) the idle
// connection nc, by peeking at it without blocking: an idle peer
// connection has nothing to read unless the leader hung up.
func peerClosed(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		// The socket under TLS: once a round trip has consumed what the
		// handshake left (session tickets, if any), the leader sends
		// nothing unasked, so any byte is an alert (close_notify) and EOF
		// a hang-up.
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		case err != nil, n == 0:
			closed = true
		default:
			// Bytes nobody asked for: the connection is out of step.
			closed = true
		}
		return true
	})
	return closed || err != nil
}
