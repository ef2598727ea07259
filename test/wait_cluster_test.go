package test

import (
	"syscall"
	"testing"
)

// TestClusterWait: WAIT counts the other members of the group whose stores
// have applied the connection's writes. With every member up, WAIT 2 after
// a write is answered 2, on the leader and through a follower; with one
// follower frozen (SIGSTOP) it is answered 1 once its timeout passes, and
// WAIT 1 is still answered at once. WAITAOF counts the same replicas, and
// its local count is the leader's fsynced Raft log.
func TestClusterWait(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	fs := followers(nodes, leader)
	lc, fc := dialRaw(t, leader.Addr), dialRaw(t, fs[0].Addr)

	if v := lc.DoRetry("SET", "k", "1"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET on the leader: %s", v)
	}
	if v := lc.Do("WAIT", "2", "0"); string(v.Raw) != ":2\r\n" {
		t.Fatalf("WAIT 2 0 on the leader: %s", v)
	}
	if v := lc.Do("WAITAOF", "1", "2", "0"); string(v.Raw) != "*2\r\n:1\r\n:2\r\n" {
		t.Fatalf("WAITAOF 1 2 0 on the leader: %s", v)
	}
	if v := fc.DoRetry("SET", "k", "2"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET on a follower: %s", v)
	}
	if v := fc.Do("WAIT", "2", "0"); string(v.Raw) != ":2\r\n" {
		t.Fatalf("WAIT 2 0 on a follower: %s", v)
	}

	// One follower frozen: the other still applies every write.
	frozen := fs[1]
	if err := sendSignal(frozen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer sendSignal(frozen, syscall.SIGCONT)
	if v := lc.DoRetry("SET", "k", "3"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET with a follower frozen: %s", v)
	}
	if v := lc.Do("WAIT", "2", "300"); string(v.Raw) != ":1\r\n" {
		t.Errorf("WAIT 2 300 with a follower frozen: %s, want 1", v)
	}
	if v := lc.Do("WAIT", "1", "0"); string(v.Raw) != ":1\r\n" {
		t.Errorf("WAIT 1 0 with a follower frozen: %s, want 1", v)
	}
	if v := lc.Do("WAITAOF", "1", "2", "300"); string(v.Raw) != "*2\r\n:1\r\n:1\r\n" {
		t.Errorf("WAITAOF 1 2 300 with a follower frozen: %s", v)
	}
	// In a transaction WAIT counts without waiting.
	lc.Do("MULTI")
	lc.Do("WAIT", "2", "0")
	if v := lc.Do("EXEC"); string(v.Raw) != "*1\r\n:1\r\n" {
		t.Errorf("EXEC of WAIT 2 0 with a follower frozen: %s", v)
	}

	// Thawed, it catches up and counts again.
	if err := sendSignal(frozen, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if v := lc.Do("WAIT", "2", "0"); string(v.Raw) != ":2\r\n" {
		t.Errorf("WAIT 2 0 once the follower is back: %s", v)
	}
}
