// Package testwait holds the waits the tests of several packages share:
// polling a condition until it holds, and waiting until what a connection
// wrote has reached the server's socket. Only tests import it.
package testwait

import (
	"net"
	"testing"
	"time"

	"kvs/internal/tcpwait"
)

// Until polls cond every 10 ms until it returns nil, and fails tb with
// what and cond's last error once timeout has passed. The timeout detects
// hangs; it asserts no speed.
func Until(tb testing.TB, what string, timeout time.Duration, cond func() error) {
	tb.Helper()
	Poll(tb, what, timeout, 10*time.Millisecond, cond)
}

// Poll is Until calling cond every interval.
func Poll(tb testing.TB, what string, timeout, interval time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %v", what, err)
		}
		time.Sleep(interval)
	}
}

// Delivered waits until the server's socket holds everything written on
// nc (tcpwait.Delivered): no server, Redis included, can order what has
// not reached it.
func Delivered(tb testing.TB, nc net.Conn) {
	tb.Helper()
	if err := tcpwait.Delivered(nc, 10*time.Second); err != nil {
		tb.Fatal(err)
	}
}
