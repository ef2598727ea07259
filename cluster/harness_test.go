package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"kvs/fsm"
)

// The harness runs real nodes: raft over TCP on loopback, bolt files and
// snapshots under t.TempDir(), fsm.RaftFSM over a fresh fsm.Store each time
// a node opens. Set KVS_RAFT_LOG=1 to see raft's logs.

// testTiming keeps elections short; loopback needs no more.
func testTiming(c *Config) {
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
}

type testNode struct {
	id, dir, addr string
	store         *fsm.Store
	n             *Node
}

type harness struct {
	t     testing.TB
	tune  func(*Config)
	nodes map[string]*testNode
}

func newHarness(t testing.TB, tune func(*Config)) *harness {
	h := &harness{t: t, tune: tune, nodes: map[string]*testNode{}}
	t.Cleanup(func() {
		for _, tn := range h.nodes {
			if tn.n != nil {
				tn.n.Close()
			}
		}
	})
	return h
}

func testLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("KVS_RAFT_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (h *harness) config(tn *testNode, bootstrap bool) Config {
	cfg := Config{
		NodeID:    tn.id,
		RaftAddr:  tn.addr,
		Dir:       tn.dir,
		Bootstrap: bootstrap,
		FSM:       fsm.NewRaftFSM(tn.store),
		Logger:    testLogger().With("test_node", tn.id),
	}
	testTiming(&cfg)
	if h.tune != nil {
		h.tune(&cfg)
	}
	return cfg
}

// start opens a new node with an empty Dir on a free port.
func (h *harness) start(id string, bootstrap bool) *testNode {
	h.t.Helper()
	tn := &testNode{id: id, dir: h.t.TempDir(), addr: "127.0.0.1:0"}
	h.nodes[id] = tn
	h.open(tn, bootstrap)
	return tn
}

// open (re)opens tn on its Dir and address with a fresh store.
func (h *harness) open(tn *testNode, bootstrap bool) {
	h.t.Helper()
	tn.store = fsm.NewStore()
	n, err := Open(h.config(tn, bootstrap))
	if err != nil {
		h.t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.n, tn.addr = n, n.Addr()
}

func (h *harness) stop(tn *testNode) {
	h.t.Helper()
	if err := tn.n.Close(); err != nil {
		h.t.Fatalf("close %s: %v", tn.id, err)
	}
	tn.n = nil
}

func (h *harness) running() []*testNode {
	var out []*testNode
	for _, id := range slices.Sorted(maps.Keys(h.nodes)) {
		if tn := h.nodes[id]; tn.n != nil {
			out = append(out, tn)
		}
	}
	return out
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leader waits until exactly one running node leads and the others know it.
func (h *harness) leader() *testNode {
	h.t.Helper()
	var lead *testNode
	eventually(h.t, "electing a leader", func() error {
		lead = nil
		for _, tn := range h.running() {
			if tn.n.IsLeader() {
				if lead != nil {
					return fmt.Errorf("%s and %s both lead", lead.id, tn.id)
				}
				lead = tn
			}
		}
		if lead == nil {
			return errors.New("no leader")
		}
		for _, tn := range h.running() {
			if id, _ := tn.n.Leader(); id != lead.id {
				return fmt.Errorf("%s thinks the leader is %q, not %s", tn.id, id, lead.id)
			}
		}
		return nil
	})
	return lead
}

func (h *harness) followers(lead *testNode) []*testNode {
	var out []*testNode
	for _, tn := range h.running() {
		if tn != lead {
			out = append(out, tn)
		}
	}
	return out
}

// cluster3 starts n1 bootstrapped and adds n2 and n3 as voters.
func (h *harness) cluster3() *testNode {
	h.t.Helper()
	h.start("n1", true)
	lead := h.leader()
	for _, id := range []string{"n2", "n3"} {
		tn := h.start(id, false)
		if err := lead.n.AddVoter(id, tn.addr); err != nil {
			h.t.Fatalf("AddVoter %s: %v", id, err)
		}
	}
	return h.leader()
}

func setEntry(key, val string) []byte {
	return fsm.EncodeEntry(nil, time.Now().UnixMilli(), []fsm.Command{
		{Op: fsm.OpSet, Args: [][]byte{[]byte(key), []byte(val)}},
	})
}

// put applies SET key val through tn, which must lead.
func put(t testing.TB, tn *testNode, key, val string) {
	t.Helper()
	resp, err := tn.n.Apply(setEntry(key, val))
	if err != nil {
		t.Fatalf("Apply SET %s via %s: %v", key, tn.id, err)
	}
	if r, ok := resp.([]fsm.Reply); !ok || len(r) != 1 || r[0].String() != "OK" {
		t.Fatalf("Apply SET %s: response %v", key, resp)
	}
}

func storeBytes(t testing.TB, s *fsm.Store) []byte {
	t.Helper()
	sn := s.Snapshot()
	defer sn.Release()
	var b bytes.Buffer
	if _, err := sn.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// converged waits until every running node's store equals the leader's
// (keys, metadata and applied index: the snapshot bytes hold all three)
// and has applied at least min.
func (h *harness) converged(lead *testNode, min uint64) {
	h.t.Helper()
	eventually(h.t, "stores converging", func() error {
		want := storeBytes(h.t, lead.store)
		if got := lead.store.AppliedIndex(); got < min {
			return fmt.Errorf("leader %s applied %d, want >= %d", lead.id, got, min)
		}
		for _, tn := range h.followers(lead) {
			if !bytes.Equal(storeBytes(h.t, tn.store), want) {
				return fmt.Errorf("%s: applied %d, leader %d; stores differ",
					tn.id, tn.store.AppliedIndex(), lead.store.AppliedIndex())
			}
		}
		return nil
	})
}
