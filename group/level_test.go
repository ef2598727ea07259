package group

import (
	"errors"
	"testing"
)

func levelsOf(meta map[string]string) Levels {
	return Levels{Meta: func(name string) (string, bool) {
		v, ok := meta[name]
		return v, ok
	}}
}

func TestLevelsLowest(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]string
		ids  []string
		want int
	}{
		{"no members", nil, nil, 0},
		{"none published: a kvs from before levels", nil, []string{"n1", "n2"}, 0},
		{"every member at 1", map[string]string{"node/n1/level": "1", "node/n2/level": "1", "node/n3/level": "1"}, []string{"n1", "n2", "n3"}, 1},
		{"one member not yet upgraded", map[string]string{"node/n1/level": "1", "node/n3/level": "1"}, []string{"n1", "n2", "n3"}, 0},
		{"a non-member's level does not count", map[string]string{"node/n1/level": "1", "node/n9/level": "0"}, []string{"n1"}, 1},
		{"the lowest of several", map[string]string{"node/n1/level": "3", "node/n2/level": "2"}, []string{"n1", "n2"}, 2},
		{"an unreadable level is 0", map[string]string{"node/n1/level": "x", "node/n2/level": "1"}, []string{"n1", "n2"}, 0},
		{"a negative level is 0", map[string]string{"node/n1/level": "-2"}, []string{"n1"}, 0},
	} {
		if got := levelsOf(tc.meta).Lowest(tc.ids); got != tc.want {
			t.Errorf("%s: Lowest = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLevelsAllowsAdmits(t *testing.T) {
	before := levelsOf(map[string]string{"node/n1/level": "1"})
	if got := before.Cluster(); got != 0 {
		t.Errorf("no recorded level: Cluster = %d, want 0", got)
	}
	if err := before.Allows(0); err != nil {
		t.Errorf("Allows(0) at level 0: %v", err)
	}
	if err := before.Allows(1); !errors.Is(err, ErrLevel) {
		t.Errorf("Allows(1) at level 0: %v, want ErrLevel", err)
	}
	if err := before.Admits("old", 0); err != nil {
		t.Errorf("Admits a level-0 node at level 0: %v", err)
	}

	at1 := levelsOf(map[string]string{ClusterLevelMeta: "1"})
	if got := at1.Cluster(); got != 1 {
		t.Errorf("Cluster = %d, want 1", got)
	}
	if err := at1.Allows(1); err != nil {
		t.Errorf("Allows(1) at level 1: %v", err)
	}
	if err := at1.Allows(2); !errors.Is(err, ErrLevel) {
		t.Errorf("Allows(2) at level 1: %v, want ErrLevel", err)
	}
	if err := at1.Admits("new", 1); err != nil {
		t.Errorf("Admits a level-1 node at level 1: %v", err)
	}
	if err := at1.Admits("newer", 2); err != nil {
		t.Errorf("Admits a level-2 node at level 1: %v", err)
	}
	err := at1.Admits("old", 0)
	if !errors.Is(err, ErrLevel) {
		t.Fatalf("Admits a level-0 node at level 1: %v, want ErrLevel", err)
	}
	t.Log(err)
}
