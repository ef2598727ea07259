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
