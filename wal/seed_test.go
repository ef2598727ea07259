package wal

import (
	"errors"
	"testing"
)

// TestSeed: a log opened on a seeded directory restores the seed's
// snapshot and appends after its index; a second seed is refused.
func TestSeed(t *testing.T) {
	fs := NewMemFS()
	src := &model{}
	for i := 1; i <= 5; i++ {
		src.apply(uint64(i), rec(i))
	}
	index, write, _ := src.snapshot()
	if err := Seed(fs, testDir, index, write); err != nil {
		t.Fatal(err)
	}
	m := &model{}
	l := mustOpen(t, memOptions(t, fs, m))
	if got := m.last(); got != 5 {
		t.Fatalf("restored up to %d, want 5", got)
	}
	appendN(t, l, 6, 3)
	m.check(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, write, _ = src.snapshot()
	if err := Seed(fs, testDir, index, write); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second Seed: %v, want ErrNotEmpty", err)
	}
	m2 := &model{}
	l = mustOpen(t, memOptions(t, fs, m2))
	defer l.Close()
	if got := m2.last(); got != 8 {
		t.Fatalf("reopened up to %d, want 8", got)
	}
}
