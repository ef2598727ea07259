package group

import (
	"slices"
	"testing"
)

func TestPreferredLeader(t *testing.T) {
	for _, tc := range []struct {
		group  uint32
		voters []string
		want   string
	}{
		{0, nil, ""},
		{5, []string{"a"}, "a"},
		{0, []string{"n3", "n1", "n2"}, "n1"},
		{1, []string{"n3", "n1", "n2"}, "n2"},
		{2, []string{"n2", "n3", "n1"}, "n3"},
		{3, []string{"n1", "n2", "n3"}, "n1"},
		{4, []string{"n1", "n2"}, "n1"},
		{1, []string{"n2", "n1", "n2"}, "n2"}, // a repeated id counts once
		{1 << 31, []string{"a", "b", "c"}, "c"},
	} {
		voters := slices.Clone(tc.voters)
		if got := PreferredLeader(tc.group, tc.voters); got != tc.want {
			t.Errorf("PreferredLeader(%d, %v) = %q, want %q", tc.group, tc.voters, got, tc.want)
		}
		if !slices.Equal(voters, tc.voters) {
			t.Errorf("PreferredLeader(%d, ...) reordered its argument to %v", tc.group, tc.voters)
		}
	}
	// G groups on M voters: each voter is preferred by G/M groups, give or
	// take one, whatever order the voters come in.
	voters := []string{"e", "b", "d", "a", "c"}
	for groups := uint32(1); groups <= 64; groups++ {
		led := map[string]int{}
		for g := range groups {
			led[PreferredLeader(g, voters)]++
		}
		lo, hi := int(groups), 0
		for _, v := range voters {
			lo, hi = min(lo, led[v]), max(hi, led[v])
		}
		if hi-lo > 1 {
			t.Errorf("%d groups on 5 voters: %v", groups, led)
		}
	}
}
