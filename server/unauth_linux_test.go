//go:build linux

package server

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnauthenticatedUnreadReplies: an unauthenticated client that sends
// commands one by one and never reads the replies is closed, as Redis
// closes it (its test "For unauthenticated clients output buffer is
// limited"): once its socket takes no more, the event loop reads it on,
// as Redis does, rather than wait for it to read, until its replies pass
// 16 KiB. (A connection with a goroutine of its own blocks in its write
// instead, holding one pipeline's replies.) Each command is sent once the
// server has answered the one before, so each is a pipeline of its own.
func TestUnauthenticatedUnreadReplies(t *testing.T) {
	s, admin := startWithPassword(t, false)
	if !usesLoops(s) {
		t.Skip("connections are served by goroutines (KVS_TEST_CONN_GOROUTINES)")
	}
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	nc, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The count of NOAUTH errors, "" before the first.
	refused := func() string {
		for _, line := range strings.Split(admin.do("INFO", "errorstats"), "\r\n") {
			if v, ok := strings.CutPrefix(line, "errorstat_NOAUTH:"); ok {
				return v
			}
		}
		return ""
	}
	before := ""
	for i := 0; i < 100000; i++ {
		nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write([]byte("HELLO 3\r\n")); err != nil {
			return // closed
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			now := refused()
			if now != before {
				before = now
				break
			}
			if s.connectedClients() == 1 {
				return // closed, the command unread
			}
			if time.Now().After(deadline) {
				t.Fatalf("HELLO #%d was not read: the client is neither served nor closed", i)
			}
		}
	}
	t.Fatal("100,000 unread errors went through without the client being closed")
}
