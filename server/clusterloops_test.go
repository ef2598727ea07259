//go:build linux

package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestClusterServesOnLoops: a cluster node serves its connections on
// event loops, unless the Config asks for a goroutine per connection.
func TestClusterServesOnLoops(t *testing.T) {
	p := startPair(t, false, true)
	for _, s := range []*Server{p.leader, p.follower} {
		if s.cfg.ConnGoroutines {
			continue // KVS_TEST_CONN_GOROUTINES runs the suite on goroutines
		}
		// Serve starts the loops; a connection answered has seen it.
		dialRaw(t, s).do("PING")
		if n := s.eventLoops(); n == 0 {
			t.Errorf("a cluster node serves %d event loops, want some", n)
		}
	}
	s := startServer(t, Config{Cluster: &fakeCluster{selfID: "n1"}, ConnGoroutines: true})
	dialRaw(t, s).do("PING")
	if n := s.eventLoops(); n != 0 {
		t.Errorf("with ConnGoroutines a cluster node serves %d event loops, want none", n)
	}
}

// loopNeighbours dials first, then one connection per event loop of s
// after it: connections go to the loops in turn, so one of the others
// shares first's loop.
func loopNeighbours(t *testing.T, s *Server) (first *rawConn, others []*rawConn) {
	t.Helper()
	first = dialRaw(t, s)
	if got := first.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	for range max(s.eventLoops(), 1) {
		rc := dialRaw(t, s)
		if got := rc.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING: %q", got)
		}
		others = append(others, rc)
	}
	return first, others
}

// stallRounds holds every Raft round of p's leader (its proposer's lock)
// until the returned func is called.
func stallRounds(p *pair) (release func()) {
	p.proposer.mu.Lock()
	return p.proposer.mu.Unlock
}

// TestClusterLoopSlowRound: while a write waits for its Raft round, the
// other clients of its loop are served, on the leader and on a follower
// that forwarded the write; the write is answered once the round ends.
func TestClusterLoopSlowRound(t *testing.T) {
	p := startPair(t, false, true)
	for _, s := range []*Server{p.leader, p.follower} {
		name := "leader"
		if s == p.follower {
			name = "follower"
		}
		t.Run(name, func(t *testing.T) {
			writer, others := loopNeighbours(t, s)
			key := "slow-" + name
			release := stallRounds(p)
			released := false
			defer func() {
				if !released {
					release()
				}
			}()
			writer.send(encodeCommand("SET", key, "v"))
			for i, rc := range others {
				if got := rc.do("PING"); got != "+PONG\r\n" {
					t.Fatalf("client %d: PING during a slow round: %q", i, got)
				}
				if got := rc.do("ECHO", "x"); got != "$1\r\nx\r\n" {
					t.Fatalf("client %d: ECHO during a slow round: %q", i, got)
				}
			}
			release()
			released = true
			if got := writer.reply(); got != "+OK\r\n" {
				t.Fatalf("SET after the round: %q", got)
			}
			if got := writer.do("GET", key); got != "$1\r\nv\r\n" {
				t.Fatalf("GET: %q", got)
			}
		})
	}
}

// TestClusterLoopPipeline: a pipeline of writes and reads on a loop runs
// in order across its batches' rounds, on the leader and forwarded from a
// follower, and a client's next pipeline follows.
func TestClusterLoopPipeline(t *testing.T) {
	p := startPair(t, false, true)
	for _, s := range []*Server{p.leader, p.follower} {
		rc := dialRaw(t, s)
		key := fmt.Sprintf("pipe-%p", s)
		got := script(t, rc, [][]string{
			{"SET", key, "1"},
			{"INCR", key},
			{"PING"},
			{"INCR", key},
			{"APPEND", key + "x", "ab"},
			{"ECHO", "e"},
			{"INCRBY", key, "10"},
		})
		want := []string{"+OK\r\n", ":2\r\n", "+PONG\r\n", ":3\r\n", ":2\r\n", "$1\r\ne\r\n", ":13\r\n"}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("reply %d: %q, want %q", i, got[i], want[i])
			}
		}
		fr := dialRaw(t, p.follower)
		eventually(t, "the write to reach the follower's store", func() bool {
			return fr.do("GET", key) == "$2\r\n13\r\n"
		})
	}
}

// TestClusterLoopBlockingPop: a blocked client on a loop is served by a
// push from another client, and a pop whose Raft round is slow does not
// hold up the other clients of its loop.
func TestClusterLoopBlockingPop(t *testing.T) {
	p := startPair(t, false, true)
	s := p.leader
	blocked, pusher := dialRaw(t, s), dialRaw(t, s)
	blocked.send(encodeCommand("BLPOP", "bq", "0"))
	eventually(t, "the client to block", func() bool { return s.blocked.count() == 1 })
	if got := pusher.do("RPUSH", "bq", "x"); got != ":1\r\n" {
		t.Fatalf("RPUSH: %q", got)
	}
	if got, want := blocked.reply(), "*2\r\n$2\r\nbq\r\n$1\r\nx\r\n"; got != want {
		t.Fatalf("BLPOP: %q, want %q", got, want)
	}

	popper, others := loopNeighbours(t, s)
	if got := pusher.do("RPUSH", "bq", "y"); got != ":1\r\n" {
		t.Fatalf("RPUSH: %q", got)
	}
	release := stallRounds(p)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	popper.send(encodeCommand("BLPOP", "bq", "0"))
	for i, rc := range others {
		if got := rc.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("client %d: PING during a slow pop: %q", i, got)
		}
	}
	release()
	released = true
	if got, want := popper.reply(), "*2\r\n$2\r\nbq\r\n$1\r\ny\r\n"; got != want {
		t.Fatalf("BLPOP: %q, want %q", got, want)
	}
}

// TestClusterLoopBlockingPopFollower: a follower's blocked client pops
// through the leader once a write reaches the follower's store.
func TestClusterLoopBlockingPopFollower(t *testing.T) {
	p := startPair(t, false, true)
	blocked := dialRaw(t, p.follower)
	blocked.send(encodeCommand("BLPOP", "fq", "0"))
	eventually(t, "the client to block", func() bool { return p.follower.blocked.count() == 1 })
	if got := dialRaw(t, p.follower).do("RPUSH", "fq", "z"); got != ":1\r\n" {
		t.Fatalf("RPUSH: %q", got)
	}
	if got, want := blocked.reply(), "*2\r\n$2\r\nfq\r\n$1\r\nz\r\n"; got != want {
		t.Fatalf("BLPOP: %q, want %q", got, want)
	}
}

// TestClusterLoopReads: linearizable reads on the leader pass a read
// barrier off the loop, and a READONLY client's reads on a follower catch
// up off the loop; a barrier's error is the read's answer, and the next
// read checks again.
func TestClusterLoopReads(t *testing.T) {
	p := startPair(t, true, true)
	rc := dialRaw(t, p.leader)
	if got := rc.do("SET", "r", "1"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	before := p.lc.barriers.Load()
	got := script(t, rc, [][]string{{"GET", "r"}, {"GET", "r"}, {"PING"}})
	if got[0] != "$1\r\n1\r\n" || got[1] != "$1\r\n1\r\n" || got[2] != "+PONG\r\n" {
		t.Fatalf("linearizable reads: %q", got)
	}
	if n := p.lc.barriers.Load() - before; n != 1 {
		t.Errorf("read barriers for one run of reads: %d, want 1", n)
	}
	p.lc.set(func(f *fakeCluster) { f.barrierErr = fmt.Errorf("%w: lost", ErrNotLeader) })
	if got := rc.do("GET", "r"); got[0] != '-' {
		t.Errorf("GET with a failing barrier: %q, want an error", got)
	}
	p.lc.set(func(f *fakeCluster) { f.barrierErr = nil })
	if got := rc.do("GET", "r"); got != "$1\r\n1\r\n" {
		t.Errorf("GET after the barrier recovered: %q", got)
	}

	q := startPair(t, false, true)
	ro := dialRaw(t, q.follower)
	if got := ro.do("READONLY"); got != "+OK\r\n" {
		t.Fatalf("READONLY: %q", got)
	}
	if got := dialRaw(t, q.leader).do("SET", "ro", "2"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if got := ro.do("GET", "ro"); got != "$1\r\n2\r\n" {
		t.Errorf("READONLY GET on the follower: %q", got)
	}
}

// TestClusterLoopKeyless: on a sharded node's loops, FLUSHALL empties
// every group the node leads and SCRIPT LOAD reaches every group, the
// groups led elsewhere through their leaders, off the loop.
func TestClusterLoopKeyless(t *testing.T) {
	p := startShardedPair(t)
	k0, k1 := keyIn(0, 2, 0), keyIn(1, 2, 0)
	rc := dialRaw(t, p.n1)
	got := script(t, rc, [][]string{{"SET", k0, "a"}, {"SET", k1, "b"}, {"SCRIPT", "LOAD", "return 1"}})
	if got[0] != "+OK\r\n" || got[1] != "+OK\r\n" || got[2][0] != '$' {
		t.Fatalf("SET, SET, SCRIPT LOAD: %q", got)
	}
	sha := parseBulk(t, got[2])
	for n, s := range []*Server{p.n1, p.n2} {
		if got := dialRaw(t, s).do("SCRIPT", "EXISTS", sha); got != "*1\r\n:1\r\n" {
			t.Errorf("node %d: SCRIPT EXISTS: %q", n+1, got)
		}
	}
	if got := rc.do("FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL: %q", got)
	}
	for n := range 2 {
		if keys := keysOf(p.stores[n][0]); len(keys) != 0 {
			t.Errorf("node %d, group 0 after FLUSHALL on its leader: %q", n+1, keys)
		}
	}
	if keys := keysOf(p.stores[1][1]); len(keys) != 1 || keys[0] != k1 {
		t.Errorf("group 1, led by the other node, after FLUSHALL: %q, want [%s]", keys, k1)
	}
	if got := rc.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING after FLUSHALL: %q", got)
	}
}

// parseBulk returns the string of a RESP2 bulk reply.
func parseBulk(t *testing.T, r string) string {
	t.Helper()
	_, s, ok := strings.Cut(strings.TrimSuffix(r, "\r\n"), "\r\n")
	if !ok || r[0] != '$' {
		t.Fatalf("not a bulk string: %q", r)
	}
	return s
}

// TestClusterLoopACLChange: an ACL change, proposed through the log, waits
// for its Raft round off the loop, and the loop's other clients are
// served meanwhile.
func TestClusterLoopACLChange(t *testing.T) {
	p := startPair(t, false, true)
	admin, others := loopNeighbours(t, p.leader)
	release := stallRounds(p)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	admin.send(encodeCommand("ACL", "SETUSER", "alice", "on", ">pw", "+get", "~*"))
	for i, rc := range others {
		if got := rc.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("client %d: PING during the ACL change's round: %q", i, got)
		}
	}
	release()
	released = true
	if got := admin.reply(); got != "+OK\r\n" {
		t.Fatalf("ACL SETUSER: %q", got)
	}
	if got := admin.do("ACL", "USERS"); got != "*2\r\n$5\r\nalice\r\n$7\r\ndefault\r\n" {
		t.Errorf("ACL USERS: %q", got)
	}
}
