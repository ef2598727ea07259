package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"kvs/fsm"
)

// ranges renders a slot map as its owners' ranges, "first-last" in slot
// order, checking on the way that each group owns one contiguous range
// and the groups follow in id order.
func ranges(t *testing.T, slots []uint32) string {
	t.Helper()
	var out []string
	first := 0
	for s := 1; s <= len(slots); s++ {
		if s < len(slots) && slots[s] == slots[s-1] {
			continue
		}
		if want := uint32(len(out)); slots[first] != want {
			t.Fatalf("slots %d-%d belong to group %d, want %d (ranges in id order)", first, s-1, slots[first], want)
		}
		out = append(out, fmt.Sprintf("%d-%d", first, s-1))
		first = s
	}
	return strings.Join(out, " ")
}

func TestEvenSlots(t *testing.T) {
	// The ranges redis-cli --cluster create prints for as many masters.
	for n, want := range map[int]string{
		1: "0-16383",
		2: "0-8191 8192-16383",
		3: "0-5460 5461-10922 10923-16383",
		5: "0-3276 3277-6553 6554-9829 9830-13106 13107-16383",
		7: "0-2340 2341-4680 4681-7021 7022-9361 9362-11702 11703-14042 14043-16383",
	} {
		slots, err := EvenSlots(n)
		if err != nil {
			t.Fatalf("EvenSlots(%d): %v", n, err)
		}
		if got := ranges(t, slots); got != want {
			t.Errorf("EvenSlots(%d) = %s, want %s", n, got, want)
		}
	}
	for n := 1; n <= MaxGroups; n++ {
		slots, err := EvenSlots(n)
		if err != nil {
			t.Fatalf("EvenSlots(%d): %v", n, err)
		}
		if len(slots) != fsm.ClusterSlots {
			t.Fatalf("EvenSlots(%d) maps %d slots", n, len(slots))
		}
		// Each slot has one owner by construction; every group owns a
		// contiguous range (ranges checks), all n of them, and the sizes
		// differ by at most one.
		if got := strings.Count(ranges(t, slots), " ") + 1; got != n {
			t.Fatalf("EvenSlots(%d) gives %d groups slots", n, got)
		}
		sizes := make([]int, n)
		for _, g := range slots {
			sizes[g]++
		}
		if lo, hi := slices.Min(sizes), slices.Max(sizes); hi-lo > 1 {
			t.Fatalf("EvenSlots(%d): ranges of %d to %d slots", n, lo, hi)
		}
	}
	for _, n := range []int{0, -1, MaxGroups + 1} {
		if _, err := EvenSlots(n); err == nil {
			t.Errorf("EvenSlots(%d) succeeded", n)
		}
	}
}
