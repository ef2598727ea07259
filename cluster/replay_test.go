package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"kvs/fsm"
)

// TestReplayedEntriesAreSilent: a node that restarts applies its log again
// without announcing the writes to the store's notify hook (subscribers
// may be connected while it replays); what it applies after that it
// announces.
func TestReplayedEntriesAreSilent(t *testing.T) {
	h := newHarness(t, nil)
	tn := h.start("n1", true)
	h.leader()
	for i := range 5 {
		put(t, tn, fmt.Sprintf("old%d", i), "v")
	}
	h.stop(tn)

	var mu sync.Mutex
	var heard []string
	tn.store = fsm.NewStore()
	tn.store.SetNotifyClasses(fsm.NotifyKeyspace | fsm.NotifyAll)
	tn.store.SetNotifyHook(func(events []fsm.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			heard = append(heard, e.Name+" "+e.Key)
		}
	})
	n, err := Open(h.config(tn, false))
	if err != nil {
		t.Fatal(err)
	}
	tn.n = n
	waitCaughtUp(t, tn, 5)
	put(t, tn, "new", "v")
	eventually(t, "the new write announced", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(heard, []string{"set new"}) {
			return fmt.Errorf("heard %q, want only the new write", heard)
		}
		return nil
	})
}
