package test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Protected mode and limits, end to end: what a client that is not on the
// loopback interface, or that does not read, or that sends without end,
// gets from the real binary.

// externalIP returns one of the machine's own IPv4 addresses that is not
// loopback, or skips t when it has none.
func externalIP(t *testing.T) net.IP {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skipf("no network interfaces to test from: %v", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.To4()
			}
		}
	}
	t.Skip("the machine has no non-loopback IPv4 address to connect from; protected mode cannot be tested")
	return nil
}

// onIP is addr's port on ip.
func onIP(ip net.IP, addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort(ip.String(), port)
}

// deniedReply connects to addr and returns everything the server sends
// before it closes the connection.
func deniedReply(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	c.Write(encodeCommand("PING"))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: connection stayed open for %v; got %q", addr, ioTimeout, b)
	}
	return string(b)
}

// TestProtectedMode: with no password and protected mode on (the default),
// a client on another interface gets Redis's DENIED message, byte for byte
// as redis-server 7 sends it, and is closed; loopback clients are served;
// CONFIG SET protected-mode no lets the outside in. Listening on 0.0.0.0
// logs a warning.
func TestProtectedMode(t *testing.T) {
	ip := externalIP(t)
	for _, durable := range []bool{false, true} {
		opts := KVSOptions{Durable: durable}
		n := newKVS(t, "kvs-protected-"+map[bool]string{false: "memory", true: "durable"}[durable], opts)
		args := n.Args
		n.Args = func(n *Node) []string {
			_, port, _ := net.SplitHostPort(n.Addr)
			return append(args(n), "--addr", "0.0.0.0:"+port)
		}
		n.Start()
		got := deniedReply(t, onIP(ip, n.Addr))
		if !strings.HasPrefix(got, "-DENIED Redis is running in protected mode") || !strings.HasSuffix(got, "\r\n") ||
			strings.Count(got, "\r\n") != 1 {
			t.Fatalf("%s: non-loopback client got %q, want the DENIED line and a close", n.Name, got)
		}
		if want := redisDenied(t, ip); want != "" && got != want {
			t.Fatalf("%s: DENIED differs from redis-server's:\nkvs   %q\nredis %q", n.Name, got, want)
		}
		local := dialRaw(t, n.Addr)
		if v := local.Do("CONFIG", "GET", "protected-mode"); string(v.Raw) != "*2\r\n$14\r\nprotected-mode\r\n$3\r\nyes\r\n" {
			t.Fatalf("CONFIG GET protected-mode = %s", v)
		}
		if v := local.Do("CONFIG", "SET", "protected-mode", "maybe"); string(v.Raw) !=
			"-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'\r\n" {
			t.Fatalf("CONFIG SET protected-mode maybe = %s", v)
		}
		if v := local.Do("INFO", "stats"); !strings.Contains(string(v.Raw), "rejected_connections:1\r\n") {
			t.Fatalf("INFO stats does not count the refusal: %s", v)
		}
		if v := local.Do("CONFIG", "SET", "protected-mode", "NO"); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("CONFIG SET protected-mode NO = %s", v)
		}
		outside := dialRaw(t, onIP(ip, n.Addr))
		if v := outside.Do("PING"); string(v.Raw) != "+PONG\r\n" {
			t.Fatalf("with protected mode off, a non-loopback PING got %s", v)
		}
		log, _ := os.ReadFile(n.LogPath())
		if !strings.Contains(string(log), "listening beyond loopback with no password set") {
			t.Fatalf("no warning for listening on 0.0.0.0 without a password in %s:\n%s", n.LogPath(), log)
		}
	}
}

// redisDenied is what redis-server, listening on every interface in
// protected mode, sends a client from ip ("" when it is not installed).
func redisDenied(t *testing.T, ip net.IP) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Log("redis-server not installed: the DENIED message is not compared with Redis's")
		return ""
	}
	r := &Node{t: t, Name: "redis-protected", Bin: bin, Addr: freeAddr(t)}
	r.Dir = filepath.Join(testDir(t), r.Name)
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.Args = func(n *Node) []string {
		_, port, _ := net.SplitHostPort(n.Addr)
		return []string{"--port", port, "--bind", "*", "--protected-mode", "yes", "--save", "",
			"--appendonly", "no", "--dir", n.Dir, "--daemonize", "no", "--logfile", ""}
	}
	r.Start()
	defer r.Stop()
	return deniedReply(t, onIP(ip, r.Addr))
}
