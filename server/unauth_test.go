package server

import (
	"net"
	"strings"
	"testing"

	"kvs/resp"
)

// Before AUTH a client is held to Redis's limits: at most 10 arguments
// and 16 KiB per bulk, refused at the header and closed, and at most
// 16 KiB of pending output. "Authenticated" is Redis's: AUTH or HELLO
// AUTH succeeded, as the default user or another, or the default user
// needs no password and is on (then nobody is limited); RESET logs out
// again.

func unauthBigSet() []byte { return encodeCommand("SET", "k", strings.Repeat("v", 20000)) }

// startWithPassword starts a server whose default user has password "pw",
// and returns it with a connection opened before the password was set,
// which stays logged in.
func startWithPassword(t *testing.T, goroutines bool) (*Server, *rawConn) {
	t.Helper()
	s := startServer(t, Config{ConnGoroutines: goroutines})
	admin := dialRaw(t, s)
	if r := admin.do("CONFIG", "SET", "requirepass", "pw"); r != "+OK\r\n" {
		t.Fatalf("CONFIG SET requirepass: %q", r)
	}
	return s, admin
}

// closedWith sends req on a fresh connection and returns everything the
// server sends until it closes the connection (a reset, when the server
// closes with requests unread, ends it too).
func closedWith(t *testing.T, s *Server, req []byte) string {
	t.Helper()
	rc := dialRaw(t, s)
	rc.send(req)
	out, err := rc.readEOF()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%.40q: the connection was not closed (read %q)", req, out)
	}
	return out
}

func TestUnauthenticatedRequestLimits(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		name := "loop"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) {
			s, admin := startWithPassword(t, goroutines)
			unauthArgs := "-" + resp.MsgUnauthMultiBulkLength + "\r\n"
			unauthBulk := "-" + resp.MsgUnauthBulkLength + "\r\n"
			for _, tc := range []struct {
				name, req, want string
			}{
				{"11 arguments", string(encodeCommand("DEL", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")), unauthArgs},
				{"the count alone", "*11\r\n", unauthArgs},
				{"a bulk over 16 KiB", string(unauthBigSet()), unauthBulk},
				{"a bulk header alone", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$300000000\r\n", unauthBulk},
				{"past Redis's own count limit", "*3000000000\r\n", "-" + resp.MsgInvalidMultiBulkLength + "\r\n"},
				{"past proto-max-bulk-len", "*1\r\n$600000000\r\n", "-" + resp.MsgInvalidBulkLength + "\r\n"},
				{"after a failed AUTH", string(encodeCommand("AUTH", "nope")) + string(unauthBigSet()),
					"-WRONGPASS invalid username-password pair or user is disabled.\r\n" + unauthBulk},
				{"after HELLO 3 without AUTH", "HELLO 3\r\n*11\r\n", "-" + errHelloNoAuth + "\r\n" + unauthArgs},
				{"inline of 12 arguments, then 11", "DEL a b c d e f g h i j k\r\n*11\r\n", "-" + errNoAuth + "\r\n" + unauthArgs},
			} {
				if got := closedWith(t, s, []byte(tc.req)); got != tc.want {
					t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
				}
			}

			// AUTH or HELLO AUTH pipelined before a large request: the
			// request is judged after the login ran.
			rc := dialRaw(t, s)
			rc.send(append(encodeCommand("AUTH", "pw"), unauthBigSet()...))
			if r1, r2 := rc.reply(), rc.reply(); r1 != "+OK\r\n" || r2 != "+OK\r\n" {
				t.Errorf("AUTH then a large SET: %q %q", r1, r2)
			}
			rc = dialRaw(t, s)
			rc.send(append(encodeCommand("HELLO", "3", "AUTH", "default", "pw"), unauthBigSet()...))
			if r1, r2 := rc.reply(), rc.reply(); !strings.HasPrefix(r1, "%7\r\n") || r2 != "+OK\r\n" {
				t.Errorf("HELLO 3 AUTH then a large SET: %q %q", r1, r2)
			}
			// RESET logs the connection out: it is limited again.
			if r := rc.do("RESET"); r != "+RESET\r\n" {
				t.Fatalf("RESET: %q", r)
			}
			rc.send(unauthBigSet())
			if out, _ := rc.readEOF(); out != unauthBulk {
				t.Errorf("a large SET after RESET: %q", out)
			}

			// Another user's login counts as well.
			if r := admin.do("ACL", "SETUSER", "alice", "on", ">apw", "+@all", "~*"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			rc = dialRaw(t, s)
			rc.send(append(encodeCommand("AUTH", "alice", "apw"), encodeCommand("DEL", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11")...))
			if r1, r2 := rc.reply(), rc.reply(); r1 != "+OK\r\n" || r2 != ":0\r\n" {
				t.Errorf("AUTH alice then 12 arguments: %q %q", r1, r2)
			}

			// Once the default user needs no password, nobody is limited,
			// connections opened before included.
			waiting := dialRaw(t, s)
			if r := waiting.do("PING"); r != "-"+errNoAuth+"\r\n" {
				t.Fatalf("PING before AUTH: %q", r)
			}
			if r := admin.do("CONFIG", "SET", "requirepass", ""); r != "+OK\r\n" {
				t.Fatal(r)
			}
			waiting.send(unauthBigSet())
			if r := waiting.reply(); r != "+OK\r\n" {
				t.Errorf("a large SET once no password is needed: %q", r)
			}

			// A default user that is off needs a login though it has no
			// password.
			if r := admin.do("ACL", "SETUSER", "default", "off"); r != "+OK\r\n" {
				t.Fatal(r)
			}
			if got := closedWith(t, s, []byte("*11\r\n")); got != unauthArgs {
				t.Errorf("11 arguments with the default user off: %q", got)
			}
		})
	}
}

// TestUnauthenticatedOutputLimit: a client that must authenticate is
// closed as soon as its pending output passes 16 KiB, before any of it is
// written, as Redis closes it: 481 NOAUTH errors (16,354 bytes) are
// answered, 482 close the connection with nothing sent. An authenticated
// client is not limited so.
func TestUnauthenticatedOutputLimit(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		s, admin := startWithPassword(t, goroutines)
		noauth := "-" + errNoAuth + "\r\n"
		if got := closedWithAfterQuit(t, s, 481); got != strings.Repeat(noauth, 481)+"+OK\r\n" {
			t.Errorf("goroutines=%v: 481 PINGs got %d bytes", goroutines, len(got))
		}
		if got := closedWith(t, s, []byte(strings.Repeat("PING\r\n", 482))); got != "" {
			t.Errorf("goroutines=%v: 482 PINGs got %d bytes, want the connection closed with none", goroutines, len(got))
		}
		if v := infoField(t, admin, "stats", "client_output_buffer_limit_disconnections"); v != "1" {
			t.Errorf("goroutines=%v: client_output_buffer_limit_disconnections = %s, want 1", goroutines, v)
		}
		admin.send([]byte(strings.Repeat("PING\r\n", 2000)))
		for i := 0; i < 2000; i++ {
			if r := admin.reply(); r != "+PONG\r\n" {
				t.Fatalf("goroutines=%v: authenticated PING %d: %q", goroutines, i, r)
			}
		}
	}
}

// closedWithAfterQuit sends n inline PINGs and QUIT on a fresh connection
// and returns what the server sent before closing it.
func closedWithAfterQuit(t *testing.T, s *Server, n int) string {
	t.Helper()
	return closedWith(t, s, []byte(strings.Repeat("PING\r\n", n)+"QUIT\r\n"))
}

// infoField is one field of INFO section.
func infoField(t *testing.T, rc *rawConn, section, name string) string {
	t.Helper()
	r := rc.do("INFO", section)
	for _, line := range strings.Split(r, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, name, r)
	return ""
}
