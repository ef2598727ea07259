package fsm

import (
	"bytes"
	"maps"
	"testing"
)

func TestMeta(t *testing.T) {
	s := NewStore()
	if _, ok := s.Meta("node/a/resp"); ok {
		t.Fatal("empty store has metadata")
	}
	run(t, s, []step{
		{t0, c(OpMetaSet, "node/a/resp", "127.0.0.1:7001"), ok},
		{t0, c(OpMetaSet, "node/b/resp", "127.0.0.1:7002"), ok},
		{t0, c(OpMetaSet, "node/b/resp", "127.0.0.1:7003"), ok},
		{t0, c(OpMetaSet, "gone", ""), ok}, // deleting a missing name
		{t0, c(OpSet, "k", "v"), ok},
		{t0, c(OpFlushAll), ok},
		{t0, c(OpDBSize), in(0)},
		// Metadata is not in the keyspace.
		{t0, c(OpExists, "node/a/resp"), in(0)},
		{t0, c(OpKeys, "*"), arr()},
	})
	want := map[string]string{"node/a/resp": "127.0.0.1:7001", "node/b/resp": "127.0.0.1:7003"}
	if got := s.MetaAll(); !maps.Equal(got, want) {
		t.Fatalf("MetaAll after FLUSHALL = %v, want %v", got, want)
	}
	if v, ok := s.Meta("node/b/resp"); !ok || v != "127.0.0.1:7003" {
		t.Fatalf("Meta = %q, %v", v, ok)
	}
	s.MetaAll()["node/a/resp"] = "changed"
	if v, _ := s.Meta("node/a/resp"); v != "127.0.0.1:7001" {
		t.Fatal("MetaAll returned the store's own map")
	}

	// A snapshot keeps the metadata as it was when taken.
	sn := s.Snapshot()
	s.Apply(0, t0, []Command{c(OpMetaSet, "node/a/resp", ""), c(OpMetaSet, "new", "x")})
	if _, ok := s.Meta("node/a/resp"); ok {
		t.Fatal("an empty value did not delete the name")
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	r := NewStore()
	r.Apply(0, t0, []Command{c(OpMetaSet, "stale", "x")})
	if _, err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got := r.MetaAll(); !maps.Equal(got, want) {
		t.Fatalf("restored metadata %v, want %v", got, want)
	}
}

func TestMetaDeterministicSnapshot(t *testing.T) {
	// The same metadata set in different orders snapshots identically.
	a, b := NewStore(), NewStore()
	names := []string{"z", "a", "m", "node/1/resp", "node/10/resp", "node/2/resp"}
	for i, n := range names {
		a.Apply(0, t0, []Command{c(OpMetaSet, n, itoa(i))})
	}
	for i := len(names) - 1; i >= 0; i-- {
		b.Apply(0, t0, []Command{c(OpMetaSet, names[i], itoa(i))})
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("metadata order leaked into the snapshot")
	}
}

func TestMetaCAS(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		// Absent is expected as "".
		{t0, c(OpMetaCAS, "slots", "v1", "v2"), in(0)},
		{t0, c(OpMetaCAS, "slots", "", "v1"), in(1)},
		{t0, c(OpMetaCAS, "slots", "", "v1"), in(0)},
		{t0, c(OpMetaCAS, "slots", "v0", "v2"), in(0)},
		{t0, c(OpMetaCAS, "slots", "v1", "v2"), in(1)},
		{t0, c(OpMetaSet, "other", "x"), ok},
	})
	if v, _ := s.Meta("slots"); v != "v2" {
		t.Fatalf("slots = %q after the swaps, want v2", v)
	}
	// A refused swap leaves the map itself alone: snapshots share it.
	before := s.metaPub.Load()
	run(t, s, []step{{t0, c(OpMetaCAS, "slots", "v1", "v3"), in(0)}})
	if s.metaPub.Load() != before {
		t.Fatal("a refused swap changed the metadata")
	}
	// An empty new value deletes, from the expected value only.
	run(t, s, []step{
		{t0, c(OpMetaCAS, "slots", "v1", ""), in(0)},
		{t0, c(OpMetaCAS, "slots", "v2", ""), in(1)},
	})
	if _, ok := s.Meta("slots"); ok {
		t.Fatal("an empty value did not delete the name")
	}
	if got := s.MetaAll(); !maps.Equal(got, map[string]string{"other": "x"}) {
		t.Fatalf("metadata %v", got)
	}
}

func TestMetaTxn(t *testing.T) {
	s := NewStore()
	txn := func(compares, sets []string) Command { return MetaTxn(compares, sets) }
	run(t, s, []step{
		{t0, c(OpMetaSet, "groups", "g1"), ok},
		// Every comparison must hold, absent expected as "".
		{t0, txn([]string{"groups", "g1", "next", "1"}, []string{"next", "2", "move/2", "r"}), in(0)},
		{t0, txn([]string{"groups", "g0", "next", ""}, []string{"next", "1", "move/1", "r"}), in(0)},
		{t0, txn([]string{"groups", "g1", "next", ""}, []string{"next", "1", "move/1", "r"}), in(1)},
		// The other writer, checking the same names, now finds one changed.
		{t0, txn([]string{"groups", "g1", "next", ""}, []string{"groups", "g2"}), in(0)},
		{t0, txn([]string{"groups", "g1", "next", "1"}, []string{"groups", "g2", "move/1", ""}), in(1)},
	})
	if got := s.MetaAll(); !maps.Equal(got, map[string]string{"groups": "g2", "next": "1"}) {
		t.Fatalf("metadata %v", got)
	}
	// A refused transaction sets none of its names.
	before := s.metaPub.Load()
	run(t, s, []step{{t0, txn([]string{"next", "1", "groups", "g1"}, []string{"next", "9", "other", "x"}), in(0)}})
	if s.metaPub.Load() != before {
		t.Fatal("a refused transaction changed the metadata")
	}
}

func TestMetaHook(t *testing.T) {
	s := NewStore()
	calls := 0
	s.SetMetaHook(func() {
		calls++
		// Told after the lock is released: the store can be read.
		s.Meta("slots")
		s.Stats(t0)
	})
	steps := []struct {
		cmds []Command
		want int // calls after the entry
	}{
		{[]Command{c(OpSet, "k", "v")}, 0},
		{[]Command{c(OpMetaCAS, "slots", "", "v1"), c(OpMetaSet, "a", "1")}, 1}, // one call per entry
		{[]Command{c(OpMetaCAS, "slots", "", "v2")}, 1},                         // refused: no change
		{[]Command{c(OpMetaSet, "gone", "")}, 1},                                // nothing to delete
		{[]Command{c(OpScriptLoad, "return 1")}, 2},                             // scripts live there too
		{[]Command{c(OpDel, "k")}, 2},
	}
	for i, st := range steps {
		s.Apply(uint64(i+1), t0, st.cmds)
		if calls != st.want {
			t.Fatalf("entry %d (%v): hook called %d times, want %d", i+1, st.cmds[0].Op, calls, st.want)
		}
	}
	s.ApplyBatch([]Entry{{Index: 10, Now: t0, Cmds: []Command{c(OpMetaSet, "b", "1")}}, {Index: 11, Now: t0, Cmds: []Command{c(OpMetaSet, "b", "2")}}})
	if calls != 3 {
		t.Fatalf("a batch of two metadata writes: hook called %d times in all, want 3", calls)
	}

	// A restore replaces the metadata: told too.
	src := NewStore()
	src.Apply(0, t0, []Command{c(OpMetaSet, "slots", "restored")})
	var buf bytes.Buffer
	sn := src.Snapshot()
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	if _, err := s.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Fatalf("after a restore: hook called %d times in all, want 4", calls)
	}
	if v, _ := s.Meta("slots"); v != "restored" {
		t.Fatalf("slots = %q after the restore", v)
	}
}
