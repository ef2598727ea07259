package fsm

import (
	"slices"
	"testing"
)

// TestModifiedHook: while tracking is on, the hook receives the keys each
// applied batch changed (the expiry's deletions apart), and a flush; while
// it is off, nothing but a flush.
func TestModifiedHook(t *testing.T) {
	s := NewStore()
	type call struct {
		keys, deleted []string
		flushed       bool
	}
	var calls []call
	s.SetModifiedHook(func(keys, deleted []string, flushed bool) {
		calls = append(calls, call{slices.Clone(keys), slices.Clone(deleted), flushed})
	})
	s.Apply(0, 1000, []Command{c(OpSet, "a", "1")})
	if len(calls) != 0 {
		t.Fatalf("tracking off: %v", calls)
	}
	s.SetTracking(true)
	s.Apply(0, 1000, []Command{c(OpSet, "a", "2"), c(OpIncrBy, "n").i(1), c(OpDel, "missing"),
		c(OpSet, "t", "x").i(1500)})
	if len(calls) != 1 || !slices.Equal(calls[0].keys, []string{"a", "n", "t"}) || calls[0].flushed {
		t.Fatalf("writes: %+v", calls)
	}
	s.Apply(0, 2000, []Command{c(OpDelExpired, "t", "a")})
	if len(calls) != 2 || len(calls[1].keys) != 0 || !slices.Equal(calls[1].deleted, []string{"t"}) {
		t.Fatalf("expiry: %+v", calls)
	}
	s.Apply(0, 2000, []Command{c(OpFlushAll)})
	if len(calls) != 3 || !calls[2].flushed {
		t.Fatalf("flush: %+v", calls)
	}
	s.SetTracking(false)
	s.Apply(0, 2000, []Command{c(OpSet, "a", "3"), c(OpFlushAll)})
	if len(calls) != 4 || !calls[3].flushed || len(calls[3].keys) != 0 {
		t.Fatalf("flush with tracking off: %+v", calls)
	}
}
