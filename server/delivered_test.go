package server

import (
	"net"
	"testing"
	"time"

	"kvs/internal/tcpwait"
)

// delivered waits until the server's socket holds everything written on
// nc (tcpwait.Delivered): no server, Redis included, can order what has
// not reached it.
func delivered(tb testing.TB, nc net.Conn) {
	tb.Helper()
	if err := tcpwait.Delivered(nc, 10*time.Second); err != nil {
		tb.Fatal(err)
	}
}
