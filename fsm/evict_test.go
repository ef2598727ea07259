package fsm

import (
	"slices"
	"testing"
)

// TestEvictionCandidates: each policy picks the keys it should, and
// OpEvict deletes them whatever their deadline, announcing "evicted".
func TestEvictionCandidates(t *testing.T) {
	const now = 1000
	s := NewStore()
	var cmds []Command
	for i := range 20 {
		cmds = append(cmds, c(OpSet, "plain"+itoa(i), "v"))
	}
	for i := range 10 {
		// ttl9 is due first, ttl0 last.
		cmds = append(cmds, c(OpSet, "ttl"+itoa(i), "v").i(int64(now+100000-1000*i)))
	}
	s.Apply(1, now, cmds)

	for _, tc := range []struct {
		policy EvictPolicy
		check  func(keys []string) bool
	}{
		{EvictVolatileTTL, func(keys []string) bool { return slices.Equal(keys, []string{"ttl9", "ttl8", "ttl7"}) }},
		{EvictVolatileRandom, func(keys []string) bool {
			return len(keys) == 3 && !slices.ContainsFunc(keys, func(k string) bool { return k[:3] != "ttl" })
		}},
		{EvictAllKeysRandom, func(keys []string) bool { return len(keys) == 3 }},
	} {
		got, freed := s.EvictionCandidates(tc.policy, 5, 3, 1<<30)
		var keys []string
		for _, k := range got {
			keys = append(keys, string(k))
		}
		if !tc.check(keys) || freed <= 0 {
			t.Errorf("policy %d: candidates %q (%d bytes)", tc.policy, keys, freed)
		}
	}
	if keys, _ := s.EvictionCandidates(EvictVolatileTTL, 5, 100, 1); len(keys) != 1 {
		t.Errorf("asked to free 1 byte, got %d keys", len(keys))
	}

	var events []string
	s.SetNotifyClasses(NotifyAll | NotifyKeyevent)
	s.SetNotifyHook(func(evs []Event) {
		for _, e := range evs {
			events = append(events, e.Name+" "+e.Key)
		}
	})
	r := s.Apply(2, now, []Command{c(OpEvict, "ttl9", "plain0", "missing")})
	if r[0].String() != in(2).String() {
		t.Fatalf("OpEvict = %v, want :2", r[0])
	}
	if s.Evictable(EvictNone) || !s.Evictable(EvictVolatileTTL) {
		t.Error("Evictable")
	}
	run(t, s, []step{{now, c(OpExists, "ttl9", "plain0", "plain1"), in(1)}})
	if !slices.Equal(events, []string{"evicted ttl9", "evicted plain0"}) {
		t.Errorf("events %q, want evicted ttl9 and plain0", events)
	}
}
