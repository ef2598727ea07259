package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) raft.ServerAddress {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return raft.ServerAddress(addr)
}

// TestDialFailed: an RPC to an address nothing listens on fails with an
// error dialFailed recognises, over plain TCP and over TLS; one whose TLS
// handshake fails (another CA) does not, since it is not held.
func TestDialFailed(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	secure := newTestTransport(t, nodeTLS(ca.node(t), ca))
	vote := func(tr raft.Transport, to raft.ServerAddress) error {
		var resp raft.RequestVoteResponse
		return tr.RequestVote("n1", to, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2")}, Term: 1}, &resp)
	}
	for name, tr := range map[string]raft.Transport{"tcp": plain, "tls": secure} {
		if err := vote(tr, closedAddr(t)); err == nil || !dialFailed(err) {
			t.Errorf("%s: RPC to a closed port: %v; want a dial failure", name, err)
		}
	}
	// A server up, whose certificate the dialler does not trust.
	server := newTestTransport(t, nodeTLS(other.node(t), other))
	if err := vote(secure, server.LocalAddr()); err == nil || dialFailed(err) {
		t.Errorf("RPC refused in the TLS handshake: %v; want an error that is not a dial failure", err)
	}
}

// logLines collects every node's log records, for tests that count what
// raft logged.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count returns how many lines hold any of msgs.
func (l *logLines) count(msgs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		for _, m := range msgs {
			if strings.Contains(line, m) {
				n++
				break
			}
		}
	}
	return n
}

func capturedLogs(logs *logLines) func(*Config) {
	return func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_node", c.NodeID)
	}
}

// heldRPCs is how many RPCs tn's transport holds for the follower id.
func heldRPCs(tn *testNode, id string) int32 {
	t := tn.n.push
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[raft.ServerID(id)]; p != nil {
		return p.held.Load()
	}
	return 0
}

// TestUnreachableFollowerHeld: while a follower is down under writes, the
// leader holds its RPCs to it instead of failing them, so raft counts a
// handful of failures for the whole outage (without holding, its
// heartbeats alone fail about ten times a second here), and the follower,
// restarted, catches up.
func TestUnreachableFollowerHeld(t *testing.T) {
	var logs logLines
	h := newHarness(t, capturedLogs(&logs))
	lead := h.cluster3()
	put(t, lead, "before", "1")
	h.converged(lead, lead.store.AppliedIndex())
	down := h.followers(lead)[0]
	h.stop(down)
	for i := range 1000 {
		put(t, lead, fmt.Sprintf("k%d", i), "v")
	}
	if logs.count("holding replication to it") == 0 {
		t.Fatal(`no "holding replication" logged while a follower was down`)
	}
	h.open(down, false)
	lead = h.leader()
	put(t, lead, "after", "1")
	h.converged(lead, lead.store.AppliedIndex())
	failures := logs.count("failed to heartbeat to", "failed to appendEntries to")
	t.Logf("raft logged %d failed RPCs to the follower that was down", failures)
	if failures > 2*transportPool {
		t.Fatalf("raft logged %d failed RPCs to a follower that was down; want at most %d (its pooled connections)", failures, 2*transportPool)
	}
}

// TestHeldRPCsEnd: RPCs held for a follower that is down end, returning to
// raft, when it leaves the configuration, when this node stops leading,
// and when this node closes; after Close nothing of the node is left
// running.
func TestHeldRPCsEnd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	waitHeld := func(tn *testNode, id string, want func(int32) bool, what string) {
		t.Helper()
		eventually(t, what, func() error {
			if n := heldRPCs(tn, id); !want(n) {
				return fmt.Errorf("%s holds %d RPCs for %s", tn.id, n, id)
			}
			return nil
		})
	}
	some := func(n int32) bool { return n > 0 }
	none := func(n int32) bool { return n == 0 }

	t.Run("removed", func(t *testing.T) {
		h := newHarness(t, nil)
		lead := h.cluster3()
		down := h.followers(lead)[0]
		h.stop(down)
		waitHeld(lead, down.id, some, "RPCs held for the stopped follower")
		if err := h.onLeader(lead, func(l *testNode) error { lead = l; return l.n.Remove(down.id) }); err != nil {
			t.Fatal(err)
		}
		waitHeld(lead, down.id, none, "held RPCs released after the removal")
	})
	t.Run("leadership", func(t *testing.T) {
		h := newHarness(t, nil)
		lead := h.cluster3()
		down := h.followers(lead)[0]
		h.stop(down)
		waitHeld(lead, down.id, some, "RPCs held for the stopped follower")
		// To the follower that is up (raft's own pick may be the one
		// that is down, which cannot take it).
		live := h.followers(lead)[0]
		if err := lead.n.raft.LeadershipTransferToServer(raft.ServerID(live.id), raft.ServerAddress(live.addr)).Error(); err != nil {
			t.Fatal(err)
		}
		waitHeld(lead, down.id, none, "held RPCs released by the old leader")
		if next := h.leader(); next != live {
			t.Fatalf("%s leads, not %s", next.id, live.id)
		}
		waitHeld(live, down.id, some, "RPCs held by the new leader")
	})
	t.Run("close", func(t *testing.T) {
		h := newHarness(t, nil)
		lead := h.cluster3()
		down := h.followers(lead)[0]
		h.stop(down)
		waitHeld(lead, down.id, some, "RPCs held for the stopped follower")
		for _, tn := range h.running() {
			h.stop(tn)
		}
	})
}
