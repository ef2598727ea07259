package test

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"

	"kvs/internal/testwait"
)

// Blocking commands end to end: order of service, timeouts, BLMOVE,
// pipelines that wait, disconnects, CLIENT UNBLOCK, and in a cluster a
// client blocked on a follower and a leader killed while clients wait.
// No test sleeps to synchronise: a client is known to be blocked when
// INFO's blocked_clients counts it.

// blockingModes are the ways one node serves a blocked client: the event
// loops in memory and durable mode, a goroutine per connection, and the
// event loops of a cluster node, whose pops are Raft rounds run off the
// loop.
var blockingModes = []blockingMode{
	{name: "memory", opts: KVSOptions{}},
	{name: "durable", opts: KVSOptions{Durable: true, Fsync: "always"}},
	{name: "goroutines", opts: KVSOptions{Durable: true, Fsync: "always", Extra: []string{"--io", "goroutines"}}},
	{name: "cluster", cluster: true},
}

type blockingMode struct {
	name    string
	opts    KVSOptions
	cluster bool // a one-node cluster, opts unused
}

// start starts a node serving blocked clients as m says.
func (m blockingMode) start(t *testing.T) *Node {
	t.Helper()
	if m.cluster {
		return waitLeader(t, startCluster(t, 1))
	}
	return startKVS(t, m.opts)
}

// waitBlocked waits until addr's INFO reports n blocked clients.
func waitBlocked(t testing.TB, addr string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d blocked clients on %s", n, addr), func() error {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
		v, err := rc.do("INFO", "clients")
		if err != nil {
			return err
		}
		want := fmt.Sprintf("blocked_clients:%d\r\n", n)
		if !strings.Contains(v.Str, want) {
			return fmt.Errorf("INFO clients: %q", v.Str)
		}
		return nil
	})
}

// send writes a command without reading its reply.
func (c *rawConn) send(args ...string) { c.Write(string(encodeCommand(args...))) }

func TestBlockingOrder(t *testing.T) {
	for _, m := range blockingModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			n := m.start(t)
			var clients []*rawConn
			for i := range 3 {
				c := dialRaw(t, n.Addr)
				c.send("BLPOP", "nothing", "q", "0")
				waitBlocked(t, n.Addr, i+1)
				clients = append(clients, c)
			}
			// One push of three elements serves all three, in the order
			// they blocked.
			if v := dialRaw(t, n.Addr).Do("RPUSH", "q", "e1", "e2", "e3"); v.Str != "3" {
				t.Fatalf("RPUSH: %s", v)
			}
			for i, c := range clients {
				want := fmt.Sprintf("*2\r\n$1\r\nq\r\n$2\r\ne%d\r\n", i+1)
				if v := c.Read(); string(v.Raw) != want {
					t.Fatalf("client %d got %s, want %q", i, v, want)
				}
			}
			// One element for two waiters: the first gets it, the second
			// waits on, first in line for the next.
			a, b := dialRaw(t, n.Addr), dialRaw(t, n.Addr)
			a.send("BRPOP", "q", "0")
			waitBlocked(t, n.Addr, 1)
			b.send("BRPOP", "q", "0")
			waitBlocked(t, n.Addr, 2)
			dialRaw(t, n.Addr).Do("LPUSH", "q", "one")
			if v := a.Read(); string(v.Raw) != "*2\r\n$1\r\nq\r\n$3\r\none\r\n" {
				t.Fatalf("first waiter got %s", v)
			}
			waitBlocked(t, n.Addr, 1)
			dialRaw(t, n.Addr).Do("LPUSH", "q", "two")
			if v := b.Read(); string(v.Raw) != "*2\r\n$1\r\nq\r\n$3\r\ntwo\r\n" {
				t.Fatalf("second waiter got %s", v)
			}
		})
	}
}

func TestBlockingTimeouts(t *testing.T) {
	for _, m := range blockingModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			n := m.start(t)
			c := dialRaw(t, n.Addr)
			for _, cmd := range [][]string{
				{"BLPOP", "q", "0.1"},
				{"BRPOP", "q", "r", ".05"},
				{"BLMOVE", "q", "r", "LEFT", "RIGHT", "0.1"},
				{"BRPOPLPUSH", "q", "r", "0.01"},
				{"BLMPOP", "0.1", "2", "q", "r", "LEFT", "COUNT", "3"},
			} {
				if v := c.Do(cmd...); string(v.Raw) != "*-1\r\n" {
					t.Errorf("%v: got %s, want the null array", cmd, v)
				}
			}
			r3 := dialRaw(t, n.Addr)
			if v := r3.Do("HELLO", "3"); v.Kind != '%' {
				t.Fatalf("HELLO 3: %s", v)
			}
			if v := r3.Do("BLPOP", "q", "0.1"); string(v.Raw) != "_\r\n" {
				t.Errorf("RESP3 BLPOP timeout: got %s, want _", v)
			}
			for _, tc := range []struct{ timeout, want string }{
				{"-1", "-ERR timeout is negative\r\n"},
				{"abc", "-ERR timeout is not a float or out of range\r\n"},
				{"inf", "-ERR timeout is negative\r\n"},
			} {
				if v := c.Do("BLPOP", "q", tc.timeout); string(v.Raw) != tc.want {
					t.Errorf("BLPOP q %s: got %s, want %q", tc.timeout, v, tc.want)
				}
			}
			// 0 waits until served, however long that takes.
			c.send("BLPOP", "q", "0")
			waitBlocked(t, n.Addr, 1)
			dialRaw(t, n.Addr).Do("RPUSH", "q", "late")
			if v := c.Read(); string(v.Raw) != "*2\r\n$1\r\nq\r\n$4\r\nlate\r\n" {
				t.Fatalf("BLPOP q 0: %s", v)
			}
			// CLIENT UNBLOCK answers a blocked client as a timeout, or
			// with an error.
			id := c.Do("CLIENT", "ID").Str
			other := dialRaw(t, n.Addr)
			if v := other.Do("CLIENT", "UNBLOCK", id); v.Str != "0" {
				t.Fatalf("CLIENT UNBLOCK of a client not blocked: %s", v)
			}
			for _, tc := range []struct{ how, want string }{
				{"TIMEOUT", "*-1\r\n"},
				{"ERROR", "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"},
			} {
				c.send("BLPOP", "q", "0")
				waitBlocked(t, n.Addr, 1)
				if v := other.Do("CLIENT", "UNBLOCK", id, tc.how); v.Str != "1" {
					t.Fatalf("CLIENT UNBLOCK %s: %s", tc.how, v)
				}
				if v := c.Read(); string(v.Raw) != tc.want {
					t.Fatalf("unblocked with %s: got %s, want %q", tc.how, v, tc.want)
				}
			}
		})
	}
}

// TestBlockingPipeline: requests pipelined after a blocking command run
// only once it is served; a client that hangs up while blocked leaves the
// queue without taking an element.
func TestBlockingPipeline(t *testing.T) {
	for _, m := range blockingModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			n := m.start(t)
			c := dialRaw(t, n.Addr)
			c.Write(string(encodeCommand("SET", "before", "1")) + string(encodeCommand("BLMOVE", "src", "dst", "RIGHT", "LEFT", "0")) +
				string(encodeCommand("SET", "after", "1")))
			waitBlocked(t, n.Addr, 1)
			o := dialRaw(t, n.Addr)
			if v := o.Do("GET", "after"); !v.Null {
				t.Fatalf("a command pipelined after a blocked BLMOVE ran: %s", v)
			}
			o.Do("RPUSH", "src", "a", "b")
			for _, want := range []string{"+OK\r\n", "$1\r\nb\r\n", "+OK\r\n"} {
				if v := c.Read(); string(v.Raw) != want {
					t.Fatalf("got %s, want %q", v, want)
				}
			}
			if v := o.Do("LRANGE", "dst", "0", "-1"); string(v.Raw) != "*1\r\n$1\r\nb\r\n" {
				t.Fatalf("dst: %s", v)
			}

			gone := dialRaw(t, n.Addr)
			gone.send("BLPOP", "left", "0")
			waitBlocked(t, n.Addr, 1)
			gone.c.Close()
			waitBlocked(t, n.Addr, 0)
			o.Do("RPUSH", "left", "kept")
			if v := o.Do("LRANGE", "left", "0", "-1"); string(v.Raw) != "*1\r\n$4\r\nkept\r\n" {
				t.Fatalf("a disconnected waiter took the element: %s", v)
			}
		})
	}
}

// TestBlockingFollower: a client blocked on a follower is served by a push
// on the leader; its pop goes to the leader like any write.
func TestBlockingFollower(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	c := dialRaw(t, f.Addr)
	c.send("BLPOP", "q", "0")
	waitBlocked(t, f.Addr, 1)
	lc := dialRaw(t, leader.Addr)
	if v := lc.DoRetry("RPUSH", "q", "x", "y"); v.Str != "2" {
		t.Fatalf("RPUSH on the leader: %s", v)
	}
	if v := c.Read(); string(v.Raw) != "*2\r\n$1\r\nq\r\n$1\r\nx\r\n" {
		t.Fatalf("blocked follower client: %s", v)
	}
	waitFor(t, "the pop on every node", func() error {
		for _, n := range nodes {
			if v := dialRaw(t, n.Addr).Do("LRANGE", "q", "0", "-1"); string(v.Raw) != "*1\r\n$1\r\ny\r\n" {
				return fmt.Errorf("%s: %s", n.Name, v)
			}
		}
		return nil
	})
}

// TestBlockingLeaderKill: with clients blocked on every node, the leader
// is killed. Its clients lose their connections (an error they retry on);
// the followers' clients wait on and are served by pushes through the new
// leader. No element is lost or served twice: pushed = popped + remaining.
func TestBlockingLeaderKill(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	type waiting struct {
		c    *rawConn
		node *Node
	}
	var clients []waiting
	for _, n := range nodes {
		for i := range 2 {
			c := dialRaw(t, n.Addr)
			c.send("BLPOP", "jobs", "0")
			waitBlocked(t, n.Addr, i+1)
			clients = append(clients, waiting{c, n})
		}
	}
	leader.Kill()
	newLeader := waitLeader(t, nodes)
	pushed := []string{"j1", "j2", "j3", "j4", "j5", "j6"}
	lc := dialRaw(t, newLeader.Addr)
	for _, j := range pushed {
		if v := lc.DoRetry("RPUSH", "jobs", j); v.IsError() {
			t.Fatalf("RPUSH %s: %s", j, v)
		}
	}
	var popped []string
	for _, w := range clients {
		v, err := w.c.read()
		switch {
		case w.node == leader:
			if err == nil && !v.IsError() {
				t.Errorf("a client of the killed leader got %s", v)
			}
		case err != nil:
			t.Errorf("a client of %s: %v", w.node.Name, err)
		case v.IsError():
			// An error it can retry on; the element stays in the list.
			if !isRetryable(v.Str) {
				t.Errorf("a client of %s got a non-retryable error %s", w.node.Name, v)
			}
		case len(v.Elems) == 2:
			popped = append(popped, v.Elems[1].Str)
		default:
			t.Errorf("a client of %s got %s", w.node.Name, v)
		}
	}
	remaining := lc.DoRetry("LRANGE", "jobs", "0", "-1")
	got := append([]string{}, popped...)
	for _, e := range remaining.Elems {
		got = append(got, e.Str)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(pushed, ",") {
		t.Fatalf("pushed %v; popped %v and remaining %v", pushed, popped, remaining)
	}
	if len(popped) != 4 {
		t.Fatalf("%d of the followers' 4 blocked clients were served: %v", len(popped), popped)
	}
}

// isRetryable reports whether an error reply tells a client to try again.
func isRetryable(text string) bool {
	for _, p := range []string{"TRYAGAIN", "CLUSTERDOWN", "MOVED", "LOADING"} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// TestBlockingRename: a list renamed onto the key a client waits on
// serves it, as in Redis.
func TestBlockingRename(t *testing.T) {
	n := startKVS(t, KVSOptions{})
	c := dialRaw(t, n.Addr)
	c.send("BLPOP", "target", "0")
	waitBlocked(t, n.Addr, 1)
	o := dialRaw(t, n.Addr)
	o.Do("RPUSH", "source", "moved")
	o.Do("RENAME", "source", "target")
	if v := c.Read(); string(v.Raw) != "*2\r\n$6\r\ntarget\r\n$5\r\nmoved\r\n" {
		t.Fatalf("BLPOP after RENAME onto its key: %s", v)
	}
}

// flagBlockedArrivalRounds is how many rounds TestBlockedArrivalOrder plays.
var flagBlockedArrivalRounds = flag.Int("blocking.arrival.rounds", 200, "rounds of TestBlockedArrivalOrder per mode")

// TestBlockedArrivalOrder is unit/type/list's "BRPOPLPUSH with multiple
// blocked clients" over many rounds, on fresh connections each time so
// that they land on different event loops: two pops sent one after the
// other, then a push, none waited for. Redis serves them in the order they
// were sent: the first pop gets WRONGTYPE (its destination is a string),
// the second the element. A second pop that overtook the first would take
// the element and leave the first blocked for ever.
func TestBlockedArrivalOrder(t *testing.T) {
	onTargets(t, []target{targetRedis, targetMemory, targetOneNodeCluster, targetSharded}, func(t *testing.T, n *Node) {
		r := dialRaw(t, n.Addr)
		for i := range *flagBlockedArrivalRounds {
			list, t1, t2 := fmt.Sprintf("blist%d{t}", i), fmt.Sprintf("target1:%d{t}", i), fmt.Sprintf("target2:%d{t}", i)
			if v := r.Do("SET", t1, "nolist"); v.IsError() {
				t.Fatalf("SET: %s", v.Str)
			}
			rd1, rd2 := dialRaw(t, n.Addr), dialRaw(t, n.Addr)
			// Each request is in the server's socket before the next is
			// sent (delivered): the server has read none of them.
			rd1.send("BRPOPLPUSH", list, t1, "0")
			testwait.Delivered(t, rd1.c)
			rd2.send("BRPOPLPUSH", list, t2, "0")
			testwait.Delivered(t, rd2.c)
			r.send("LPUSH", list, "foo")
			if v := r.Read(); v.Str != "1" {
				t.Fatalf("round %d: LPUSH: %+v", i, v)
			}
			// A pop left blocked shows as an I/O timeout here.
			if v := rd1.Read(); !v.IsError() || !strings.HasPrefix(v.Str, "WRONGTYPE") {
				t.Fatalf("round %d: the first pop got %+v, want WRONGTYPE", i, v)
			}
			if v := rd2.Read(); v.Str != "foo" {
				t.Fatalf("round %d: the second pop got %+v, want foo", i, v)
			}
			rd1.c.Close()
			rd2.c.Close()
		}
	})
}

// TestPushWaitsForEarlierExec is unit/type/list's "BRPOPLPUSH does not
// affect WATCH while still blocked" over many rounds: a transaction
// watching the list a blocked BRPOPLPUSH pushes to sends EXEC, and then
// another client's push serves the BRPOPLPUSH. The EXEC arrived first, so
// it runs first and is not aborted, as in Redis, whichever event loops
// the connections landed on.
func TestPushWaitsForEarlierExec(t *testing.T) {
	onTargets(t, []target{targetRedis, targetMemory}, func(t *testing.T, n *Node) {
		r := dialRaw(t, n.Addr)
		for i := range *flagBlockedArrivalRounds {
			src, dst, other := fmt.Sprintf("src%d{t}", i), fmt.Sprintf("dst%d{t}", i), fmt.Sprintf("other%d{t}", i)
			if v := r.Do("SET", other, "somevalue"); v.IsError() {
				t.Fatalf("SET: %s", v.Str)
			}
			blocked, watching := dialRaw(t, n.Addr), dialRaw(t, n.Addr)
			blocked.send("BRPOPLPUSH", src, dst, "0")
			waitBlocked(t, n.Addr, 1)
			for _, c := range [][]string{{"WATCH", dst}, {"MULTI"}, {"GET", other}} {
				if v := watching.Do(c...); v.IsError() {
					t.Fatalf("round %d: %s: %s", i, c[0], v.Str)
				}
			}
			watching.send("EXEC")
			testwait.Delivered(t, watching.c)
			if v := r.Do("LPUSH", src, "element"); v.Str != "1" {
				t.Fatalf("round %d: LPUSH: %+v", i, v)
			}
			if v := watching.Read(); len(v.Elems) != 1 || v.Elems[0].Str != "somevalue" {
				t.Fatalf("round %d: EXEC got %+v, want [somevalue]: the push ran before it", i, v)
			}
			if v := blocked.Read(); v.Str != "element" {
				t.Fatalf("round %d: BRPOPLPUSH got %+v", i, v)
			}
			blocked.c.Close()
			watching.c.Close()
		}
	})
}

// TestPushServesBeforeNextCommand is unit/type/list's "Linked LMOVEs" over
// many rounds: a push that wakes a BLMOVE whose move wakes another has
// served both before the pushing client's next command runs, as in Redis,
// whichever event loops the three connections landed on.
func TestPushServesBeforeNextCommand(t *testing.T) {
	for _, m := range blockingModes {
		if m.name == "goroutines" {
			continue // a goroutine per connection does not hold the next command
		}
		t.Run(m.name, func(t *testing.T) {
			n := m.start(t)
			r := dialRaw(t, n.Addr)
			for i := range 50 {
				l1, l2, l3 := fmt.Sprintf("l1:%d{t}", i), fmt.Sprintf("l2:%d{t}", i), fmt.Sprintf("l3:%d{t}", i)
				rd1, rd2 := dialRaw(t, n.Addr), dialRaw(t, n.Addr)
				rd1.send("BLMOVE", l1, l2, "RIGHT", "LEFT", "0")
				waitBlocked(t, n.Addr, 1)
				rd2.send("BLMOVE", l2, l3, "LEFT", "RIGHT", "0")
				waitBlocked(t, n.Addr, 2)
				if v := r.Do("RPUSH", l1, "foo"); v.Str != "1" {
					t.Fatalf("round %d: RPUSH: %+v", i, v)
				}
				for _, want := range []struct{ key, elems string }{{l1, ""}, {l2, ""}, {l3, "foo"}} {
					v := r.Do("LRANGE", want.key, "0", "-1")
					var got []string
					for _, e := range v.Elems {
						got = append(got, e.Str)
					}
					if strings.Join(got, " ") != want.elems {
						t.Fatalf("round %d: LRANGE %s = %q, want %q", i, want.key, got, want.elems)
					}
				}
				rd1.Read()
				rd2.Read()
				rd1.c.Close()
				rd2.c.Close()
			}
		})
	}
}
