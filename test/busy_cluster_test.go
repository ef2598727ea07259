package test

import (
	"bufio"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"
)

// Long write scripts in durable and cluster mode, which run inside the
// log's apply on every node and at every replay, where SCRIPT KILL cannot
// stop them: only their instruction budget (script-write-budget) does.

// busyLoopScript writes, then loops until its budget stops it.
const busyLoopScript = "redis.call('SET', KEYS[1], ARGV[1]) local i = 0 while true do i = i + 1 end"

// longScriptBudget is the budget the tests give such a script: a few
// seconds of the loop on a current core (2 to 3 on a shared one), many
// more than the threshold.
const longScriptBudget = "1000000000"

// TestBusyClusterLongWriteScript: a write script that runs for seconds
// inside apply on every node of a 3-node cluster, under concurrent SETs
// through every node. While it runs every node answers BUSY, SCRIPT KILL
// is refused (Redis's replica text on followers), and afterwards the
// cluster has a leader, no acknowledged SET is lost on any node, and
// every node holds the same keys.
func TestBusyClusterLongWriteScript(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	for _, n := range nodes {
		c := dialRaw(t, n.Addr)
		for _, kv := range [][2]string{{"busy-reply-threshold", "100"}, {"script-write-budget", longScriptBudget}} {
			if v := c.Do("CONFIG", "SET", kv[0], kv[1]); v.Str != "OK" {
				t.Fatalf("%s: CONFIG SET %s: %s", n.Name, kv[0], v)
			}
		}
	}
	termBefore := raftTerm(t, leader)

	stop := make(chan struct{})
	load, wg := runClusterLoad(nodes, 6, stop)
	waitAcked(t, load, 200)

	done := make(chan Value, 1)
	started := time.Now()
	go func() {
		v, err := doLong(leader.Addr, "EVAL", busyLoopScript, "1", "busy:key", "written")
		if err != nil {
			v = Value{Str: err.Error()}
		}
		done <- v
	}()
	for _, n := range nodes {
		waitBusy(t, n)
	}
	for _, n := range nodes {
		want := "UNKILLABLE The busy script was sent by a master"
		if n == leader {
			want = "UNKILLABLE The busy script may write"
		}
		// Answered while the script runs: it is still busy, unless it
		// ended meanwhile.
		if v := dialRaw(t, n.Addr).Do("SCRIPT", "KILL"); !strings.HasPrefix(v.Str, want) && v.Str != "NOTBUSY No scripts in execution right now." {
			t.Errorf("%s: SCRIPT KILL = %s, want %s...", n.Name, v, want)
		}
	}
	var r Value
	select {
	case r = <-done:
	case <-time.After(2 * clusterWait):
		t.Fatal("the script did not end at its budget")
	}
	ran := time.Since(started)
	if r.Str != "ERR Script ran past its instruction budget (script-write-budget) and was stopped" {
		t.Fatalf("EVAL = %s, want the budget's error", r)
	}
	before := acked(load)
	waitAcked(t, load, before+200)
	close(stop)
	wg.Wait()
	after := waitLeader(t, nodes)
	t.Logf("script ran %v; %d SETs sent, %d acknowledged, errors %v; raft term %s -> %s, leader %s -> %s",
		ran.Round(time.Millisecond), load.attempts, len(load.acked), load.errors, termBefore, raftTerm(t, after), leader.Name, after.Name)
	for prefix := range load.errors {
		switch prefix {
		case "BUSY", "UNCERTAIN", "TRYAGAIN", "CLUSTERDOWN":
		default:
			t.Errorf("unexpected error kind %q", prefix)
		}
	}
	for _, n := range nodes {
		load.verifyOn(t, n)
		waitValue(t, n, "busy:key", "written")
	}
	waitSameKeys(t, nodes)
}

// TestBusyDurableKill9: kill -9 of a durable node while a long write
// script runs inside its apply. The node restarts, its replay of the
// script bounded by the script's budget, with every acknowledged write
// and the script's own.
func TestBusyDurableKill9(t *testing.T) {
	t.Parallel()
	n := newKVS(t, "kvs-durable", KVSOptions{Durable: true})
	n.Start()
	c := dialRaw(t, n.Addr)
	for _, kv := range [][2]string{{"busy-reply-threshold", "100"}, {"script-write-budget", longScriptBudget}} {
		if v := c.Do("CONFIG", "SET", kv[0], kv[1]); v.Str != "OK" {
			t.Fatalf("CONFIG SET %s: %s", kv[0], v)
		}
	}
	for i := range 100 {
		if v := c.Do("SET", fmt.Sprintf("k%d", i), "v"); v.Str != "OK" {
			t.Fatalf("SET: %s", v)
		}
	}
	script := dialRaw(t, n.Addr)
	script.Write(string(encodeCommand("EVAL", busyLoopScript, "1", "busy:key", "written")))
	waitBusy(t, n)
	n.Kill()
	// It answers once its replay has run the script to its budget again.
	n.StartWithin(2 * clusterWait)
	c = dialRaw(t, n.Addr)
	if v := c.Do("DBSIZE"); v.Str != "101" {
		t.Fatalf("DBSIZE after the restart = %s, want 101", v)
	}
	if v := c.Do("GET", "busy:key"); v.Str != "written" {
		t.Fatalf("the script's write after the restart: %s", v)
	}
}

// doLong sends one command to addr on a connection of its own and reads
// its reply, waiting for as long as a script may run.
func doLong(addr string, args ...string) (Value, error) {
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return Value{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * clusterWait))
	if _, err := c.Write(encodeCommand(args...)); err != nil {
		return Value{}, err
	}
	return readValue(bufio.NewReader(c))
}

// waitBusy waits until n answers PING with BUSY.
func waitBusy(t testing.TB, n *Node) {
	t.Helper()
	c := dialRaw(t, n.Addr)
	waitFor(t, n.Name+" busy", func() error {
		if v := c.Do("PING"); !strings.HasPrefix(v.Str, "BUSY ") {
			return fmt.Errorf("PING = %s", v)
		}
		return nil
	})
}

func acked(l *clusterLoad) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitAcked waits until l has n acknowledged writes.
func waitAcked(t testing.TB, l *clusterLoad, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d acknowledged writes", n), func() error {
		if got := acked(l); got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// raftTerm is n's raft term (KVS.STATUS).
func raftTerm(t testing.TB, n *Node) string {
	t.Helper()
	st, err := kvsStatus(n.Addr, n.Password)
	if err != nil {
		t.Fatal(err)
	}
	return st.fields["term"]
}

// waitSameKeys waits until every node holds the same keys with the same
// string values.
func waitSameKeys(t testing.TB, nodes []*Node) {
	t.Helper()
	waitFor(t, "the same keys on every node", func() error {
		var first string
		for i, n := range nodes {
			dump := stringDump(t, n)
			if i == 0 {
				first = dump
			} else if dump != first {
				return fmt.Errorf("%s and %s differ", nodes[0].Name, n.Name)
			}
		}
		return nil
	})
}

// stringDump is every key of n, sorted, with its value.
func stringDump(t testing.TB, n *Node) string {
	c := dialRaw(t, n.Addr)
	var keys []string
	for _, k := range c.Do("KEYS", "*").Elems {
		keys = append(keys, k.Str)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i := 0; i < len(keys); i += 500 {
		part := keys[i:min(i+500, len(keys))]
		v := c.Do(append([]string{"MGET"}, part...)...)
		for j, e := range v.Elems {
			fmt.Fprintf(&b, "%s=%s\n", part[j], e.Str)
		}
	}
	return b.String()
}
