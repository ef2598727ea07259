package cluster

import (
	"fmt"
	"testing"
	"time"
)

// TestReplicasInContact: the leader counts the followers that answered it
// within the window, a stopped follower drops out once its last answer is
// older than that, and comes back once restarted; a follower counts none.
func TestReplicasInContact(t *testing.T) {
	h := newHarness(t, nil)
	h.cluster3()
	const window = time.Second
	contacts := func(want int) func() error {
		return func() error {
			lead, err := h.leaderNow()
			if err != nil {
				return err
			}
			if got := lead.n.ReplicasInContact(window); got != want {
				return fmt.Errorf("leader %s counts %d replicas in contact, want %d", lead.id, got, want)
			}
			for _, f := range h.followers(lead) {
				if got := f.n.ReplicasInContact(window); got != 0 {
					return fmt.Errorf("follower %s counts %d replicas in contact", f.id, got)
				}
			}
			return nil
		}
	}
	eventually(t, "both followers in contact", contacts(2))
	f := h.followers(h.leader())[0]
	h.stop(f)
	eventually(t, "the stopped follower out of contact", contacts(1))
	h.open(f, false)
	eventually(t, "the restarted follower in contact again", contacts(2))
}

// TestAddNonvoter: a non-voter added to a group that has written a while
// catches up (the leader sees its log reach its own through FollowerIndex)
// without counting in the majority, is promoted to voter, and a
// configuration committed again is paired with a later index.
func TestAddNonvoter(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.start("n1", true)
	h.leader()
	for i := range 20 {
		put(t, lead, fmt.Sprint("k", i), "v")
	}
	before, _, err := lead.n.CommitConfiguration()
	if err != nil {
		t.Fatal(err)
	}
	n2 := h.start("n2", false)
	if _, ok := lead.n.FollowerIndex("n2", time.Minute); ok {
		t.Fatal("FollowerIndex of a server not yet added")
	}
	if err := h.onLeader(lead, func(l *testNode) error { return l.n.AddNonvoter("n2", n2.addr) }); err != nil {
		t.Fatal(err)
	}
	// Again: a server there already is left as it is.
	if err := lead.n.AddNonvoter("n2", n2.addr); err != nil {
		t.Fatalf("AddNonvoter again: %v", err)
	}
	ms, err := lead.n.Members()
	if err != nil || len(ms) != 2 || ms[1].ID != "n2" || ms[1].Voter {
		t.Fatalf("members after AddNonvoter: %v, %v", ms, err)
	}
	added, ms, err := lead.n.CommitConfiguration()
	if err != nil || added <= before || len(ms) != 2 || ms[1].Voter {
		t.Fatalf("CommitConfiguration after AddNonvoter: %d, %v (%v), before %d", added, ms, err, before)
	}
	eventually(t, "n2 catching up", func() error {
		last, ok := lead.n.FollowerIndex("n2", time.Second)
		if want := lead.n.Status().LastIndex; !ok || last < want {
			return fmt.Errorf("n2 reports %d (%v), leader's last index %d", last, ok, want)
		}
		return nil
	})
	if _, ok := n2.n.FollowerIndex("n1", time.Minute); ok {
		t.Error("FollowerIndex on a follower")
	}
	if err := h.onLeader(lead, func(l *testNode) error { return l.n.AddVoter("n2", n2.addr) }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n2 a voter on both", func() error {
		for _, tn := range []*testNode{lead, n2} {
			ms, err := tn.n.Members()
			if err != nil {
				return err
			}
			if len(ms) != 2 || !ms[1].Voter {
				return fmt.Errorf("%s: members %v", tn.id, ms)
			}
		}
		return nil
	})
	if i, _, err := h.leader().n.CommitConfiguration(); err != nil || i <= added {
		t.Errorf("CommitConfiguration after the promotion: %d (%v), want past %d", i, err, added)
	}
	if _, _, err := n2.n.CommitConfiguration(); err == nil && !n2.n.IsLeader() {
		t.Error("CommitConfiguration on a follower succeeded")
	}
	h.converged(h.leader(), 0)
}
