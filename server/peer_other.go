//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import "net"

// peerClosed cannot tell without a non-blocking peek; a stale connection is
// found when a request on it fails.
func peerClosed(net.Conn) bool { return false }
