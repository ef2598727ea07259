package server

import (
	"strings"
	"testing"

	"kvs/fsm"
)

// A follower relays a forwarded write's replies only after waiting for the
// index the leader applied it at.
func TestForwardWaitsForLeaderIndex(t *testing.T) {
	p := startPair(t, false, true)
	p.lc.applied.Store(42)
	rc := dialRaw(t, p.follower)
	if got := rc.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET via follower: %q", got)
	}
	if n, i := p.fc.waits.Load(), p.fc.waited.Load(); n != 1 || i != 42 {
		t.Errorf("follower waited %d times, for index %d; want once, for 42", n, i)
	}
	if p.lc.waits.Load() != 0 {
		t.Error("the leader waited for its own index")
	}
}

// A READONLY connection's reads on a follower wait for the leader's applied
// index once per pipeline; a plain connection's reads do not.
func TestReplicaReadsSyncWithLeader(t *testing.T) {
	p := startPair(t, false, true)
	p.lc.applied.Store(77)
	plain := dialRaw(t, p.follower)
	plain.do("GET", "k")
	if n := p.fc.waits.Load(); n != 0 {
		t.Fatalf("a plain connection's read waited %d times", n)
	}
	rc := dialRaw(t, p.follower)
	rc.do("READONLY")
	got := script(t, rc, [][]string{{"GET", "k"}, {"EXISTS", "k"}, {"GET", "x"}})
	if strings.Join(got, "") != "$-1\r\n:0\r\n$-1\r\n" {
		t.Fatalf("replies %q", got)
	}
	if n, i := p.fc.waits.Load(), p.fc.waited.Load(); n != 1 || i != 77 {
		t.Errorf("follower waited %d times, for index %d; want once, for 77", n, i)
	}
	p.lc.applied.Store(78)
	rc.do("GET", "k")
	if n, i := p.fc.waits.Load(), p.fc.waited.Load(); n != 2 || i != 78 {
		t.Errorf("second pipeline: %d waits, index %d; want 2, 78", n, i)
	}
	// On the leader a READONLY connection reads without asking anyone.
	lr := dialRaw(t, p.leader)
	lr.do("READONLY")
	lr.do("GET", "k")
	if n := p.lc.waits.Load(); n != 0 {
		t.Errorf("the leader waited %d times for a replica read", n)
	}
	if !strings.Contains(rc.do("INFO", "stats"), "kvs_replica_reads_unsynced:0\r\n") {
		t.Error("INFO stats: kvs_replica_reads_unsynced is not 0")
	}

	// With no leader known, the read is served as it is, and counted.
	p.fc.set(func(f *fakeCluster) { f.leaderOK = false })
	if got := rc.do("GET", "k"); got != "$-1\r\n" {
		t.Errorf("GET without a leader: %q", got)
	}
	if !strings.Contains(rc.do("INFO", "stats"), "kvs_replica_reads_unsynced:1\r\n") {
		t.Error("INFO stats: an unsynced replica read was not counted")
	}
}

func TestKVSSync(t *testing.T) {
	p := startPair(t, false, true)
	p.lc.applied.Store(9)
	if got := dialRaw(t, p.leader).do("KVS.SYNC"); got != "+9\r\n" {
		t.Errorf("KVS.SYNC on the leader: %q", got)
	}
	if got := dialRaw(t, p.follower).do("KVS.SYNC"); got != "-TRYAGAIN not the leader\r\n" {
		t.Errorf("KVS.SYNC on a follower: %q", got)
	}
	if got := dialRaw(t, startServer(t, Config{})).do("KVS.SYNC"); got != "-"+errClusterDisabled+"\r\n" {
		t.Errorf("KVS.SYNC standalone: %q", got)
	}
	// A group the node does not know (one removed that the sender still
	// routes to, or one added it has not opened): as a node that does not
	// lead it, which the client retries. A name that is no group id is an
	// error.
	if got := dialRaw(t, p.leader).do("KVS.SYNC", "7"); got != "-TRYAGAIN not the leader\r\n" {
		t.Errorf("KVS.SYNC of an unknown group: %q", got)
	}
	if got := dialRaw(t, p.leader).do("KVS.SYNC", "x"); got != "-ERR no such group: x\r\n" {
		t.Errorf("KVS.SYNC x: %q", got)
	}
	set := appendCommands(nil, []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}})
	if got := dialRaw(t, p.leader).do("KVS.FORWARD", string(set), "", "7"); got != "-TRYAGAIN not the leader, the write was not applied\r\n" {
		t.Errorf("KVS.FORWARD to an unknown group: %q", got)
	}
}
