package group

import (
	"errors"
	"slices"
	"testing"
)

func peers(ids ...string) []Peer {
	var out []Peer
	for _, id := range ids {
		out = append(out, Peer{ID: id, Addr: id + ":7000"})
	}
	return out
}

// TestGroupSetAddRemove: ids are given in order and never again, the
// initial voters are kept (sorted) while the group lives, and each change
// is a new version that encodes and parses back.
func TestGroupSetAddRemove(t *testing.T) {
	s := DefaultGroupSet(2)
	if s.Version != 0 || s.Last != 2 || !slices.Equal(s.Live, []uint32{1, 2}) {
		t.Fatalf("DefaultGroupSet(2) = %+v", s)
	}
	s1, ids, err := s.Add([][]Peer{peers("c", "a", "b")})
	if err != nil || !slices.Equal(ids, []uint32{3}) || s1.Version != 1 || !slices.Equal(s1.Live, []uint32{1, 2, 3}) {
		t.Fatalf("Add: %+v %v %v", s1, ids, err)
	}
	if got := s1.InitialVoters(3); !slices.Equal(got, peers("a", "b", "c")) {
		t.Fatalf("InitialVoters(3) = %v", got)
	}
	if s.Has(3) || len(s.Created) != 0 {
		t.Fatalf("Add changed the set it was called on: %+v", s)
	}
	s2, err := s1.Remove(1)
	if err != nil || s2.Version != 2 || !slices.Equal(s2.Live, []uint32{2, 3}) || !s2.Removed(1) || s2.Removed(3) {
		t.Fatalf("Remove(1): %+v %v", s2, err)
	}
	s3, ids, err := s2.Add([][]Peer{peers("a"), peers("b")})
	if err != nil || !slices.Equal(ids, []uint32{4, 5}) {
		t.Fatalf("Add after a remove gave %v, %v: a removed id must not come back", ids, err)
	}
	s4, err := s3.Remove(3)
	if err != nil || s4.InitialVoters(3) != nil {
		t.Fatalf("Remove(3) kept its voters: %+v %v", s4, err)
	}
	for _, v := range []GroupSet{s1, s2, s3, s4} {
		back, err := ParseGroupSet(v.Encode())
		if err != nil {
			t.Fatalf("ParseGroupSet(%s): %v", v.Encode(), err)
		}
		if back.Encode() != v.Encode() {
			t.Fatalf("ParseGroupSet(%s) encodes as %s", v.Encode(), back.Encode())
		}
	}
	// Refusals.
	if _, err := s4.Remove(1); !errors.Is(err, ErrBadGroupSet) {
		t.Errorf("Remove of a removed group: %v", err)
	}
	if _, err := s4.Remove(9); !errors.Is(err, ErrBadGroupSet) {
		t.Errorf("Remove of an unknown group: %v", err)
	}
	one := GroupSet{Version: 3, Last: 4, Live: []uint32{4}}
	if _, err := one.Remove(4); !errors.Is(err, ErrBadGroupSet) {
		t.Errorf("Remove of the last group: %v", err)
	}
	if _, _, err := s4.Add(nil); !errors.Is(err, ErrBadGroupSet) {
		t.Errorf("Add of no group: %v", err)
	}
	if _, _, err := s4.Add([][]Peer{nil}); !errors.Is(err, ErrBadGroupSet) {
		t.Errorf("Add without voters: %v", err)
	}
	if _, _, err := (GroupSet{Version: 1, Last: MaxGroupID, Live: []uint32{MaxGroupID}}).Add([][]Peer{peers("a")}); !errors.Is(err, ErrBadGroupSet) {
		t.Errorf("Add past the highest id: %v", err)
	}
}

// TestParseGroupSetRejects: anything but a set Encode could write.
func TestParseGroupSetRejects(t *testing.T) {
	for name, v := range map[string]string{
		"not json":         "1 2 3",
		"version 0":        `{"version":0,"last":2,"live":[1,2]}`,
		"no live group":    `{"version":1,"last":2,"live":[]}`,
		"id 0":             `{"version":1,"last":2,"live":[0,1]}`,
		"past last":        `{"version":1,"last":2,"live":[1,3]}`,
		"out of order":     `{"version":1,"last":3,"live":[2,1]}`,
		"repeated":         `{"version":1,"last":3,"live":[1,1]}`,
		"last too high":    `{"version":1,"last":70000,"live":[1]}`,
		"voters of a dead": `{"version":1,"last":3,"live":[1,2],"created":{"3":[{"id":"a","addr":"x"}]}}`,
		"voters not an id": `{"version":1,"last":3,"live":[1,2],"created":{"01":[{"id":"a","addr":"x"}]}}`,
		"no voters":        `{"version":1,"last":3,"live":[1,3],"created":{"3":[]}}`,
		"negative":         `{"version":1,"last":3,"live":[-1]}`,
	} {
		if s, err := ParseGroupSet(v); !errors.Is(err, ErrBadGroupSet) {
			t.Errorf("%s: ParseGroupSet(%s) = %+v, %v; want ErrBadGroupSet", name, v, s, err)
		}
	}
}

// TestBootstraps: the bootstrap rule. Only a node named among a created
// group's initial voters bootstraps it, only without state of its own,
// and only before the group's leader published a membership; never a
// group made with the cluster, nor a removed one.
func TestBootstraps(t *testing.T) {
	s, _, err := DefaultGroupSet(2).Add([][]Peer{peers("a", "b", "c")})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name             string
		set              GroupSet
		id               uint32
		node             string
		state, published bool
		want             bool
	}{
		{"initial voter, fresh", s, 3, "a", false, false, true},
		{"another initial voter", s, 3, "c", false, false, true},
		{"not an initial voter", s, 3, "d", false, false, false},
		{"holds state", s, 3, "a", true, false, false},
		{"membership published", s, 3, "a", false, true, false},
		{"group made with the cluster", s, 1, "a", false, false, false},
		{"unknown group", s, 4, "a", false, false, false},
	}
	removed, err := s.Remove(3)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name             string
		set              GroupSet
		id               uint32
		node             string
		state, published bool
		want             bool
	}{"removed group", removed, 3, "a", false, false, false})
	for _, tc := range cases {
		if got := tc.set.Bootstraps(tc.id, tc.node, tc.state, tc.published); got != tc.want {
			t.Errorf("%s: Bootstraps = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSlotMapIn: a map read against a group set names live groups only,
// and flips to a live group only.
func TestSlotMapIn(t *testing.T) {
	s, _, _ := DefaultGroupSet(2).Add([][]Peer{peers("a")})
	m, err := ParseSlotMapIn("4 0-8191:1,8192-16383:2", s)
	if err != nil {
		t.Fatal(err)
	}
	next, err := m.Flip([]SlotRange{{0, 99}}, 3)
	if err != nil || next.Owner(0) != 3 || next.Owner(100) != 1 {
		t.Fatalf("Flip to the new group: %v %v", next, err)
	}
	if _, err := ParseSlotMapIn(next.String(), s); err != nil {
		t.Fatalf("a map naming the new group: %v", err)
	}
	if _, err := m.Flip([]SlotRange{{0, 99}}, 4); !errors.Is(err, ErrBadSlotMap) {
		t.Errorf("Flip to a group not in the set: %v", err)
	}
	removed, _ := s.Remove(1)
	if _, err := ParseSlotMapIn("4 0-8191:1,8192-16383:2", removed); !errors.Is(err, ErrBadSlotMap) {
		t.Errorf("a map naming a removed group: %v", err)
	}
	if _, err := ParseSlotMapIn("4 0-16383:0", s); !errors.Is(err, ErrBadSlotMap) {
		t.Errorf("a map naming group 0: %v", err)
	}
}
