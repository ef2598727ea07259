//go:build linux

// Package tcpwait waits for the network, for tests that need what they
// sent on different connections to reach the server in that order.
package tcpwait

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Delivered waits until the peer's TCP stack has taken everything written
// on nc (SIOCOUTQ: nothing left unacknowledged), or timeout passes. On a
// busy machine the kernel may otherwise hand writes made one after the
// other on two connections to the server in the other order: loopback
// delivery goes through per-CPU queues, which softirq processing may
// defer, and two writes from one goroutine may leave from two CPUs.
func Delivered(nc net.Conn, timeout time.Duration) error {
	sc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var n int
		var ierr error
		if err := sc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
			return err
		}
		if ierr != nil {
			return ierr
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d bytes sent still unacknowledged", n)
		}
		time.Sleep(20 * time.Microsecond) // poll interval
	}
}
