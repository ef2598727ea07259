package server

import (
	"slices"
	"testing"

	"kvs/fsm"
)

// TestSignalMoved: a new slot map wakes the first waiter of each key whose
// slot it moves to another group, and no other, so that a client blocked
// on a group that gave the slot up is re-blocked on the new one or sent
// there.
func TestSignalMoved(t *testing.T) {
	var br blockRegistry
	woken := map[string]int{}
	waiter := func(id int64, name string, keys ...string) *waiter {
		w := &waiter{c: &client{id: id}, keys: keys, state: waitIdle}
		w.wake = func() { woken[name]++ }
		br.add(w)
		return w
	}
	first := waiter(1, "first", "moving")
	second := waiter(2, "second", "moving")
	other := waiter(3, "other", "staying")
	movingSlot := fsm.KeySlot("moving")
	br.signalMoved(func(slot int) bool { return slot == movingSlot })
	if woken["first"] != 1 || woken["second"] != 0 || woken["other"] != 0 {
		t.Fatalf("woken %v, want the first waiter of the moved key only", woken)
	}
	if !slices.Equal(first.ready, []string{"moving"}) || len(second.ready) != 0 || len(other.ready) != 0 {
		t.Fatalf("ready: %q %q %q", first.ready, second.ready, other.ready)
	}
}
