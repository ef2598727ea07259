package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChaosRejoinKeepsClientAddr replays what a 10-minute TestChaosStale
// run (seed 1796067708344792447) found: a node removed and joined again
// with the same client address lost that address from the replicated
// metadata, so once it led, the followers could no longer forward to it.
//
// The removal clears the address through the log; the join writes it
// again. A leader's store may lag behind its log: a leader just elected
// after a restart holds its snapshot's state until its first entry
// commits, and the snapshot here predates the removal. A join that
// checked that store first found the old address already in place and
// skipped its write, and the pending clear then removed it for good.
//
// The test makes the window wide: both remaining nodes restart with every
// raft RPC to them delayed, so the new leader's first entry takes a few
// hundred milliseconds to commit, and the join is sent as soon as a node
// says it leads. (n3 would write its address again itself if it saw it
// missing; the delays on n3 make it see the snapshot's state long enough
// to stop looking, as happened in that run.)
func TestChaosRejoinKeepsClientAddr(t *testing.T) {
	t.Parallel()
	// Frequent snapshots and a short log tail: the node joined again gets
	// the leader's snapshot, as it did in that run, not the whole log.
	nodes := startCluster(t, 3, "--raft-snapshot-entries", "200", "--raft-snapshot-interval", "100ms",
		"--raft-trailing-logs", "10")
	ps := proxyRaft(t, nodes)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	// Write until n1 and n2 both hold a recent snapshot (it has n3's
	// address, and will be the last one before the removal): fewer than
	// 120 entries behind the log, so the 200 that trigger the next are
	// not reached before n3 is back.
	leader := waitLeader(t, nodes)
	rc := dialRaw(t, leader.Addr)
	pollFor(t, "recent snapshots on n1 and n2", clusterWait, 0, func() error {
		for i := range 10 {
			if v := rc.Do("SET", fmt.Sprintf("k%d", i), strconv.Itoa(i)); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("SET: %s", v)
			}
		}
		st, err := kvsStatus(leader.Addr)
		if err != nil {
			return err
		}
		last, _ := strconv.ParseUint(st.fields["last_index"], 10, 64)
		for _, n := range []*Node{n1, n2} {
			if s := lastSnapshotIndex(n); s == 0 || s+120 < last {
				return fmt.Errorf("%s's last snapshot is at %d, the log at %d", n.Name, s, last)
			}
		}
		return nil
	})

	// Remove n3 (its address is cleared through the log), then write a
	// few entries more so the clear is not the log's last word, short of
	// another snapshot.
	c := &chaos{t: t, nodes: nodes, out: map[int]bool{}}
	c.leaderAdmin("KVS.REMOVE n3", "KVS.REMOVE", "n3")
	c.out[2] = true
	rc = dialRaw(t, waitLeader(t, []*Node{n1, n2}).Addr)
	for i := range 10 {
		if v := rc.Do("SET", fmt.Sprintf("after%d", i), "x"); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET: %s", v)
		}
	}
	n3.Kill()
	if err := os.RemoveAll(n3.DataDir()); err != nil {
		t.Fatal(err)
	}
	n3.Start() // empty, waiting to be joined

	// Restart n1 and n2 slowed down, and join n3 the moment one leads.
	n1.Kill()
	n2.Kill()
	ps.P[0].Delay(60 * time.Millisecond)
	ps.P[1].Delay(60 * time.Millisecond)
	n1.Start()
	n2.Start()
	leader = nil
	pollFor(t, "a node saying it leads", clusterWait, 5*time.Millisecond, func() error {
		for _, n := range []*Node{n1, n2} {
			if ok, err := isLeader(n.Addr); err == nil && ok {
				leader = n
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	// n3 itself advertises its address until its store shows it, and the
	// snapshot it is sent shows it. Slow everything sent to n3, so that
	// it sees that snapshot's state for seconds before the entries after
	// it (the clear among them) arrive, as a node under faults may.
	ps.P[2].Delay(time.Second)
	waitFor(t, "KVS.JOIN n3", func() error {
		return adminOK(leader, "KVS.JOIN", "n3", ps.P[2].Addr(), n3.Addr)
	})
	time.Sleep(4 * time.Second) // the slow spell itself: n3's advertising gives up once satisfied
	ps.HealAll()

	waitFor(t, "every member to know n3's client address", func() error {
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return err
			}
			for _, m := range st.members {
				if m[0] == "n3" && m[2] != n3.Addr {
					return fmt.Errorf("%s lists n3 with client address %q, want %s", n.Name, m[2], n3.Addr)
				}
			}
			if len(st.members) != 3 {
				return fmt.Errorf("%s lists %v", n.Name, st.members)
			}
		}
		return nil
	})
}

// lastSnapshotIndex is the highest log index covered by a snapshot in n's
// raft snapshot store (directories named term-index-time), 0 if none.
func lastSnapshotIndex(n *Node) uint64 {
	snaps, _ := os.ReadDir(filepath.Join(n.DataDir(), "raft", "snapshots"))
	var last uint64
	for _, e := range snaps {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 {
			continue
		}
		if i, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			last = max(last, i)
		}
	}
	return last
}
