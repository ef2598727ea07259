package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"kvs/fsm"
	"kvs/group"
	"kvs/internal/testwait"
)

// TestLevelKeeper, on a one-voter meta group with non-voters that never
// answer raft: the cluster's level is recorded once every member has
// published it and says it runs it, not before; an entry of level 1 is
// refused until then; and a node below the recorded level is not admitted.
func TestLevelKeeper(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := group.OpenNode(group.NodeOptions{DataDir: t.TempDir(), NodeID: "n1", RaftAddr: "127.0.0.1:0", Bootstrap: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	store := fsm.NewStore()
	g, _, err := n.OpenGroup(0, store)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, "n1 to lead", 10*time.Second, 10*time.Millisecond, func() error {
		if !g.Node().IsLeader() {
			return errors.New("not the leader")
		}
		return nil
	})
	v := &clusterView{node: g.Node(), store: store, id: "n1", raftAddr: n.Addr(), respAddr: "127.0.0.1:1", propose: g.Proposer().Propose}
	k := newLevelKeeper(v)
	v.keeper = k
	var mu sync.Mutex
	running := map[string]int{} // client address -> the level its kvs says
	k.memberLevel = func(ctx context.Context, addr string) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		l, ok := running[addr]
		if !ok {
			return 0, fmt.Errorf("%s does not answer", addr)
		}
		return l, nil
	}
	runs := func(addr string, level int) {
		mu.Lock()
		running[addr] = level
		mu.Unlock()
	}
	ctx := context.Background()
	propose := func(cmds ...fsm.Command) {
		t.Helper()
		if _, err := v.propose(cmds); err != nil {
			t.Fatal(err)
		}
	}
	record := func(want int) {
		t.Helper()
		got, err := k.record(ctx)
		switch {
		case want == 0 && !errors.Is(err, errLevelWait):
			t.Fatalf("record: level %d, %v; want it to wait", got, err)
		case want > 0 && (err != nil || got != want):
			t.Fatalf("record: level %d, %v; want %d", got, err, want)
		case want == 0:
			t.Logf("record waits: %v", err)
		}
	}
	cas := metaCAS(group.SlotMapMeta, "", "1 0-16383:1")
	refused := func(what string) {
		t.Helper()
		if _, err := k.propose(g.Proposer(), []fsm.Command{cas}); !errors.Is(err, group.ErrLevel) {
			t.Fatalf("%s: a level-1 entry proposed: %v", what, err)
		}
		if _, ok := store.Meta(group.SlotMapMeta); ok {
			t.Fatalf("%s: the level-1 entry was applied", what)
		}
	}

	// n1 has not published its level: the cluster's stays 0.
	record(0)
	refused("nothing published")
	// n2, of a kvs from before levels, joins while the level is 0.
	joined := func(id string, level int) error {
		return v.keeper.admit(ctx, id, id+":6379", level, func(level int) error {
			propose(metaSet(metaRESPAddr(id), id+":6379"), metaSet(group.NodeLevelMeta(id), fmt.Sprint(level)))
			// An address nothing listens on: a non-voter that never
			// answers holds no commit back.
			return v.node.AddNonvoter(id, "127.0.0.1:"+id[1:])
		})
	}
	if err := joined("n2", 0); err != nil {
		t.Fatalf("joining n2 of level 0 at level 0: %v", err)
	}
	runs("n2:6379", 0)
	propose(k.publishes()...)
	if k.publishes() != nil {
		t.Fatal("n1's level published, and still to publish")
	}
	record(0) // n2 is at 0
	refused("n2 at level 0")
	// n2 published 1 and went back to the kvs before levels, which keeps
	// what it published.
	propose(metaSet(group.NodeLevelMeta("n2"), "1"))
	record(0)
	refused("n2 back to level 0")
	runs("n2:6379", 1)
	record(1)
	if got := k.levels.Cluster(); got != 1 {
		t.Fatalf("cluster level %d after recording 1", got)
	}
	if r, err := k.propose(g.Proposer(), []fsm.Command{cas}); err != nil || r[0].Int != 1 {
		t.Fatalf("the level-1 entry at level 1: %+v, %v", r, err)
	}
	record(0) // nothing higher to record

	// A node of level 0 may no longer join; one of level 1 may.
	err = joined("n3", 0)
	if !errors.Is(err, group.ErrLevel) {
		t.Fatalf("joining n3 of level 0 at level 1: %v", err)
	}
	if ms, _ := v.Members(); len(ms) != 2 {
		t.Fatalf("members after a refused join: %+v", ms)
	}
	// A node that does not say its level is asked: refused while it
	// does not answer, or answers 0, admitted once it answers 1.
	if err := joined("n3", -1); !errors.Is(err, group.ErrLevel) {
		t.Fatalf("joining n3, not answering, at level 1: %v", err)
	}
	runs("n3:6379", 0)
	if err := joined("n3", -1); !errors.Is(err, group.ErrLevel) {
		t.Fatalf("joining n3, of level 0 and not saying, at level 1: %v", err)
	}
	runs("n3:6379", 1)
	if err := joined("n3", -1); err != nil {
		t.Fatalf("joining n3, of level 1 and not saying, at level 1: %v", err)
	}
	if got := k.levels.Node("n3"); got != 1 {
		t.Fatalf("n3's level after its join: %d, want the 1 it answered", got)
	}
	if err := joined("n4", 1); err != nil {
		t.Fatalf("joining n4 of level 1 at level 1: %v", err)
	}
	if got := k.levels.Cluster(); got != 1 {
		t.Fatalf("cluster level %d after a join", got)
	}
}

// TestRecordLevels: the cluster's level reaches the data groups this node
// leads, and never goes down in them.
func TestRecordLevels(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := group.OpenNode(group.NodeOptions{DataDir: t.TempDir(), NodeID: "n1", RaftAddr: "127.0.0.1:0", Bootstrap: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	stores := map[uint32]*fsm.Store{}
	for _, id := range []uint32{0, 1, 2} {
		stores[id] = fsm.NewStore()
		g, _, err := n.OpenGroup(id, stores[id])
		if err != nil {
			t.Fatal(err)
		}
		testwait.Poll(t, "n1 to lead", 10*time.Second, 10*time.Millisecond, func() error {
			if !g.Node().IsLeader() {
				return errors.New("not the leader")
			}
			return nil
		})
	}
	level := func(id uint32) string {
		v, _ := stores[id].Meta(group.ClusterLevelMeta)
		return v
	}
	if err := recordLevels(n, 0); err != nil || level(1) != "" {
		t.Fatalf("level 0: %v, group 1 holds %q", err, level(1))
	}
	if err := recordLevels(n, 3); err != nil {
		t.Fatal(err)
	}
	if level(1) != "3" || level(2) != "3" || level(0) != "" {
		t.Fatalf("after recording 3: groups 0, 1, 2 hold %q, %q, %q; want the data groups at 3 and the meta group untouched", level(0), level(1), level(2))
	}
	if err := recordLevels(n, 2); err != nil || level(1) != "3" {
		t.Fatalf("a lagging view (2) took group 1 from 3 to %q (%v)", level(1), err)
	}
}
