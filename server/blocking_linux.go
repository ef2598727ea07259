//go:build linux

package server

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitBlocked waits, on a connection served by a goroutine of its own,
// until w is woken (a signal, CLIENT UNBLOCK), its deadline passes or the
// peer hangs up. It reports false when the client is gone or the server
// is stopping. It watches the socket without reading it: requests the
// client pipelines meanwhile stay in the socket for after the answer.
//
// The wakers interrupt it by setting a read deadline in the past, under
// the registry's lock and only while w is idle; the deadline is set here
// before w's state is looked at, so a wake-up cannot fall between the two.
func (c *client) waitBlocked(w *waiter) bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return c.waitBlockedPlain(w)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c.waitBlockedPlain(w)
	}
	defer c.nc.SetReadDeadline(time.Time{})
	for {
		c.nc.SetReadDeadline(w.deadline)
		if !c.s.blocked.idle(w) {
			return true
		}
		if c.s.shutdown.Load() {
			return false
		}
		hup := false
		err := rc.Read(func(fd uintptr) bool {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if n, _ := unix.Poll(fds, 0); n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
				hup = true
				return true
			}
			return false // data, or nothing: wait for the next readiness
		})
		switch {
		case hup:
			return false
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			return false // closed
		}
		// A deadline: woken, timed out (next decides), or Shutdown.
		if c.s.shutdown.Load() {
			return false
		}
		if !c.s.blocked.idle(w) || (!w.deadline.IsZero() && !time.Now().Before(w.deadline)) {
			return true
		}
	}
}
