package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"kvs/fsm"
)

// With raft's CommitTimeout set far beyond the test, a follower learns of a
// commit only from the push (raft's heartbeats carry no commit index, and
// the writes here are one at a time, so no later batch carries it either).
// Every write, sent alone, must reach both followers' stores; without the
// push, WaitApplied times out at the first write.
func TestCommitPushedToFollowers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.CommitTimeout = time.Hour })
	lead := h.cluster3()
	for i := range 50 {
		put(t, lead, fmt.Sprintf("k%d", i), "v")
		index := lead.n.AppliedIndex()
		for _, f := range h.followers(lead) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := f.n.WaitApplied(ctx, index)
			cancel()
			if err != nil {
				t.Fatalf("write %d: %s: %v (applied %d)", i, f.id, err, f.n.AppliedIndex())
			}
			if v, ok := storeGet(f.store, fmt.Sprintf("k%d", i)); !ok || v != "v" {
				t.Fatalf("write %d: %s applied index %d but has %q, %v", i, f.id, index, v, ok)
			}
		}
	}
}

// WaitApplied gives up with the context, and at Close.
func TestWaitAppliedEnds(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	f := h.followers(lead)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := f.n.WaitApplied(ctx, 1<<40); err == nil {
		t.Fatal("WaitApplied for an index never written returned nil")
	}
	done := make(chan error, 1)
	n := f.n
	go func() { done <- n.WaitApplied(context.Background(), 1<<40) }()
	h.stop(f)
	if err := <-done; err == nil {
		t.Fatal("WaitApplied returned nil at Close")
	}
}

func storeGet(s *fsm.Store, key string) (string, bool) {
	r := s.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(key)}})
	return string(r.Bulk), r.Kind == fsm.ReplyBulk
}

// Apply delays are recorded on every node for the writes applied after it
// opened, and their quantiles are ordered.
func TestApplyDelayRecorded(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	for i := range 20 {
		put(t, lead, fmt.Sprintf("k%d", i), "v")
	}
	h.converged(lead, lead.store.AppliedIndex())
	for _, tn := range h.running() {
		d := tn.n.ApplyDelay()
		var total uint64
		for _, c := range d.Counts {
			total += c
		}
		if d.Samples == 0 || total < uint64(d.Samples) || d.P50 > d.P99 || d.P99 > d.Max || d.Sum < d.Max {
			t.Errorf("%s: ApplyDelay %+v", tn.id, d)
		}
	}
}
