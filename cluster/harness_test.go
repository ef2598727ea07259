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
	"kvs/internal/testwait"
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
	h             *harness // the harness that started it
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
	tn := &testNode{id: id, dir: h.t.TempDir(), addr: "127.0.0.1:0", h: h}
	// Cleanups run last-registered first: this one, registered after
	// TempDir's, closes the node before its directory is removed (a node
	// still running may be writing a snapshot there).
	h.t.Cleanup(func() {
		if tn.n != nil {
			tn.n.Close()
			tn.n = nil
		}
	})
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

// waitTimeout bounds every wait for a state (a leader, converged stores, a
// write's retries). It is generous for a loaded 2-core machine running the
// race detector and several packages' tests at once: it detects hangs, and
// asserts no speed.
const waitTimeout = 30 * time.Second

// eventually polls cond until it returns nil or waitTimeout passes.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	testwait.Until(t, what, waitTimeout, cond)
}

// leader waits until exactly one running node leads and the others know it.
func (h *harness) leader() *testNode {
	h.t.Helper()
	var lead *testNode
	eventually(h.t, "electing a leader", func() (err error) {
		lead, err = h.leaderNow()
		return err
	})
	return lead
}

// leaderNow returns the one running node that leads, if the others know it.
func (h *harness) leaderNow() (*testNode, error) {
	lead, err := h.leading()
	if err != nil {
		return nil, err
	}
	for _, tn := range h.running() {
		if id, _ := tn.n.Leader(); id != lead.id {
			return nil, fmt.Errorf("%s thinks the leader is %q, not %s", tn.id, id, lead.id)
		}
	}
	return lead, nil
}

// leading returns the one running node that leads, known to the others or
// not (a node being added knows no leader until it is a member).
func (h *harness) leading() (*testNode, error) {
	var lead *testNode
	for _, tn := range h.running() {
		if tn.n.IsLeader() {
			if lead != nil {
				return nil, fmt.Errorf("%s and %s both lead", lead.id, tn.id)
			}
			lead = tn
		}
	}
	if lead == nil {
		return nil, errors.New("no leader")
	}
	return lead, nil
}

// onLeader runs op on via, and, while op fails in a way a leader change
// explains, again on whichever node leads by then, until op succeeds or
// waitTimeout passes; it returns op's last error. A leader may lose its
// lease on a busy machine whenever a heartbeat round is late, so any write
// may meet ErrNotLeader (it certainly did not happen) or ErrUnknownOutcome
// (it may have happened): op must be idempotent, such as setting a key to a
// value or adding a voter that may already be there, so that doing it again
// is right either way. (The unknown first attempt cannot apply after the
// retry: it is in the log before it, or never commits.) It does not fail
// the test, so writers on other goroutines may use it.
func (h *harness) onLeader(via *testNode, op func(*testNode) error) error {
	deadline := time.Now().Add(waitTimeout)
	for {
		err := op(via)
		if err == nil || !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrUnknownOutcome) {
			return err
		}
		h.t.Logf("via %s: %v; retrying on the leader", via.id, err)
		for {
			if time.Now().After(deadline) {
				return err
			}
			if lead, lerr := h.leading(); lerr == nil {
				via = lead
				break
			}
			time.Sleep(10 * time.Millisecond) // poll interval while electing
		}
	}
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
		if err := h.onLeader(lead, func(l *testNode) error { return l.n.AddVoter(id, tn.addr) }); err != nil {
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

// put applies SET key val through tn, which leads, or through the node
// that leads by the time a leader change has failed the write (onLeader).
func put(t testing.TB, tn *testNode, key, val string) {
	t.Helper()
	var resp any
	err := tn.h.onLeader(tn, func(l *testNode) (err error) {
		resp, err = l.n.Apply(setEntry(key, val))
		return err
	})
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
