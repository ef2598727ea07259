package test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// childAttr makes a server die with the test binary, so an interrupted
// `go test` (or a panic) leaves no stray processes holding ports and dirs.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// openFileLimit is the test process's limit on open files.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return lim.Cur
}

// delivered waits until the server's TCP stack has taken everything
// written on nc (SIOCOUTQ: nothing left unacknowledged), so that requests
// sent one after the other on different connections are in the server's
// sockets in that order. Without it the kernel may hand them over out of
// order on a busy machine: loopback delivery goes through a per-CPU queue,
// which softirq processing may defer, and two writes from one goroutine
// may leave from two CPUs. No server, Redis included, can order what has
// not reached it.
func delivered(tb testing.TB, nc net.Conn) {
	tb.Helper()
	sc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		var ierr error
		if err := sc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
			tb.Fatal(err)
		}
		if ierr != nil {
			tb.Fatal(ierr)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d bytes sent to the server still unacknowledged", n)
		}
		time.Sleep(20 * time.Microsecond) // poll interval
	}
}
