package main

import (
	"slices"
	"strings"
	"testing"

	"kvs/fsm"
	"kvs/group"
)

// TestSpreadSlots: emptying a group moves each of its slots once, to the
// other groups, in ranges of one target each, so that the others end
// with about as many slots as each other.
func TestSpreadSlots(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  group.GroupSet
		from uint16
	}{
		{"three even groups", group.DefaultGroupSet(3), 1},
		{"a new empty group takes more", func() group.GroupSet { s, _, _ := group.DefaultGroupSet(3).Add([][]group.Peer{{{ID: "a"}}}); return s }(), 2},
		{"two groups", group.DefaultGroupSet(2), 2},
	} {
		m, _ := group.InitialSlotMap(3)
		if len(tc.set.Live) == 2 {
			m, _ = group.InitialSlotMap(2)
		}
		table := m.Table()
		plan := spreadSlots(table, tc.from, tc.set.Live)
		after := append([]uint16(nil), table...)
		moved := 0
		for _, mv := range plan {
			if uint16(mv.to) == tc.from || !tc.set.Has(mv.to) {
				t.Fatalf("%s: a move to group %d", tc.name, mv.to)
			}
			for s := mv.first; s <= mv.last; s++ {
				if after[s] != tc.from {
					t.Fatalf("%s: slot %d moved twice or is not group %d's", tc.name, s, tc.from)
				}
				after[s] = uint16(mv.to)
				moved++
			}
		}
		counts := map[uint16]int{}
		for _, g := range after {
			counts[g]++
		}
		if counts[tc.from] != 0 {
			t.Fatalf("%s: group %d keeps %d slots", tc.name, tc.from, counts[tc.from])
		}
		lo, hi := fsm.ClusterSlots, 0
		for _, g := range tc.set.Live {
			if uint16(g) != tc.from {
				lo, hi = min(lo, counts[uint16(g)]), max(hi, counts[uint16(g)])
			}
		}
		if hi-lo > 1 {
			t.Errorf("%s: the groups left hold %v slots", tc.name, counts)
		}
	}
	if plan := spreadSlots(make([]uint16, fsm.ClusterSlots), 5, []uint32{1, 5}); plan != nil {
		t.Errorf("a group without slots: %v", plan)
	}
}

// TestCheckRemovable: the meta group, an unknown or removed group and the
// last one are refused with errors that say so.
func TestCheckRemovable(t *testing.T) {
	set, _ := group.DefaultGroupSet(3).Remove(2)
	for id, want := range map[int]string{
		0: "meta group",
		2: "it was removed",
		9: "no data group 9",
		1: "",
	} {
		err := checkRemovable(set, id)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("checkRemovable(%d) = %v, want %q", id, err, want)
		}
	}
	one := group.GroupSet{Version: 2, Last: 3, Live: []uint32{3}}
	if err := checkRemovable(one, 3); err == nil || !strings.Contains(err.Error(), "last data group") {
		t.Errorf("checkRemovable of the last group: %v", err)
	}
}

// TestLiveGroups: the live data groups are those the cluster was made
// with until the meta group lists others, then the list's.
func TestLiveGroups(t *testing.T) {
	meta := fsm.NewStore()
	gm := &groupsMeta{meta: &clusterView{store: meta}}
	sh := shape{groups: 3, replicas: 3}
	if ids, err := LiveGroups(gm, sh); err != nil || !slices.Equal(ids, []uint32{1, 2, 3}) {
		t.Fatalf("without a list: %v %v", ids, err)
	}
	set, _, _ := group.DefaultGroupSet(3).Add([][]group.Peer{{{ID: "n1"}}})
	set, _ = set.Remove(2)
	meta.Apply(1, 0, []fsm.Command{metaCAS(group.GroupSetMeta, "", set.Encode())})
	if ids, err := LiveGroups(gm, sh); err != nil || !slices.Equal(ids, []uint32{1, 3, 4}) {
		t.Fatalf("with a list: %v %v", ids, err)
	}
	meta.Apply(2, 0, []fsm.Command{metaCAS(group.GroupSetMeta, set.Encode(), "{")})
	if _, err := LiveGroups(gm, sh); err == nil {
		t.Fatal("a malformed list read")
	}
}

// TestRemoveExcludesMove: a group's removal and a move into it, both
// decided from the same view of the meta group (no move in flight, the
// group live), cannot both be written, in either order: each entry
// compares what the other writes. Two compare-and-sets of one name each
// let both through, and left a move into a group that no node serves.
func TestRemoveExcludesMove(t *testing.T) {
	set := group.DefaultGroupSet(3)
	setText := set.Encode()
	next, err := set.Remove(3)
	if err != nil {
		t.Fatal(err)
	}
	rec := moveRecord{id: 5, source: 1, target: 3, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun}
	for _, tc := range []struct {
		name      string
		level     int
		moveFirst bool
		// what each entry answers, in the order applied
		wantFirst, wantSecond bool
	}{
		{"the move first", txnLevel, true, true, false},
		{"the removal first", txnLevel, false, true, false},
		// Below the transaction's level no group is removed; the
		// removal's transaction still sees a move recorded the old way.
		{"a move of a lower level first", txnLevel - 1, true, true, false},
	} {
		s := fsm.NewStore()
		s.Apply(1, fakeNow, []fsm.Command{metaCAS(group.GroupSetMeta, "", setText), metaCAS(moveNextMeta, "", "4")})
		move := moveEntry(tc.level, setText, "4", rec)
		remove := []fsm.Command{removeEntry(setText, "4", next.Encode())}
		first, second := move, remove
		if !tc.moveFirst {
			first, second = remove, move
		}
		if got := entryDone(s.Apply(2, fakeNow, first)); got != tc.wantFirst {
			t.Errorf("%s: the first entry set: %v, want %v", tc.name, got, tc.wantFirst)
		}
		if got := entryDone(s.Apply(3, fakeNow, second)); got != tc.wantSecond {
			t.Errorf("%s: the second entry set: %v, want %v", tc.name, got, tc.wantSecond)
		}
		v, _ := s.Meta(group.GroupSetMeta)
		removed := v == next.Encode()
		_, recorded := s.Meta(moveMeta(rec.id))
		if removed == recorded {
			t.Errorf("%s: group 3 removed %v, a move into it recorded %v: want exactly one", tc.name, removed, recorded)
		}
	}
}
