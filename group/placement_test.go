package group

import (
	"fmt"
	"slices"
	"testing"

	"kvs/cluster"
)

func TestPlacement(t *testing.T) {
	five := []string{"n4", "n2", "n5", "n1", "n3"}
	for _, tc := range []struct {
		id     uint32
		voters []string
		r      int
		want   []string
	}{
		{1, nil, 3, nil},
		{0, five, 3, []string{"n1", "n2", "n3", "n4", "n5"}}, // the meta group: every voter
		{1, five, 3, []string{"n2", "n3", "n4"}},
		{3, five, 3, []string{"n4", "n5", "n1"}},
		{4, five, 3, []string{"n5", "n1", "n2"}},
		{5, five, 3, []string{"n1", "n2", "n3"}},
		{6, five, 3, []string{"n2", "n3", "n4"}},
		{2, five, 1, []string{"n3"}},
		{2, five, 0, []string{"n3", "n4", "n5", "n1", "n2"}}, // every voter
		{2, five, 9, []string{"n3", "n4", "n5", "n1", "n2"}}, // capped
		{2, []string{"b", "a", "b"}, 3, []string{"a", "b"}},  // a repeated id counts once
		{7, []string{"a"}, 3, []string{"a"}},
	} {
		voters := slices.Clone(tc.voters)
		got := Placement(tc.id, tc.voters, tc.r)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Placement(%d, %v, %d) = %v, want %v", tc.id, tc.voters, tc.r, got, tc.want)
		}
		if !slices.Equal(voters, tc.voters) {
			t.Errorf("Placement(%d, ...) reordered its argument to %v", tc.id, tc.voters)
		}
	}
	// The first replica is the preferred leader wherever a group is on
	// every voter; and G groups of r replicas on n voters give each voter
	// about G*r/n replicas and G/n leaderships, give or take one (r at
	// most, for replicas, when G is not a multiple of n).
	for n := 1; n <= 7; n++ {
		var voters []string
		for i := range n {
			voters = append(voters, fmt.Sprintf("v%d", (i*11)%n)) // any order
		}
		voters = slices.Compact(slices.Sorted(slices.Values(voters)))
		for _, r := range []int{1, 2, 3} {
			for groups := uint32(1); groups <= 20; groups++ {
				held, led := map[string]int{}, map[string]int{}
				for id := uint32(1); id <= groups; id++ {
					p := Placement(id, voters, r)
					if len(p) != min(r, n) || len(slices.Compact(slices.Sorted(slices.Values(p)))) != len(p) {
						t.Fatalf("Placement(%d, %v, %d) = %v", id, voters, r, p)
					}
					if r >= n && p[0] != PreferredLeader(id, voters) {
						t.Errorf("group %d on every voter: first %s, preferred leader %s", id, p[0], PreferredLeader(id, voters))
					}
					led[p[0]]++
					for _, v := range p {
						held[v]++
					}
				}
				if countSpread(voters, led) > 1 || countSpread(voters, held) > min(r, n) {
					t.Errorf("%d groups, %d replicas, %d voters: held %v, led %v", groups, r, n, held, led)
				}
			}
		}
	}
}

// countSpread is the difference between the most and the least of counts over
// voters.
func countSpread(voters []string, counts map[string]int) int {
	lo, hi := counts[voters[0]], counts[voters[0]]
	for _, v := range voters {
		lo, hi = min(lo, counts[v]), max(hi, counts[v])
	}
	return hi - lo
}

func TestMembership(t *testing.T) {
	m := Membership{Index: 40, Voters: []string{"n1", "n2"}, Nonvoters: []string{"n3"}}
	back, err := ParseMembership(m.Encode())
	if err != nil || !slices.Equal(back.Voters, m.Voters) || !slices.Equal(back.Nonvoters, m.Nonvoters) || back.Index != 40 {
		t.Fatalf("ParseMembership(%q) = %+v, %v", m.Encode(), back, err)
	}
	if _, err := ParseMembership("nonsense"); err == nil {
		t.Error("ParseMembership of nonsense succeeded")
	}
	for _, tc := range []struct {
		id   string
		last uint64
		want bool
	}{
		{"n1", 10, false}, // a voter
		{"n3", 10, false}, // a non-voter
		{"n4", 40, true},  // left out, its log ending at the index
		{"n4", 12, true},
		{"n4", 41, false}, // its log goes past: it may hold a later configuration that counts it
	} {
		if got := m.Dropped(tc.id, tc.last); got != tc.want {
			t.Errorf("Dropped(%s, %d) = %v, want %v", tc.id, tc.last, got, tc.want)
		}
	}
	if (Membership{}).Dropped("n4", 0) {
		t.Error("an empty membership drops replicas")
	}
	members := []cluster.Member{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}, {ID: "n3"}}
	if !m.Same(members) {
		t.Errorf("%+v is not the same as %v", m, members)
	}
	if m.Same(members[:2]) {
		t.Errorf("%+v is the same as %v", m, members[:2])
	}
}
