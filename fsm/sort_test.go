package fsm

import (
	"bytes"
	"testing"
)

// sortCmd is OpSort of key with a BY pattern (or none) and GET patterns.
func sortCmd(key, by string, gets ...string) Command {
	cmd := c(OpSort, append([]string{key, by}, gets...)...).i2(-1)
	if by != "" {
		cmd = cmd.fl(FlagSortBy)
	}
	return cmd
}

func TestSort(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{
		c(OpRPush, "l", "3", "1", "2", "10", " 5", ""),
		c(OpSAdd, "s", "b", "a", "c"),
		c(OpMSet, "w_1", "30", "w_2", "20", "w_3", "10", "o_1", "x", "o_2", "y"),
		c(OpHSet, "h_1", "f", "q"),
		c(OpRPush, "bad", "1", "x"),
		c(OpSet, "str", "v"),
		c(OpSAdd, "se", "", "b"),
	})
	nilR := replyNil
	run(t, s, []step{
		{t0, sortCmd("l", ""), bulks("", "1", "2", "3", " 5", "10")},
		{t0, sortCmd("l", "").fl(FlagSortDesc).i(1).i2(2), bulks(" 5", "3")},
		{t0, sortCmd("s", "").fl(FlagSortAlpha), bulks("a", "b", "c")},
		// Missing weights are 0; ties go by the element's bytes.
		{t0, sortCmd("l", "w_*"), bulks("", " 5", "10", "3", "2", "1")},
		{t0, sortCmd("l", "w_*", "o_*", "#", "h_*->f").i(4).i2(2),
			arr(bulk("y"), bulk("2"), nilR, bulk("x"), bulk("1"), bulk("q"))},
		// A constant BY keeps a list's order, DESC reverses it.
		{t0, sortCmd("l", "nosort").fl(FlagSortDesc), bulks("", " 5", "10", "2", "1", "3")},
		// A constant BY stops the sorting even when a later BY has a '*'.
		{t0, sortCmd("l", "w_*").fl(FlagSortNoSort), bulks("3", "1", "2", "10", " 5", "")},
		{t0, sortCmd("bad", ""), errr(ErrSortScore)},
		{t0, sortCmd("bad", "").fl(FlagSortAlpha), bulks("1", "x")},
		{t0, sortCmd("str", ""), errr(ErrWrongType)},
		{t0, sortCmd("nokey", ""), arr()},
		// An empty element is an empty bulk, not nil.
		{t0, sortCmd("l", "").fl(FlagSortAlpha).i2(1), bulks("")},
		{t0, sortCmd("l", "", "#").fl(FlagSortAlpha).i2(1), bulks("")},
		{t0, sortCmd("se", "").fl(FlagSortAlpha), bulks("", "b")},
		{t0, sortCmd("l", "").i(10), arr()},
	})
	// STORE: the result is a list; an empty result deletes the
	// destination.
	store := func(key, dst string, f Flags) Command {
		return c(OpSortStore, key, dst, "").i2(-1).fl(f)
	}
	run(t, s, []step{
		{t0, store("l", "dst", FlagSortAlpha), in(6)},
		{t0, c(OpLRange, "dst").i(0).i2(-1), bulks("", " 5", "1", "10", "2", "3")},
		{t0, store("nokey", "dst", 0), in(0)},
		{t0, c(OpExists, "dst"), in(0)},
		// A set sorted with a constant BY is sorted ALPHA for STORE.
		{t0, c(OpSortStore, "s", "d2", "nosort").i2(-1).fl(FlagSortBy), in(3)},
		{t0, c(OpLRange, "d2").i(0).i2(-1), bulks("a", "b", "c")},
	})
	checkInvariants(t, s)
}

// TestSortScore follows strtod as SORT checks it.
func TestSortScore(t *testing.T) {
	for in, want := range map[string]bool{
		"1": true, " 7": true, "": true, "0x10": true, "1e1": true, "-inf": true, "infinity": true,
		".5": true, "5.": true, "+5": true, "0x1p3": true,
		" ": false, "5 ": false, "x": false, "nan": false, "1e400": false, "1e-400": false, "1_000": false,
	} {
		if _, ok := sortScore([]byte(in)); ok != want {
			t.Errorf("sortScore(%q) valid = %v, want %v", in, ok, want)
		}
	}
}

// TestSortStoreDeterministic: equal weights keep the collection's order,
// so every replica stores the same list.
func TestSortStoreDeterministic(t *testing.T) {
	var snaps [][]byte
	for range 3 {
		s := NewStore()
		s.Apply(1, t0, []Command{
			c(OpSAdd, "s", "a", "b", "c", "d", "e", "f"),
			c(OpSortStore, "s", "out", "w_*").i2(-1).fl(FlagSortBy | FlagSortAlpha),
		})
		snaps = append(snaps, snapshotBytes(t, s))
	}
	if !bytes.Equal(snaps[0], snaps[1]) || !bytes.Equal(snaps[1], snaps[2]) {
		t.Fatal("SORT STORE with equal weights stored different lists")
	}
}

// TestSortStoreUnpacksZSet: SORT ... STORE converts a packed sorted set
// it sorts to the large form, as Redis's sort.c converts it to a skiplist,
// even when the sort then fails; its members, scores and TTL stay, and a
// WATCH of it still holds. SORT without STORE, a read, converts nothing.
func TestSortStoreUnpacksZSet(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{
		zadd("z", 2, "b", 1, "a", 3, "c"),
		zadd("bad", 1, "x"),
		c(OpExpireAt, "z").i(t0 + 100000),
	})
	run(t, s, []step{{t0, sortCmd("z", "").fl(FlagSortAlpha), bulks("a", "b", "c")}})
	if e := zsetEncoding(t, s, "z"); e != "listpack" {
		t.Fatalf("after SORT without STORE: %s", e)
	}
	watched := s.WatchKey(t0, []byte("z"))
	run(t, s, []step{
		{t0, c(OpSortStore, "z", "dst", "").i2(-1).fl(FlagSortAlpha | FlagSortDesc), in(3)},
		{t0, c(OpLRange, "dst").i(0).i2(-1), bulks("c", "b", "a")},
		{t0, c(OpZRange, "z").i(0).i2(-1), bulks("a", "b", "c")},
		{t0, c(OpZScore, "z", "b"), dbl("2")},
		{t0, c(OpPTTL, "z"), in(100000)},
		{t0, c(OpSortStore, "bad", "dst", "").i2(-1), errr(ErrSortScore)},
	})
	for _, k := range []string{"z", "bad"} {
		if e := zsetEncoding(t, s, k); e != "skiplist" {
			t.Errorf("%s after SORT ... STORE: %s", k, e)
		}
	}
	if now := s.WatchKey(t0, []byte("z")); now.Ver != watched.Ver {
		t.Errorf("the conversion changed z's version from %d to %d: a WATCH of it would fail", watched.Ver, now.Ver)
	}
	checkInvariants(t, s)
}
