package fsm

import (
	"math"
	"strings"
	"testing"
)

const t0 = 1_000_000 // a "now" in Unix ms for the tables

func TestStringWrites(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"set get", []step{
			{t0, c(OpSet, "k", "v"), ok},
			{t0, c(OpGet, "k"), bulk("v")},
			{t0, c(OpGet, "nokey"), nilr},
			{t0, c(OpSet, "", ""), ok},
			{t0, c(OpGet, ""), bulk("")},
		}},
		{"set nx xx", []step{
			{t0, c(OpSet, "k", "v").fl(FlagXX), nilr},
			{t0, c(OpSet, "k", "v").fl(FlagNX), ok},
			{t0, c(OpSet, "k", "w").fl(FlagNX), nilr},
			{t0, c(OpSet, "k", "w").fl(FlagXX), ok},
			{t0, c(OpGet, "k"), bulk("w")},
		}},
		{"set get flag", []step{
			{t0, c(OpSet, "k", "v").fl(FlagGet), nilr},
			{t0, c(OpSet, "k", "w").fl(FlagGet), bulk("v")},
			{t0, c(OpSet, "k", "x").fl(FlagGet | FlagNX), bulk("w")},
			{t0, c(OpGet, "k"), bulk("w")},
			{t0, c(OpSet, "n", "x").fl(FlagGet | FlagXX), nilr},
			{t0, c(OpExists, "n"), in(0)},
		}},
		{"set clears ttl unless keepttl", []step{
			{t0, c(OpSet, "k", "v").i(t0 + 5000), ok},
			{t0, c(OpPTTL, "k"), in(5000)},
			{t0, c(OpSet, "k", "w").fl(FlagKeepTTL), ok},
			{t0, c(OpPTTL, "k"), in(5000)},
			{t0, c(OpSet, "k", "x"), ok},
			{t0, c(OpPTTL, "k"), in(-1)},
		}},
		{"set deadline in the past deletes", []step{
			{t0, c(OpSet, "k", "v"), ok},
			{t0, c(OpSet, "k", "w").i(t0), ok},
			{t0, c(OpExists, "k"), in(0)},
			{t0, c(OpSet, "k", "v"), ok},
			{t0, c(OpSet, "k", "w").i(1).fl(FlagGet), bulk("v")},
			{t0, c(OpExists, "k"), in(0)},
			{t0, c(OpDBSize), in(0)},
		}},
		{"expired key is absent for writes", []step{
			{t0, c(OpSet, "k", "5").i(t0 + 10), ok},
			{t0 + 10, c(OpGet, "k"), nilr},
			{t0 + 10, c(OpSet, "k", "v").fl(FlagNX), ok},
			{t0 + 10, c(OpPTTL, "k"), in(-1)},
			{t0, c(OpSet, "i", "5").i(t0 + 10), ok},
			{t0 + 10, c(OpIncrBy, "i").i(1), in(1)},
			{t0, c(OpSet, "a", "xyz").i(t0 + 10), ok},
			{t0 + 10, c(OpAppend, "a", "b"), in(1)},
			{t0, c(OpSet, "e", "xyz").i(t0 + 10), ok},
			{t0 + 10, c(OpExpireAt, "e").i(t0 + 100), in(0)},
			{t0 + 10, c(OpRename, "e", "f"), errr(ErrNoSuchKey)},
			{t0, c(OpSet, "d", "xyz").i(t0 + 10), ok},
			{t0 + 10, c(OpDel, "d"), in(0)},
			{t0 + 10, c(OpSetNX, "d", "1"), in(1)},
			{t0, c(OpSet, "m", "xyz").i(t0 + 10), ok},
			{t0 + 10, c(OpMSetNX, "m", "1"), in(1)},
			{t0, c(OpSet, "g", "xyz").i(t0 + 10), ok},
			{t0 + 10, c(OpGetSet, "g", "1"), nilr},
			{t0 + 10, c(OpGetDel, "g"), bulk("1")},
			{t0, c(OpSet, "p", "xyz").i(t0 + 10), ok},
			{t0 + 10, c(OpPersist, "p"), in(0)},
			{t0 + 10, c(OpSetRange, "p", "ab").i(1), in(3)},
			{t0 + 10, c(OpGet, "p"), bulk("\x00ab")},
		}},
		{"setnx getset getdel", []step{
			{t0, c(OpSetNX, "k", "v"), in(1)},
			{t0, c(OpSetNX, "k", "w"), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 1000), in(1)},
			{t0, c(OpGetSet, "k", "x"), bulk("v")},
			{t0, c(OpTTL, "k"), in(-1)},
			{t0, c(OpGetSet, "n", "x"), nilr},
			{t0, c(OpGetDel, "k"), bulk("x")},
			{t0, c(OpGetDel, "k"), nilr},
		}},
		{"getex", []step{
			{t0, c(OpGetEx, "k"), nilr},
			{t0, c(OpSet, "k", "v"), ok},
			{t0, c(OpGetEx, "k").i(t0 + 2500).fl(FlagExpire), bulk("v")},
			{t0, c(OpTTL, "k"), in(3)},
			{t0, c(OpGetEx, "k"), bulk("v")},
			{t0, c(OpTTL, "k"), in(3)},
			{t0, c(OpGetEx, "k").fl(FlagPersist), bulk("v")},
			{t0, c(OpTTL, "k"), in(-1)},
			{t0, c(OpGetEx, "k").i(t0).fl(FlagExpire), bulk("v")},
			{t0, c(OpExists, "k"), in(0)},
		}},
		{"mset msetnx", []step{
			{t0, c(OpSet, "a", "old").i(t0 + 100), ok},
			{t0, c(OpMSet, "a", "1", "b", "2", "a", "3"), ok},
			{t0, c(OpMGet, "a", "b", "c"), arr(bulk("3"), bulk("2"), nilr)},
			{t0, c(OpTTL, "a"), in(-1)},
			{t0, c(OpMSetNX, "c", "1", "a", "x"), in(0)},
			{t0, c(OpExists, "c"), in(0)},
			{t0, c(OpMSetNX, "c", "1", "d", "2", "c", "3"), in(1)},
			{t0, c(OpMGet, "c", "d"), arr(bulk("3"), bulk("2"))},
		}},
		{"append", []step{
			{t0, c(OpAppend, "k", "ab"), in(2)},
			{t0, c(OpAppend, "k", "cd"), in(4)},
			{t0, c(OpAppend, "k", ""), in(4)},
			{t0, c(OpGet, "k"), bulk("abcd")},
			{t0, c(OpExpireAt, "k").i(t0 + 3000), in(1)},
			{t0, c(OpAppend, "k", "e"), in(5)},
			{t0, c(OpTTL, "k"), in(3)},
		}},
		{"setrange", []step{
			{t0, c(OpSetRange, "k", "").i(5), in(0)},
			{t0, c(OpExists, "k"), in(0)},
			{t0, c(OpSetRange, "k", "ab").i(3), in(5)},
			{t0, c(OpGet, "k"), bulk("\x00\x00\x00ab")},
			{t0, c(OpSetRange, "k", "XYZ").i(1), in(5)},
			{t0, c(OpGet, "k"), bulk("\x00XYZb")},
			{t0, c(OpSetRange, "k", "").i(100), in(5)},
			{t0, c(OpSetRange, "k", "x").i(MaxStringLen), errr(ErrStringTooLong)},
			{t0, c(OpSetRange, "k", "xy").i(MaxStringLen - 1), errr(ErrStringTooLong)},
			{t0, c(OpSetRange, "k", "x").i(3 << 20), in(3<<20 + 1)},
			{t0, c(OpSetRange, "n", "x").i(1 << 62), errr(ErrStringTooLong)},
		}},
		{"incrby", []step{
			{t0, c(OpIncrBy, "k").i(1), in(1)},
			{t0, c(OpIncrBy, "k").i(-11), in(-10)},
			{t0, c(OpGet, "k"), bulk("-10")},
			{t0, c(OpSet, "k", "9223372036854775806"), ok},
			{t0, c(OpIncrBy, "k").i(1), in(maxInt64)},
			{t0, c(OpIncrBy, "k").i(1), errr(ErrOverflow)},
			{t0, c(OpSet, "k", "-9223372036854775808"), ok},
			{t0, c(OpIncrBy, "k").i(-1), errr(ErrOverflow)},
			{t0, c(OpIncrBy, "k").i(maxInt64), in(-1)},
			{t0, c(OpSet, "k", "9223372036854775808"), ok},
			{t0, c(OpIncrBy, "k").i(1), errr(ErrNotInteger)},
			{t0, c(OpSet, "t", "1").i(t0 + 5000), ok},
			{t0, c(OpIncrBy, "t").i(1), in(2)},
			{t0, c(OpPTTL, "t"), in(5000)},
		}},
		{"rename", []step{
			{t0, c(OpRename, "a", "b"), errr(ErrNoSuchKey)},
			{t0, c(OpRenameNX, "a", "b"), errr(ErrNoSuchKey)},
			{t0, c(OpRename, "a", "a"), errr(ErrNoSuchKey)},
			{t0, c(OpSet, "a", "1").i(t0 + 9000), ok},
			{t0, c(OpRename, "a", "a"), ok},
			{t0, c(OpRenameNX, "a", "a"), in(0)},
			{t0, c(OpSet, "b", "2"), ok},
			{t0, c(OpRenameNX, "a", "b"), in(0)},
			{t0, c(OpRename, "a", "b"), ok},
			{t0, c(OpMGet, "a", "b"), arr(nilr, bulk("1"))},
			{t0, c(OpPTTL, "b"), in(9000)},
			{t0, c(OpRenameNX, "b", "c"), in(1)},
			{t0, c(OpPTTL, "c"), in(9000)},
			{t0 + 9000, c(OpExists, "c"), in(0)},
		}},
		{"expire flags", []step{
			{t0, c(OpExpireAt, "k").i(t0 + 100), in(0)},
			{t0, c(OpSet, "k", "v"), ok},
			{t0, c(OpExpireAt, "k").i(t0 + 100).fl(FlagXX), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 100).fl(FlagGT), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 100).fl(FlagLT), in(1)},
			{t0, c(OpExpireAt, "k").i(t0 + 200).fl(FlagNX), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 200).fl(FlagLT), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 100).fl(FlagGT), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 200).fl(FlagGT), in(1)},
			{t0, c(OpExpireAt, "k").i(t0 + 300).fl(FlagXX | FlagGT), in(1)},
			{t0, c(OpPExpireTime, "k"), in(t0 + 300)},
			{t0, c(OpExpireAt, "k").i(math.MaxInt64), in(1)},
			{t0, c(OpExpireTime, "k"), in(9223372036854776)},
			{t0, c(OpExpireAt, "k").i(t0 + 300), in(1)},
			{t0, c(OpPersist, "k"), in(1)},
			{t0, c(OpPersist, "k"), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 + 200).fl(FlagNX), in(1)},
			{t0, c(OpExpireAt, "k").i(t0), in(1)},
			{t0, c(OpExists, "k"), in(0)},
			{t0, c(OpSet, "k", "v"), ok},
			{t0, c(OpExpireAt, "k").i(t0 - 5).fl(FlagGT), in(0)},
			{t0, c(OpExpireAt, "k").i(t0 - 5).fl(FlagLT), in(1)},
			{t0, c(OpExists, "k"), in(0)},
		}},
		{"del and flush", []step{
			{t0, c(OpMSet, "a", "1", "b", "2", "c", "3"), ok},
			{t0, c(OpDel, "a", "a", "x", "b"), in(2)},
			{t0, c(OpDBSize), in(1)},
			{t0, c(OpFlushAll), ok},
			{t0, c(OpDBSize), in(0)},
		}},
		{"del expired", []step{
			{t0, c(OpSet, "a", "1").i(t0 + 10), ok},
			{t0, c(OpSet, "b", "1").i(t0 + 10), ok},
			{t0, c(OpSet, "c", "1"), ok},
			{t0 + 5, c(OpDelExpired, "a", "c", "x"), in(0)},
			{t0 + 10, c(OpSet, "b", "2"), ok},
			{t0 + 10, c(OpDelExpired, "a", "b", "c"), in(1)},
			{t0 + 10, c(OpMGet, "a", "b", "c"), arr(nilr, bulk("2"), bulk("1"))},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, NewStore(), tt.steps) })
	}
}

func TestIncrByFloat(t *testing.T) {
	// Expectations from redis-server 7.0 (INCRBYFLOAT after SET).
	tests := []struct{ old, incr, want string }{
		{"10.5", "0.1", "10.6"},
		{"0.1", "0.2", "0.3"},
		{"3.0e3", "0", "3000"},
		{"5.0e3", "0", "5000"},
		{"0", "1e300", "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144"},
		{"inf", "1", ErrNaNOrInfinity},
		{"0x10", "1", "17"},
		{"1e", "1", ErrNotFloat},
		{"+1.5", "1", "2.5"},
		{"1.", "1", "2"},
		{".5", "1", "1.5"},
		{"0", "-0", "0"},
		{"-0", "0", "0"},
		{"1", "1e-20", "1"},
		{"0", "1.0e-5", "0.00001"},
		{"0", "0x1p-3", "0.125"},
		{"12345678901234567890", "1", "12345678901234567891"},
		{"1.5", "0x1p3", "9.5"},
		{"0", "infinity", ErrNaNOrInfinity},
		{"3.14159", "2.71828", "5.85987"},
		{"1e-4950", "0", "0"},
		{"1e-5000", "0", ErrNotFloat},
		{" 1", "1", ErrNotFloat},
		{"1 ", "1", ErrNotFloat},
		{"nan", "1", ErrNotFloat},
		{"1_0", "1", ErrNotFloat},
		{"0x", "1", ErrNotFloat},
		{"", "1", ErrNotFloat},
		{"abc", "1", ErrNotFloat},
		{"1e5000", "1", ErrNotFloat},
	}
	for _, tt := range tests {
		s := NewStore()
		s.Apply(0, t0, []Command{c(OpSet, "k", tt.old)})
		got := s.Apply(0, t0, []Command{c(OpIncrByFloat, "k", tt.incr)})[0]
		want := bulk(tt.want)
		if strings.HasPrefix(tt.want, "ERR") {
			want = errr(tt.want)
		}
		if got.String() != want.String() {
			t.Errorf("%q + %q = %v, want %v", tt.old, tt.incr, got, want)
		}
		if !got.IsError() {
			if v := s.Read(t0, c(OpGet, "k")); string(v.Bulk) != tt.want {
				t.Errorf("%q + %q stored %v", tt.old, tt.incr, v)
			}
		}
	}

	// Without the increment's text, Float is used.
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpIncrByFloat, "k").f(2.5), bulk("2.5")},
		{t0, c(OpIncrByFloat, "k").f(-5), bulk("-2.5")},
		{t0, c(OpSet, "t", "1").i(t0 + 5000), ok},
		{t0, c(OpIncrByFloat, "t").f(1), bulk("2")},
		{t0, c(OpPTTL, "t"), in(5000)},
		{t0, c(OpSet, "w", "x"), ok},
		{t0, c(OpIncrByFloat, "w").f(1), errr(ErrNotFloat)},
	})
}

func TestApplyPanicsOnBadCommand(t *testing.T) {
	for _, cmd := range []Command{
		{Op: OpInvalid},
		{Op: 63},
		{Op: OpSet, Args: [][]byte{[]byte("k")}},
		{Op: OpGet, Args: [][]byte{[]byte("k")}},
		{Op: OpDel},
		{Op: OpSet, Args: [][]byte{nil, nil}, Flags: 1 << 15},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Apply(%+v) did not panic", cmd)
				}
			}()
			NewStore().Apply(0, t0, []Command{cmd})
		}()
	}
}

func TestApplyIndex(t *testing.T) {
	s := NewStore()
	s.Apply(5, t0, []Command{c(OpSet, "a", "1")})
	s.Apply(0, t0, []Command{c(OpSet, "a", "1")})
	if got := s.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex = %d, want 5", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("re-applying index 5 did not panic")
		}
	}()
	s.Apply(5, t0, []Command{c(OpSet, "a", "1")})
}

func TestWrongType(t *testing.T) {
	// Only strings exist today, so plant a value of another kind directly.
	s := NewStore()
	it := newItem([]byte("h"), nil, 0)
	it.kind = 99
	s.putLocked(it)
	wt := errr(ErrWrongType)
	run(t, s, []step{
		{t0, c(OpGet, "h"), wt},
		{t0, c(OpSet, "h", "v").fl(FlagGet), wt},
		{t0, c(OpGetSet, "h", "v"), wt},
		{t0, c(OpGetDel, "h"), wt},
		{t0, c(OpGetEx, "h"), wt},
		{t0, c(OpAppend, "h", "v"), wt},
		{t0, c(OpSetRange, "h", "").i(0), wt},
		{t0, c(OpIncrBy, "h").i(1), wt},
		{t0, c(OpIncrByFloat, "h", "1"), wt},
		{t0, c(OpStrLen, "h"), wt},
		{t0, c(OpGetRange, "h").i(0).i2(1), wt},
		{t0, c(OpMGet, "h"), arr(nilr)},
		{t0, c(OpType, "h"), status("none")},
		{t0, c(OpExists, "h"), in(1)},
		{t0, c(OpSet, "h", "v"), ok},
		{t0, c(OpGet, "h"), bulk("v")},
	})
}

func TestApplyBatch(t *testing.T) {
	s := NewStore()
	got := s.ApplyBatch([]Entry{
		{Index: 1, Now: t0, Cmds: []Command{c(OpSet, "a", "1"), c(OpIncrBy, "a").i(1)}},
		{Index: 2, Now: t0, Cmds: nil},
		{Index: 3, Now: t0, Cmds: []Command{c(OpIncrBy, "a").i(1)}},
	})
	want := [][]Reply{{ok, in(2)}, {}, {in(3)}}
	if len(got) != len(want) {
		t.Fatalf("%d reply groups, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("entry %d: %v, want %v", i, got[i], want[i])
		}
		for j := range want[i] {
			if got[i][j].String() != want[i][j].String() {
				t.Errorf("entry %d reply %d: %v, want %v", i, j, got[i][j], want[i][j])
			}
		}
	}
	if s.AppliedIndex() != 3 {
		t.Errorf("AppliedIndex = %d", s.AppliedIndex())
	}
}

func TestValidFloat(t *testing.T) {
	for s, want := range map[string]bool{
		"1": true, "-1.5e3": true, "0x10": true, "0x1p-3": true, "inf": true, "-Infinity": true,
		"1e400": true, ".5": true, "5.": true,
		"": false, " 1": false, "nan": false, "1e": false, "0x": false, "1_0": false, "1e5000": false, "--1": false,
	} {
		if got := ValidFloat([]byte(s)); got != want {
			t.Errorf("ValidFloat(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestLazyFreed: UNLINK counts each value that takes more than 64
// allocations to free (Redis's LAZYFREE_THRESHOLD), FLUSHALL ASYNC every
// key; DEL, FLUSHALL and small values count nothing, as in Redis.
func TestLazyFreed(t *testing.T) {
	s := NewStore()
	big := func(key string) Command {
		cmd := c(OpSAdd, key)
		for i := range 200 {
			cmd.Args = append(cmd.Args, []byte("m"+itoa(i)))
		}
		return cmd
	}
	s.Apply(1, 1000, []Command{big("a"), big("b"), big("c"), c(OpSet, "s", "v")})
	s.Apply(2, 1000, []Command{c(OpDel, "a"), c(OpDel, "b", "s").fl(FlagLazy)})
	if n := s.LazyFreed(); n != 1 {
		t.Fatalf("after DEL of a large set and UNLINK of another and a string: %d, want 1", n)
	}
	s.Apply(3, 1000, []Command{c(OpSet, "x", "1"), c(OpFlushAll)})
	s.Apply(4, 1000, []Command{c(OpSet, "x", "1"), c(OpSet, "y", "1"), c(OpFlushAll).fl(FlagLazy)})
	if n := s.LazyFreed(); n != 3 {
		t.Fatalf("after FLUSHALL and FLUSHALL ASYNC of two keys: %d, want 3", n)
	}
}
