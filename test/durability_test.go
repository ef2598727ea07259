package test

import (
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"
)

// restartScript writes a bit of everything whose effect must survive a
// restart in durable mode: overwrites, deletes, renames, counters, appends
// and expiries (a long one kept, a past one already applied).
var restartScript = []respCase{
	c("+OK\r\n", "SET", "a", "1"),
	c("+OK\r\n", "SET", "a", "2"),
	c("+OK\r\n", "SET", "gone", "x"),
	c(":1\r\n", "DEL", "gone"),
	c("+OK\r\n", "SET", "old", "moved"),
	c("+OK\r\n", "RENAME", "old", "new"),
	c(":5\r\n", "INCRBY", "ctr", "5"),
	c(":3\r\n", "APPEND", "s", "abc"),
	c(":6\r\n", "APPEND", "s", "def"),
	c(":6\r\n", "SETRANGE", "s", "0", "X"),
	c("+OK\r\n", "SET", "ttl", "v", "EX", "3600"),
	c("+OK\r\n", "SET", "exat", "v", "EXAT", "4000000000"),
	c("+OK\r\n", "SET", "past", "v"),
	c(":1\r\n", "PEXPIREAT", "past", "1000"),
	c("+OK\r\n", "SET", "persisted", "v", "EX", "100"),
	c(":1\r\n", "PERSIST", "persisted"),
	c("$3\r\n2.5\r\n", "INCRBYFLOAT", "f", "2.5"),
}

// restartCheck is what a durable node must answer after any restart.
var restartCheck = []respCase{
	c("$1\r\n2\r\n", "GET", "a"),
	c(":0\r\n", "EXISTS", "gone", "old", "past"),
	c("$5\r\nmoved\r\n", "GET", "new"),
	c("$1\r\n5\r\n", "GET", "ctr"),
	c("$6\r\nXbcdef\r\n", "GET", "s"),
	c(":4000000000\r\n", "EXPIRETIME", "exat"),
	c(":-1\r\n", "TTL", "persisted"),
	c(":8\r\n", "DBSIZE"),
}

func runScript(t testing.TB, rc *rawConn, script []respCase) {
	t.Helper()
	for _, tc := range script {
		if got := rc.Do(tc.cmd...); string(got.Raw) != tc.want {
			t.Errorf("%s\n got %q\nwant %q", showCommand(tc.cmd), got.Raw, tc.want)
		}
	}
}

// TestRestart: SIGTERM exits 0; a durable node comes back with every
// write, twice over (the second start replays a log the first one already
// recovered); a memory node comes back empty.
func TestRestart(t *testing.T) {
	t.Run("redis-reference", func(t *testing.T) {
		// Without a restart the check must hold on Redis too: this keeps
		// the expected replies honest.
		t.Parallel()
		rc := dialRaw(t, startRedis(t).Addr)
		runScript(t, rc, restartScript)
		runScript(t, rc, restartCheck)
	})
	t.Run("durable", func(t *testing.T) {
		t.Parallel()
		n := startKVS(t, KVSOptions{Durable: true})
		runScript(t, dialRaw(t, n.Addr), restartScript)
		for i := 0; i < 2; i++ {
			n.Restart()
			rc := dialRaw(t, n.Addr)
			runScript(t, rc, restartCheck)
			if ttl := rc.Do("TTL", "ttl"); ttl.Kind != ':' || atoi64(ttl.Str) < 3000 || atoi64(ttl.Str) > 3600 {
				t.Errorf("restart %d: TTL ttl = %s, want about 3600", i, ttl)
			}
		}
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		n := startKVS(t, KVSOptions{})
		runScript(t, dialRaw(t, n.Addr), restartScript)
		n.Restart()
		if v := dialRaw(t, n.Addr).Do("DBSIZE"); string(v.Raw) != ":0\r\n" {
			t.Fatalf("memory mode kept data across a restart: DBSIZE %s", v)
		}
	})
}

// TestExpiryAcrossRestart: a deadline that passes while the node is down
// still holds when it comes back.
func TestExpiryAcrossRestart(t *testing.T) {
	t.Parallel()
	n := startKVS(t, KVSOptions{Durable: true})
	rc := dialRaw(t, n.Addr)
	// PXAT carries whole milliseconds, so that is the deadline the server
	// holds: a key may expire up to 1 ms before a nanosecond-precise one.
	deadline := time.UnixMilli(time.Now().Add(1500 * time.Millisecond).UnixMilli())
	runScript(t, rc, []respCase{
		c("+OK\r\n", "SET", "short", "v", "PXAT", itoa(int(deadline.UnixMilli()))),
		c("+OK\r\n", "SET", "long", "v", "EX", "3600"),
	})
	n.Restart()
	rc = dialRaw(t, n.Addr)
	for time.Now().Before(deadline.Add(10 * time.Second)) {
		v := rc.Do("EXISTS", "short")
		if string(v.Raw) == ":0\r\n" {
			if time.Now().Before(deadline) {
				t.Fatalf("key expired before its deadline")
			}
			runScript(t, rc, []respCase{c("$1\r\nv\r\n", "GET", "long")})
			return
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	t.Fatalf("key still present 10s after its deadline")
}

// TestGracefulStopUnderLoad: SIGTERM while clients are writing finishes
// in-flight commands, flushes the log and exits 0; nothing acknowledged
// is lost.
func TestGracefulStopUnderLoad(t *testing.T) {
	t.Parallel()
	n := startKVS(t, KVSOptions{Durable: true, Fsync: "always"})
	ledger := newAckLedger(crashWriters)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ledger.load(t, n.Addr, 0, stop)
	}()
	// Stop only once writes are flowing, so there are commands in flight.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ledger.mu.Lock()
		acked := len(ledger.acked)
		ledger.mu.Unlock()
		if acked >= 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d writes acknowledged in 10s", acked)
		}
	}
	n.Stop()
	close(stop)
	<-done
	n.Start()
	ledger.verify(t, n, true)
	t.Logf("%d SETs acknowledged of %d sent", len(ledger.acked), ledger.attempted)
}

// TestTakenPort: serve on a port that is in use fails at once, non-zero,
// with a message an operator recognises.
func TestTakenPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, code := runKVS(t, startTimeout, "serve", "--addr", l.Addr().String())
	if code == 0 {
		t.Fatalf("serve on a taken port exited 0; output:\n%s", out)
	}
	if !strings.Contains(out, "address already in use") {
		t.Fatalf("serve on a taken port (exit %d) does not say \"address already in use\":\n%s", code, out)
	}
}

// TestLargeValues: binary values (CR LF and NUL inside) up to a few MB are
// stored and returned intact, and survive a restart in durable mode.
func TestLargeValues(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		rng := rand.New(rand.NewSource(1))
		sizes := []int{0, 1, 65536, 4 << 20}
		vals := make([]string, len(sizes))
		rc := dialRaw(t, n.Addr)
		for i, size := range sizes {
			b := make([]byte, size)
			rng.Read(b)
			if size > 2 {
				copy(b, "\r\n\x00")
			}
			vals[i] = string(b)
			if v := rc.Do("SET", "big"+itoa(i), vals[i]); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("SET of %d bytes: %s", size, v)
			}
		}
		check := func(when string) {
			rc := dialRaw(t, n.Addr)
			for i, want := range vals {
				if v := rc.Do("GET", "big"+itoa(i)); v.Kind != '$' || v.Str != want {
					t.Fatalf("%s: GET of a %d-byte value returned %d bytes (%.40q)", when, len(want), len(v.Str), v.Raw)
				}
			}
		}
		check("before restart")
		if strings.HasPrefix(n.Name, "kvs-durable") {
			n.Restart()
			check("after restart")
		}
	})
}
