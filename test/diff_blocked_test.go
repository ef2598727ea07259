package test

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

var flagBlockedRounds = flag.Int("blocked.rounds", 60, "scenarios per type and mode in TestDifferentialBlocked")

// TestDifferentialBlocked plays the same random scenarios of several
// clients blocked at once to kvs and to redis-server and requires the same
// replies: clients block one after another on lists or sorted sets (each
// known blocked before the next sends, as Redis's own tests do), some with
// destinations that hold another type, some with counts; then a control
// connection writes, one command at a time, pushes and ZADDs (alone or
// several in MULTI), type changes and deletions; at the end, the clients
// still blocked are released with CLIENT UNBLOCK. Every waiter's reply, the
// replies to the writes and to CLIENT UNBLOCK, and the keys are compared;
// the waiters and the control connection speak RESP2 or RESP3 at random.
//
// Redis serves blocked clients inside the write that makes a key ready;
// kvs serves them just after, through its write path. So after each write
// the run waits until kvs counts as many blocked clients as redis-server
// did (a kvs that serves fewer or more never gets there, and the scenario
// then fails with the counts).
func TestDifferentialBlocked(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	seed := testSeed(t)
	modes := []struct {
		name    string
		opts    KVSOptions
		cluster bool
	}{
		{"memory", KVSOptions{}, false},
		{"durable", KVSOptions{Durable: true, Fsync: "always"}, false},
		{"goroutines", KVSOptions{Durable: true, Fsync: "always", Extra: []string{"--io", "goroutines"}}, false},
		// Waiters on a follower, woken by the writes it forwards to the
		// leader and applies after it.
		{"cluster-follower", KVSOptions{}, true},
	}
	gens := []struct {
		name string
		gen  func(g *cmdGen) blockedScenario
	}{
		{"list", genBlockedList},
		{"zset", genBlockedZSet},
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ref := startRedis(t)
			var kvs *Node
			if m.cluster {
				nodes := startCluster(t, 3, "--reads", "linearizable")
				kvs = followers(nodes, waitLeader(t, nodes))[0]
			} else {
				kvs = newKVS(t, "kvs", m.opts)
				kvs.Start()
			}
			for j, gn := range gens {
				g := newCmdGen(seed + int64(10*i+j))
				for round := range *flagBlockedRounds {
					sc := gn.gen(g)
					want := runBlocked(t, ref, sc, nil)
					if want == nil {
						t.Fatalf("%s round %d: redis-server did not block every waiter\n%s", gn.name, round, sc)
					}
					got := runBlocked(t, kvs, sc, want.blocked)
					if got == nil {
						if m.cluster {
							t.Logf("%s round %d: a leader change; scenario skipped", gn.name, round)
							continue
						}
						t.Fatalf("%s round %d: kvs did not block every waiter\n%s", gn.name, round, sc)
					}
					if d := firstDifference(want.lines, got.lines); d >= 0 {
						t.Fatalf("%s round %d differs at line %d:\n%s\nredis:\n%s\nkvs:\n%s", gn.name, round, d, sc,
							strings.Join(want.lines, "\n"), strings.Join(got.lines, "\n"))
					}
				}
			}
		})
	}
}

// blockedScenario is one round of TestDifferentialBlocked.
type blockedScenario struct {
	setup   [][]string // run first, replies not compared (type changes: SET, RPUSH ...)
	waiters []blockedWaiter
	writes  [][]string // in order on the control connection
	keys    []string   // dumped at the end
	proto   int        // the control connection's
}

type blockedWaiter struct {
	proto int
	cmd   []string
}

func (sc blockedScenario) String() string {
	var b strings.Builder
	for _, c := range sc.setup {
		fmt.Fprintf(&b, "  setup  %s\n", showCommand(c))
	}
	for i, w := range sc.waiters {
		fmt.Fprintf(&b, "  waiter %d (RESP%d) %s\n", i, w.proto, showCommand(w.cmd))
	}
	for _, c := range sc.writes {
		fmt.Fprintf(&b, "  write (RESP%d) %s\n", sc.proto, showCommand(c))
	}
	return b.String()
}

// blockedRun is what one server did in a scenario: the lines compared, and
// the number of blocked clients after each write.
type blockedRun struct {
	lines   []string
	blocked []int
}

// runBlocked plays sc on n. With sync nil (the reference) it records the
// blocked count after each write; otherwise it waits, after write i, until
// n counts sync[i] blocked clients, or notes the count it stayed at. It
// returns nil when a waiter did not block, or when a cluster changed
// leaders under the scenario.
func runBlocked(t *testing.T, n *Node, sc blockedScenario, sync []int) *blockedRun {
	t.Helper()
	ctl := dialRaw(t, n.Addr)
	defer ctl.c.Close()
	if v := ctl.DoRetry("FLUSHALL"); v.IsError() {
		return nil
	}
	for _, cmd := range sc.setup {
		if v := ctl.DoRetry(cmd...); v.IsError() {
			t.Fatalf("%s: setup %s: %s", n.Name, showCommand(cmd), v)
		}
	}
	hello(t, ctl, sc.proto)
	run := &blockedRun{}
	conns := make([]*rawConn, len(sc.waiters))
	ids := make([]string, len(sc.waiters))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.c.Close()
			}
		}
	}()
	for i, w := range sc.waiters {
		c := dialRaw(t, n.Addr)
		conns[i] = c
		hello(t, c, w.proto)
		ids[i] = c.Do("CLIENT", "ID").Str
		c.send(w.cmd...)
		if blockedTo(ctl, i+1) != i+1 {
			return nil
		}
	}
	inMulti := false
	for i, cmd := range sc.writes {
		v := ctl.Do(cmd...)
		if leaderTrouble([]string{string(v.Raw)}) {
			return nil
		}
		run.lines = append(run.lines, fmt.Sprintf("%s -> %q", showCommand(cmd), v.Raw))
		switch strings.ToUpper(cmd[0]) {
		case "MULTI":
			inMulti = true
		case "EXEC":
			inMulti = false
		}
		if inMulti {
			run.blocked = append(run.blocked, -1)
			continue
		}
		want := -1
		if sync != nil {
			want = sync[i]
		}
		got := blockedTo(ctl, want)
		run.blocked = append(run.blocked, got)
		run.lines = append(run.lines, fmt.Sprintf("blocked clients: %d", got))
	}
	for i, id := range ids {
		v := ctl.Do("CLIENT", "UNBLOCK", id)
		run.lines = append(run.lines, fmt.Sprintf("CLIENT UNBLOCK waiter %d -> %q", i, v.Raw))
	}
	for i, c := range conns {
		v := c.Read()
		run.lines = append(run.lines, fmt.Sprintf("waiter %d <- %q", i, v.Raw))
	}
	for _, k := range sc.keys {
		run.lines = append(run.lines, fmt.Sprintf("%s = %s", k, dumpAny(ctl, k)))
	}
	return run
}

// hello switches c to RESP3 when proto is 3.
func hello(t *testing.T, c *rawConn, proto int) {
	t.Helper()
	if proto == 3 {
		if v := c.Do("HELLO", "3"); v.Kind != '%' {
			t.Fatalf("HELLO 3: %s", v)
		}
	}
}

// blockedTo returns INFO's blocked_clients on c's server once it is want
// (want < 0: at once), or what it still is after a while.
func blockedTo(c *rawConn, want int) int {
	deadline := time.Now().Add(ioTimeout)
	for {
		v := c.Do("INFO", "clients")
		n := -1
		for _, line := range strings.Split(v.Str, "\r\n") {
			if s, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
				n, _ = strconv.Atoi(s)
			}
		}
		if want < 0 || n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// dumpAny renders a key's type and contents.
func dumpAny(c *rawConn, key string) string {
	typ := c.Do("TYPE", key).Str
	var v Value
	switch typ {
	case "list":
		v = c.Do("LRANGE", key, "0", "-1")
	case "zset":
		v = c.Do("ZRANGE", key, "0", "-1", "WITHSCORES")
	case "string":
		v = c.Do("GET", key)
	default:
		return typ
	}
	return typ + " " + strconv.Quote(string(v.Raw))
}

func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// blockedProto is a connection's protocol in a scenario.
func (g *cmdGen) blockedProto() int {
	if g.chance(0.5) {
		return 3
	}
	return 2
}

// blockedWrites wraps a scenario's writes: alone, or some in MULTI/EXEC,
// which makes several keys ready in one step.
func (g *cmdGen) blockedWrites(gen func() []string) [][]string {
	var out [][]string
	for n := 1 + g.r.Intn(4); n > 0; n-- {
		if g.chance(0.25) {
			out = append(out, []string{"MULTI"})
			for m := 2 + g.r.Intn(2); m > 0; m-- {
				out = append(out, gen())
			}
			out = append(out, []string{"EXEC"})
			continue
		}
		out = append(out, gen())
	}
	return out
}
