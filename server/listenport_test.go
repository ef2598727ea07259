package server

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

// TestConfigSetPort: CONFIG SET port binds the new port and closes the old
// one, connections already made going on; a port that cannot be bound
// fails the whole CONFIG SET, every parameter left as it was; port 0
// closes the listener until another port is set.
func TestConfigSetPort(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprint("goroutines=", goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			admin := dialRaw(t, s)
			old := s.Addr().String()
			port := freePort(t)
			if r := admin.do("CONFIG", "SET", "port", port); r != "+OK\r\n" {
				t.Fatalf("CONFIG SET port %s: %q", port, r)
			}
			if r := admin.do("CONFIG", "GET", "port"); r != "*2\r\n$4\r\nport\r\n$"+itoa(len(port))+"\r\n"+port+"\r\n" {
				t.Errorf("CONFIG GET port: %q", r)
			}
			if r := admin.do("PING"); r != "+PONG\r\n" {
				t.Errorf("the connection made on the old port: %q", r)
			}
			if nc, err := net.Dial("tcp", old); err == nil {
				nc.Close()
				t.Errorf("the old port %s still accepts", old)
			}
			if r := dialRaw(t, s).do("PING"); r != "+PONG\r\n" {
				t.Errorf("a connection on the new port: %q", r)
			}

			// A port in use: nothing changes, with Redis's error.
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
			r := admin.do("CONFIG", "SET", "maxmemory", "10000001", "port", busyPort, "client-query-buffer-limit", "10m")
			if want := "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n"; r != want {
				t.Errorf("CONFIG SET of a port in use: %q", r)
			}
			if r := admin.do("CONFIG", "GET", "maxmemory"); r != "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n" {
				t.Errorf("maxmemory after the failed CONFIG SET: %q", r)
			}
			if r := dialRaw(t, s).do("PING"); r != "+PONG\r\n" {
				t.Errorf("after the failed CONFIG SET: %q", r)
			}

			if r := admin.do("CONFIG", "SET", "port", "0"); r != "+OK\r\n" {
				t.Fatalf("CONFIG SET port 0: %q", r)
			}
			if r := admin.do("CONFIG", "GET", "port"); r != "*2\r\n$4\r\nport\r\n$1\r\n0\r\n" {
				t.Errorf("CONFIG GET port after port 0: %q", r)
			}
			if nc, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
				nc.Close()
				t.Error("port 0 left the listener open")
			}
			again := freePort(t)
			if r := admin.do("CONFIG", "SET", "port", again); r != "+OK\r\n" {
				t.Fatalf("CONFIG SET port %s after port 0: %q", again, r)
			}
			if r := dialRaw(t, s).do("PING"); r != "+PONG\r\n" {
				t.Errorf("a connection after port 0 and a new port: %q", r)
			}
		})
	}
}

// freePort returns a port nothing listens on at the moment.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
