package test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// rssBytes is the resident set of process pid (Linux's /proc), or skips t
// where there is no /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc to read the server's RSS from: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// infoOf is one field of an INFO reply.
func infoOf(t *testing.T, c *rawConn, section, name string) string {
	t.Helper()
	v := c.Do("INFO", section)
	for _, line := range strings.Split(string(v.Raw), "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s: %s", section, name, v)
	return ""
}

// TestOutputBufferLimitAttack is the attack: one client sends 9,200
// GETs of a 10 MiB value and never reads. On the event loops (memory and
// durable mode) its output grows one slice per round until the normal
// class's hard limit (256 MiB by default) closes it, the disconnection is
// counted, and the memory goes back to the OS; on connections with a
// goroutine each (--io goroutines, as cluster mode serves them) its writes
// block once its socket is full, so it never holds more than a reply's
// worth. Either way the server's RSS stays bounded and another client's
// PINGs keep being answered (their latency is logged, not asserted).
func TestOutputBufferLimitAttack(t *testing.T) {
	const valueSize, gets = 10 << 20, 9200
	for _, tc := range []struct {
		name      string
		opts      KVSOptions
		closesRun bool // the attacker is closed (event loops)
	}{
		{"loop", KVSOptions{}, true},
		{"durable", KVSOptions{Durable: true}, true},
		{"goroutines", KVSOptions{Extra: []string{"--io", "goroutines"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newKVS(t, "kvs-obuf-"+tc.name, tc.opts)
			n.Start()
			ctl := dialRaw(t, n.Addr)
			if v := ctl.Do("SET", "k", strings.Repeat("v", valueSize)); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("SET = %s", v)
			}
			base := rssBytes(t, n.Pid())

			attacker, err := net.DialTimeout("tcp", n.Addr, ioTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer attacker.Close()
			var req []byte
			for range gets {
				req = append(req, encodeCommand("GET", "k")...)
			}
			sent := make(chan error, 1)
			go func() {
				// Blocks once the server stops reading; ends when the
				// server closes the connection or the test does.
				_, err := attacker.Write(req)
				sent <- err
			}()

			pinger := dialRaw(t, n.Addr)
			var lat []time.Duration
			peak := base
			deadline := time.Now().Add(60 * time.Second)
			for {
				start := time.Now()
				if v := pinger.Do("PING"); string(v.Raw) != "+PONG\r\n" {
					t.Fatalf("PING during the attack = %s", v)
				}
				lat = append(lat, time.Since(start))
				if d := lat[len(lat)-1]; d > 5*time.Millisecond {
					t.Logf("slow PING #%d: %v", len(lat), d)
				}
				peak = max(peak, rssBytes(t, n.Pid()))
				if tc.closesRun && len(lat)%20 == 0 && infoOf(t, ctl, "stats", "client_output_buffer_limit_disconnections") == "1" {
					break
				}
				if !tc.closesRun && len(lat) >= 500 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the attacker was not closed within a minute; peak RSS %d MiB\n%s", peak>>20, n.LogTail(20))
				}
			}
			slices.Sort(lat)
			t.Logf("%d PINGs during the attack: median %v, p99 %v, max %v; RSS %d MiB before, peak %d MiB",
				len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], base>>20, peak>>20)
			if bound := base + 768<<20; peak > bound {
				t.Fatalf("RSS peaked at %d MiB, over the bound of %d MiB", peak>>20, bound>>20)
			}
			if !tc.closesRun {
				return
			}
			// The attacker is gone: its socket ends, its memory is returned.
			attacker.SetReadDeadline(time.Now().Add(ioTimeout))
			if _, err := io.Copy(io.Discard, attacker); err != nil {
				// A reset (the server closed with requests unread) ends it
				// too; only a timeout says it is still open.
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the attacker's connection did not end: %v", err)
				}
			}
			log, _ := os.ReadFile(n.LogPath())
			if !strings.Contains(string(log), "scheduled to be closed ASAP for overcoming of output buffer limits") {
				t.Fatalf("the disconnection is not logged as Redis logs it:\n%s", n.LogTail(20))
			}
			dropped := time.Now()
			pollFor(t, "RSS back near where it was", 20*time.Second, 50*time.Millisecond, func() error {
				if r := rssBytes(t, n.Pid()); r > base+96<<20 {
					return fmt.Errorf("RSS %d MiB, was %d MiB before the attack", r>>20, base>>20)
				}
				return nil
			})
			t.Logf("RSS back to %d MiB %v after the disconnection was counted",
				rssBytes(t, n.Pid())>>20, time.Since(dropped).Round(time.Millisecond))
			if v := pinger.Do("GET", "k"); len(v.Raw) < valueSize {
				t.Fatalf("GET after the attack = %d bytes", len(v.Raw))
			}
		})
	}
}

// sendAndCollect writes req to a fresh connection to addr (ignoring write
// errors: the server may close first) and returns what the server sends
// before closing, with "<open>" appended if it did not close in time.
func sendAndCollect(t *testing.T, addr string, req []byte) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	go c.Write(req) // may block until the server closes; Close ends it
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return string(b) + "<open>"
	}
	return string(b)
}

// TestQueryBufferAttacks: requests that announce or send without end get
// what redis-server 7 gives them, byte for byte, and are closed: a 2 GB
// bulk header, an unterminated inline line past 64 KiB, and (with
// client-query-buffer-limit lowered on both) a bulk that never ends, which
// Redis closes without a reply. kvs counts that close and gives the
// memory back.
func TestQueryBufferAttacks(t *testing.T) {
	r := startRedis(t)
	ctlR := dialRaw(t, r.Addr)
	endless := append([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\n"), bytes.Repeat([]byte("x"), 24<<20)...)
	attacks := []struct {
		name string
		req  []byte
	}{
		{"2 GB bulk header", []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000000\r\n")},
		{"2 GB argument count", []byte("*3000000000\r\n")},
		{"unterminated inline", append([]byte("PING\r\n"), bytes.Repeat([]byte("a"), 70000)...)},
		{"endless bulk", endless},
	}
	for _, io := range []string{"loop", "goroutines"} {
		t.Run(io, func(t *testing.T) {
			n := startKVS(t, KVSOptions{Extra: []string{"--io", io}})
			ctl := dialRaw(t, n.Addr)
			for _, c := range []*rawConn{ctl, ctlR} {
				if v := c.Do("CONFIG", "SET", "client-query-buffer-limit", "16mb"); string(v.Raw) != "+OK\r\n" {
					t.Fatalf("CONFIG SET client-query-buffer-limit 16mb = %s", v)
				}
			}
			base := rssBytes(t, n.Pid())
			for _, a := range attacks {
				got, want := sendAndCollect(t, n.Addr, a.req), sendAndCollect(t, r.Addr, a.req)
				if got != want || strings.HasSuffix(got, "<open>") {
					t.Errorf("%s: kvs sent %q, redis-server %q (both should close)", a.name, got, want)
				}
			}
			if v := infoOf(t, ctl, "stats", "client_query_buffer_limit_disconnections"); v != "1" {
				t.Errorf("client_query_buffer_limit_disconnections = %s, want 1", v)
			}
			pollFor(t, "RSS back near where it was", 20*time.Second, 50*time.Millisecond, func() error {
				if rss := rssBytes(t, n.Pid()); rss > base+32<<20 {
					return fmt.Errorf("RSS %d MiB, was %d MiB before", rss>>20, base>>20)
				}
				return nil
			})
			if v := ctl.Do("PING"); string(v.Raw) != "+PONG\r\n" {
				t.Fatalf("PING after the attacks = %s", v)
			}
		})
	}
}

// TestMaxClients: with maxclients N, connection N+1 gets Redis's error,
// byte for byte as redis-server sends it, and is closed; closing one
// makes room again.
func TestMaxClients(t *testing.T) {
	const max = 8
	r := startRedis(t)
	for _, tc := range []struct {
		name string
		opts KVSOptions
	}{{"loop", KVSOptions{}}, {"goroutines", KVSOptions{Extra: []string{"--io", "goroutines"}}}} {
		t.Run(tc.name, func(t *testing.T) {
			n := startKVS(t, tc.opts)
			var wants []string
			for _, addr := range []string{n.Addr, r.Addr} {
				ctl := dialRaw(t, addr)
				if v := ctl.Do("CONFIG", "SET", "maxclients", strconv.Itoa(max)); string(v.Raw) != "+OK\r\n" {
					t.Fatalf("CONFIG SET maxclients = %s", v)
				}
				conns := []*rawConn{ctl}
				for len(conns) < max {
					c := dialRaw(t, addr)
					if v := c.Do("PING"); string(v.Raw) != "+PONG\r\n" {
						t.Fatalf("connection %d of %d: PING = %s", len(conns)+1, max, v)
					}
					conns = append(conns, c)
				}
				wants = append(wants, sendAndCollect(t, addr, encodeCommand("PING")))
				for _, c := range conns {
					c.c.Close()
				}
				ok := dialRaw(t, addr)
				pollFor(t, "room again", 10*time.Second, 20*time.Millisecond, func() error {
					if v, err := ok.do("CONFIG", "SET", "maxclients", "10000"); err != nil || string(v.Raw) != "+OK\r\n" {
						ok = dialRaw(t, addr)
						return fmt.Errorf("CONFIG SET maxclients 10000 = %q, %v", v.Raw, err)
					}
					return nil
				})
			}
			if wants[0] != "-ERR max number of clients reached\r\n" || wants[0] != wants[1] {
				t.Fatalf("connection %d: kvs sent %q, redis-server %q", max+1, wants[0], wants[1])
			}
		})
	}
}

// TestOutputBufferLimits: a client that asks for more than it reads is
// closed at the normal class's hard limit at once, and at its soft limit
// once the seconds have passed; a client that reads its replies is not
// closed, however much it reads. On the event loops the attacker's output
// grows past limits of twice a reply; a connection with a goroutine blocks
// instead and holds one reply, so there the limits are below one (which a
// reading client then breaks too, as in Redis, under the hard limit).
func TestOutputBufferLimits(t *testing.T) {
	const value = 2 << 20
	for _, tc := range []struct {
		io, name, limit string
		readerOK        bool
	}{
		{"loop", "hard", "normal 4mb 0 0", true},
		{"loop", "soft", "normal 0 4mb 1", true},
		{"goroutines", "hard", "normal 1mb 0 0", false},
		{"goroutines", "soft", "normal 0 1mb 1", true},
	} {
		t.Run(tc.io+"/"+tc.name, func(t *testing.T) {
			n := startKVS(t, KVSOptions{Extra: []string{"--io", tc.io}})
			ctl := dialRaw(t, n.Addr)
			ctl.Do("SET", "big", strings.Repeat("v", value))
			if v := ctl.Do("CONFIG", "SET", "client-output-buffer-limit", tc.limit); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("CONFIG SET client-output-buffer-limit %q = %s", tc.limit, v)
			}
			reader := dialRaw(t, n.Addr)
			for range 20 {
				if !tc.readerOK {
					break
				}
				if v := reader.Do("GET", "big"); len(v.Raw) < value {
					t.Fatalf("a reading client's GET = %d bytes", len(v.Raw))
				}
			}
			attacker, err := net.DialTimeout("tcp", n.Addr, ioTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer attacker.Close()
			// A small receive buffer, so the kernel holds little of it.
			attacker.(*net.TCPConn).SetReadBuffer(64 << 10)
			var req []byte
			for range 200 {
				req = append(req, encodeCommand("GET", "big")...)
			}
			go attacker.Write(req)
			pollFor(t, "the attacker closed", 30*time.Second, 20*time.Millisecond, func() error {
				if v := infoOf(t, ctl, "stats", "client_output_buffer_limit_disconnections"); v != "1" {
					return fmt.Errorf("client_output_buffer_limit_disconnections = %s", v)
				}
				return nil
			})
			if v := reader.Do("PING"); string(v.Raw) != "+PONG\r\n" {
				t.Fatalf("another client after the attack: PING = %s", v)
			}
		})
	}
}

// TestMaxClientsFlood opens 20,000 connections, twice the default maxclients
// (10000): every one beyond it gets Redis's error and is closed, the
// server goes on answering the ones it took, and a closed one makes room.
func TestMaxClientsFlood(t *testing.T) {
	// 20,000 connections, as the attack has it: the first
	// 10,000 are held, and each of the rest is refused and closed in turn,
	// so the test holds no more than maxclients at once.
	const maxclients, extra = 10000, 10000
	if lim := openFileLimit(); lim < maxclients+500 {
		t.Skipf("the open-file limit (%d) is too low to hold %d connections", lim, maxclients)
	}
	n := startKVS(t, KVSOptions{})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < maxclients {
		c, err := net.DialTimeout("tcp", n.Addr, ioTimeout)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	// The harness's readiness PINGs may still count for a moment: every
	// connection past maxclients is refused once they are gone.
	pollFor(t, "the server full", 10*time.Second, 20*time.Millisecond, func() error {
		got := sendAndCollect(t, n.Addr, encodeCommand("PING"))
		if got != "-ERR max number of clients reached\r\n" {
			return fmt.Errorf("connection %d got %q", maxclients+1, got)
		}
		return nil
	})
	for i := range extra {
		if got := sendAndCollect(t, n.Addr, encodeCommand("PING")); got != "-ERR max number of clients reached\r\n" {
			t.Fatalf("connection %d got %q", maxclients+2+i, got)
		}
	}
	for _, i := range []int{0, maxclients / 2, maxclients - 1} {
		c := conns[i]
		c.SetDeadline(time.Now().Add(ioTimeout))
		c.Write(encodeCommand("PING"))
		b := make([]byte, 7)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "+PONG\r\n" {
			t.Fatalf("accepted connection %d: PING = %q, %v", i+1, b, err)
		}
	}
	conns[0].Close()
	conns = conns[1:]
	pollFor(t, "room for one more", 10*time.Second, 20*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", n.Addr, ioTimeout)
		if err != nil {
			return err
		}
		c.SetDeadline(time.Now().Add(ioTimeout))
		c.Write(encodeCommand("PING"))
		b := make([]byte, 7)
		_, err = io.ReadFull(c, b)
		if err == nil && string(b) == "+PONG\r\n" {
			conns = append(conns, c)
			return nil
		}
		c.Close()
		return fmt.Errorf("got %q, %v", b, err)
	})
}
