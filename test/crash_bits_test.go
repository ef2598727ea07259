package test

import (
	"bufio"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// bitsLedger records what the bit writers were told. Writer w owns the
// keys bits:{w} (SETBIT of bit i at step i), ctr:{w} (BITFIELD SET of
// the step count, which a step repeated after a crash sets again) and
// cp:{w} (a COPY of bits:{w} every 16 steps).
type bitsLedger struct {
	mu sync.Mutex
	// acked[w] is the number of steps writer w saw acknowledged; inFlight
	// is true when a step was sent and no reply came (it may or may not
	// have been applied).
	acked    []int
	inFlight []bool
}

func newBitsLedger(writers int) *bitsLedger {
	return &bitsLedger{acked: make([]int, writers), inFlight: make([]bool, writers)}
}

func (l *bitsLedger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.acked {
		n += a
	}
	return n
}

func bitsKey(prefix string, w int) string { return prefix + ":{" + strconv.Itoa(w) + "}" }

// load runs every writer until stop is closed or its connection fails.
func (l *bitsLedger) load(t *testing.T, addr string, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for w := range l.acked {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			t.Fatalf("writer %d: dial: %v", w, err)
		}
		rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			l.write(rc, w, stop)
		}()
	}
	wg.Wait()
}

// write sends step after step: SETBIT, then the counter, then (every 16th
// step) the COPY, pipelined as one request, acknowledged by all three
// replies.
func (l *bitsLedger) write(rc *rawConn, w int, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		l.mu.Lock()
		i := l.acked[w]
		l.inFlight[w] = true
		l.mu.Unlock()
		req := encodeCommand("SETBIT", bitsKey("bits", w), strconv.Itoa(i), "1")
		req = append(req, encodeCommand("BITFIELD", bitsKey("ctr", w), "SET", "u32", "0", strconv.Itoa(i+1))...)
		n := 2
		if i%16 == 15 {
			req = append(req, encodeCommand("COPY", bitsKey("bits", w), bitsKey("cp", w), "REPLACE")...)
			n++
		}
		if rc.write(req) != nil {
			return
		}
		for range n {
			v, err := rc.read()
			if err != nil || v.IsError() {
				return // killed mid-step: the step stays in flight
			}
		}
		l.mu.Lock()
		l.acked[w]++
		l.inFlight[w] = false
		l.mu.Unlock()
	}
}

// verify checks every writer's keys on n: bits 0 to acked-1 set (and the
// in-flight one at most), the counter at acked (or one more), the copy at
// least as far as the last acknowledged COPY. The writers then go on from
// the step the store holds.
func (l *bitsLedger) verify(t *testing.T, n *Node) {
	t.Helper()
	rc := dialRaw(t, n.Addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	for w, acked := range l.acked {
		slack := 0
		if l.inFlight[w] {
			slack = 1
		}
		steps, err := checkBitsWriter(rc, w, acked, slack)
		if err != nil {
			t.Errorf("writer %d (%d steps acknowledged): %v", w, acked, err)
		}
		l.acked[w], l.inFlight[w] = int(steps), false
	}
}

// checkBitsWriter checks writer w's keys and returns the steps they show.
func checkBitsWriter(rc *rawConn, w, acked, slack int) (int64, error) {
	key := bitsKey("bits", w)
	count := rc.Do("BITCOUNT", key)
	first0 := rc.Do("BITPOS", key, "0")
	got := atoi64(count.Str)
	if got < int64(acked) || got > int64(acked+slack) || atoi64(first0.Str) != got {
		return got, fmt.Errorf("%s: BITCOUNT %s, first 0 bit at %s", key, count.Str, first0.Str)
	}
	ctr := rc.Do("BITFIELD", bitsKey("ctr", w), "GET", "u32", "0")
	if len(ctr.Elems) != 1 || atoi64(ctr.Elems[0].Str) < int64(acked) || atoi64(ctr.Elems[0].Str) > int64(acked+slack) {
		return got, fmt.Errorf("counter %s, want %d to %d", ctr, acked, acked+slack)
	}
	copied := atoi64(rc.Do("BITCOUNT", bitsKey("cp", w)).Str)
	if want := int64(acked / 16 * 16); copied < want || copied > got {
		return got, fmt.Errorf("copy holds %d bits, want %d to %d", copied, want, got)
	}
	return got, nil
}

// TestCrashBits: bit writers against a durable node (fsync always), kill
// -9 at a random moment, restart: every acknowledged SETBIT, BITFIELD and
// COPY is there with the right content, round after round, and after a
// graceful restart.
func TestCrashBits(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	for _, v := range walVariants {
		t.Run(v.name, func(t *testing.T) {
			n := newKVS(t, "kvs-bits", KVSOptions{Durable: true, Fsync: "always", Extra: v.extra})
			n.Start()
			ledger := newBitsLedger(8)
			for round := range 3 {
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					ledger.load(t, n.Addr, stop)
				}()
				time.Sleep(time.Duration(200+rng.Intn(600)) * time.Millisecond) // load for a random while; not synchronisation
				n.Kill()
				close(stop)
				<-done
				n.Start()
				ledger.verify(t, n)
				t.Logf("round %d: %d steps acknowledged in all", round, ledger.total())
				if t.Failed() {
					t.Fatalf("round %d lost acknowledged bit writes\n%s", round, n.LogTail(30))
				}
			}
			n.Restart()
			ledger.verify(t, n)
		})
	}
}

// TestClusterBits writes bits on the leader and checks a follower ends
// with the same content, and that CLUSTER COUNTKEYSINSLOT and
// GETKEYSINSLOT answer from the slot-ordered keyspace on every node.
func TestClusterBits(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	rc := dialRaw(t, leader.Addr)
	for i := range 200 {
		w := i % 5
		rc.DoRetry("SETBIT", bitsKey("bits", w), strconv.Itoa(i), "1")
		rc.DoRetry("BITFIELD", bitsKey("ctr", w), "SET", "u32", "0", strconv.Itoa(i))
		if i%16 == 15 {
			rc.DoRetry("COPY", bitsKey("bits", w), bitsKey("cp", w), "REPLACE")
		}
	}
	rc.DoRetry("BITOP", "XOR", "xor", bitsKey("bits", 0), bitsKey("bits", 1))
	want := map[string]string{}
	for _, k := range rc.Do("KEYS", "*").Elems {
		want[k.Str] = rc.Do("GET", k.Str).Str
	}
	for _, f := range followers(nodes, leader) {
		waitFor(t, "the bits on "+f.Name, func() error {
			fc := dialRaw(t, f.Addr)
			for k, v := range want {
				if got := fc.Do("GET", k); got.Str != v {
					return fmt.Errorf("%s: GET %s = %q, want %q", f.Name, k, got.Str, v)
				}
			}
			return nil
		})
	}
	// The keys of one hash tag share a slot: bits:{0}, ctr:{0}, cp:{0}.
	slot := rc.Do("CLUSTER", "KEYSLOT", "{0}").Str
	for _, n := range nodes {
		c := dialRaw(t, n.Addr)
		if v := c.Do("CLUSTER", "COUNTKEYSINSLOT", slot); v.Str != "3" {
			t.Errorf("%s: COUNTKEYSINSLOT %s = %s, want 3", n.Name, slot, v)
		}
		got := map[string]bool{}
		for _, e := range c.Do("CLUSTER", "GETKEYSINSLOT", slot, "10").Elems {
			got[e.Str] = true
		}
		if len(got) != 3 || !got["bits:{0}"] || !got["ctr:{0}"] || !got["cp:{0}"] {
			t.Errorf("%s: GETKEYSINSLOT %s = %v", n.Name, slot, got)
		}
		if v := c.Do("CLUSTER", "GETKEYSINSLOT", slot, "2"); len(v.Elems) != 2 {
			t.Errorf("%s: GETKEYSINSLOT %s 2 = %s", n.Name, slot, v)
		}
		for _, bad := range [][]string{{"COUNTKEYSINSLOT", "16384"}, {"COUNTKEYSINSLOT", "x"},
			{"GETKEYSINSLOT", "1", "-1"}} {
			if v := c.Do(append([]string{"CLUSTER"}, bad...)...); !v.IsError() {
				t.Errorf("%s: CLUSTER %v = %s, want an error", n.Name, bad, v)
			}
		}
	}
}
