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
