package fsm

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
)

// Expected replies below were taken from redis-server 7.0.15.

// putForeign stores a value of another type under key, for WRONGTYPE.
func putForeign(s *Store, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(s.newCollection([]byte(key), kindHash, []byte{1}, nil, 0))
}

func bf(ops ...BitFieldOp) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = string(EncodeBitFieldOp(op))
	}
	return out
}

func bfCmd(op Op, key string, ops ...BitFieldOp) Command {
	return c(op, append([]string{key}, bf(ops...)...)...)
}

func ints(ns ...int64) Reply {
	rs := make([]Reply, len(ns))
	for i, n := range ns {
		rs[i] = in(n)
	}
	return arr(rs...)
}

func TestSetBitGetBit(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	run(t, s, []step{
		{t0, c(OpSetBit, "b").i(7).i2(1), in(0)},
		{t0, c(OpSetBit, "b").i(7).i2(1), in(1)},
		{t0, c(OpSetBit, "b").i(100).i2(1), in(0)},
		{t0, c(OpGet, "b"), bulk("\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08")},
		{t0, c(OpGetBit, "b").i(100), in(1)},
		{t0, c(OpGetBit, "b").i(99), in(0)},
		{t0, c(OpGetBit, "b").i(1 << 40), in(0)},
		{t0, c(OpGetBit, "nokey").i(3), in(0)},
		{t0, c(OpSetBit, "b").i(100).i2(0), in(1)},
		{t0, c(OpStrLen, "b"), in(13)},
		{t0, c(OpSetBit, "h").i(1).i2(1), errr(ErrWrongType)},
		{t0, c(OpGetBit, "h").i(1), errr(ErrWrongType)},
		// The TTL stays.
		{t0, c(OpSet, "t", "a").i(t0 + 5000), ok},
		{t0, c(OpSetBit, "t").i(100).i2(1), in(0)},
		{t0, c(OpPTTL, "t"), in(5000)},
		// An expired key is missing.
		{t0 + 6000, c(OpGetBit, "t").i(1), in(0)},
		{t0 + 6000, c(OpSetBit, "t").i(1).i2(1), in(0)},
		{t0 + 6000, c(OpPTTL, "t"), in(-1)},
	})
	checkInvariants(t, s)
}

func TestBitCount(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	deferred := c(OpBitCount, "s", ErrNotInteger).fl(FlagDeferredError)
	run(t, s, []step{
		{t0, c(OpSet, "s", "foobar"), ok},
		{t0, c(OpBitCount, "s"), in(26)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange).i(1).i2(1), in(6)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange).i(-1).i2(-2), in(0)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange | FlagBitUnit).i(-2).i2(-1), in(1)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange | FlagBitUnit).i(5).i2(30), in(17)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange | FlagBitUnit).i(0).i2(-1), in(26)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange).i(0).i2(100), in(26)},
		{t0, c(OpBitCount, "s").fl(FlagBitRange).i(4).i2(2), in(0)},
		{t0, c(OpBitCount, "nokey").fl(FlagBitRange).i(0).i2(1), in(0)},
		{t0, c(OpBitCount, "h"), errr(ErrWrongType)},
		// Redis 7.0 looks the key up before it parses the range.
		{t0, deferred, errr(ErrNotInteger)},
		{t0, c(OpBitCount, "nokey", ErrNotInteger).fl(FlagDeferredError), in(0)},
		{t0, c(OpBitCount, "h", ErrNotInteger).fl(FlagDeferredError), errr(ErrWrongType)},
		{t0, c(OpSet, "e", ""), ok},
		{t0, c(OpBitCount, "e"), in(0)},
	})
}

func TestBitPos(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	bp := func(key string, bit int, f Flags, start, end int64) Command {
		cmd := c(OpBitPos, key).fl(f).i(start).i2(end)
		if bit == 1 {
			cmd.Flags |= FlagBitSet
		}
		return cmd
	}
	rng, both, bits := FlagBitRange, FlagBitRange|FlagBitEnd, FlagBitRange|FlagBitEnd|FlagBitUnit
	run(t, s, []step{
		{t0, c(OpSet, "s", "foobar"), ok},
		{t0, c(OpSet, "ff", "\xff\xff\xff"), ok},
		{t0, bp("s", 1, bits, 0, -1), in(1)},
		{t0, bp("s", 0, bits, 2, -1), in(3)},
		{t0, bp("s", 0, 0, 0, 0), in(0)},
		{t0, bp("s", 1, 0, 0, 0), in(1)},
		{t0, bp("s", 1, rng, 2, 0), in(17)},
		{t0, bp("s", 1, bits, 7, 15), in(9)},
		{t0, bp("s", 0, bits, 7, 15), in(7)},
		{t0, bp("s", 1, bits, -5, -1), in(43)},
		{t0, bp("s", 1, rng, 100, 0), in(-1)},
		{t0, bp("ff", 0, 0, 0, 0), in(24)},
		{t0, bp("ff", 0, both, 0, -1), in(-1)},
		{t0, bp("ff", 0, rng, 0, 0), in(24)},
		{t0, bp("ff", 0, bits, 0, 23), in(-1)},
		{t0, bp("nokey", 1, 0, 0, 0), in(-1)},
		{t0, bp("nokey", 0, both, 5, 6), in(0)},
		{t0, bp("h", 1, 0, 0, 0), errr(ErrWrongType)},
		{t0, c(OpSet, "e", ""), ok},
		{t0, bp("e", 0, 0, 0, 0), in(-1)},
		{t0, bp("e", 1, 0, 0, 0), in(-1)},
		{t0, c(OpBitPos, "s", ErrSyntax).fl(FlagDeferredError), errr(ErrSyntax)},
		{t0, c(OpBitPos, "nokey", ErrSyntax).fl(FlagDeferredError | FlagBitSet), in(-1)},
	})
}

// ErrSyntax is only a test's deferred error text here.
const ErrSyntax = "ERR syntax error"

// naiveBitPos is BITPOS by its definition, one bit at a time: the first
// bit equal to bit in the range; none found, -1, except that looking for
// a 0 without an end finds the first bit past the string.
func naiveBitPos(v []byte, bit byte, cmd Command) int64 {
	n := int64(len(v))
	sb, eb := int64(0), n*8-1
	if cmd.Flags&FlagBitRange != 0 {
		unit := int64(8)
		if cmd.Flags&FlagBitUnit != 0 {
			unit = 1
		}
		total := n * 8 / unit
		start, end := cmd.Int, total-1
		if cmd.Flags&FlagBitEnd != 0 {
			end = cmd.Int2
		}
		if start < 0 {
			start += total
		}
		if end < 0 {
			end += total
		}
		start, end = max(start, 0), max(end, 0)
		end = min(end, total-1)
		sb, eb = start*unit, end*unit+unit-1
	}
	if sb > eb {
		return -1
	}
	for i := sb; i <= eb; i++ {
		if v[i>>3]>>(7-uint(i&7))&1 == bit {
			return i
		}
	}
	if bit == 1 || cmd.Flags&FlagBitEnd != 0 {
		return -1
	}
	return eb + 1
}

func naiveBitCount(v []byte, cmd Command) int64 {
	if cmd.Flags&FlagBitRange == 0 {
		return popcount(v)
	}
	if cmd.Int < 0 && cmd.Int2 < 0 && cmd.Int > cmd.Int2 {
		return 0
	}
	n := int64(len(v))
	unit := int64(8)
	if cmd.Flags&FlagBitUnit != 0 {
		unit = 1
	}
	total := n * 8 / unit
	start, end := cmd.Int, cmd.Int2
	if start < 0 {
		start += total
	}
	if end < 0 {
		end += total
	}
	start, end = max(start, 0), max(end, 0)
	end = min(end, total-1)
	var cnt int64
	for i := start * unit; i <= end*unit+unit-1 && start <= end; i++ {
		cnt += int64(v[i>>3] >> (7 - uint(i&7)) & 1)
	}
	return cnt
}

// TestBitPosBitCountNaive compares both with their definitions over
// random strings and ranges.
func TestBitPosBitCountNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := NewStore()
	for i := range 20000 {
		v := make([]byte, r.IntN(12)+1)
		for j := range v {
			v[j] = []byte{0, 0xff, byte(r.IntN(256)), 0x80, 0x01}[r.IntN(5)]
		}
		s.Apply(0, t0, []Command{c(OpSet, "k", string(v))})
		flags := []Flags{0, FlagBitRange, FlagBitRange | FlagBitEnd}[r.IntN(3)]
		if flags != 0 && r.IntN(2) == 0 {
			flags |= FlagBitUnit
		}
		lim := int64(len(v) * 10)
		cmd := c(OpBitPos, "k").fl(flags).i(r.Int64N(2*lim) - lim).i2(r.Int64N(2*lim) - lim)
		bit := byte(r.IntN(2))
		if bit == 1 {
			cmd.Flags |= FlagBitSet
		}
		if got, want := s.Read(t0, cmd), naiveBitPos(v, bit, cmd); got.Int != want {
			t.Fatalf("case %d: BITPOS %x bit %d %v: got %v, want %d", i, v, bit, cmd, got, want)
		}
		count := c(OpBitCount, "k").fl(flags &^ FlagBitEnd).i(cmd.Int).i2(cmd.Int2)
		if got, want := s.Read(t0, count), naiveBitCount(v, count); got.Int != want {
			t.Fatalf("case %d: BITCOUNT %x %v: got %v, want %d", i, v, count, got, want)
		}
	}
}

func TestBitOp(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	run(t, s, []step{
		{t0, c(OpSet, "a", "\xf0\x0f\xff"), ok},
		{t0, c(OpSet, "b", "\x3c"), ok},
		{t0, c(OpSet, "d", "x").i(t0 + 5000), ok},
		{t0, c(OpBitOp, "d", "a", "b").i(BitOpAnd), in(3)},
		{t0, c(OpGet, "d"), bulk("\x30\x00\x00")},
		{t0, c(OpPTTL, "d"), in(-1)},
		{t0, c(OpBitOp, "d", "a", "b", "nokey").i(BitOpOr), in(3)},
		{t0, c(OpGet, "d"), bulk("\xfc\x0f\xff")},
		{t0, c(OpBitOp, "d", "a", "b").i(BitOpXor), in(3)},
		{t0, c(OpGet, "d"), bulk("\xcc\x0f\xff")},
		{t0, c(OpBitOp, "d", "b").i(BitOpNot), in(1)},
		{t0, c(OpGet, "d"), bulk("\xc3")},
		{t0, c(OpBitOp, "d", "a", "h").i(BitOpAnd), errr(ErrWrongType)},
		{t0, c(OpBitOp, "d", "nokey", "nokey2").i(BitOpAnd), in(0)},
		{t0, c(OpExists, "d"), in(0)},
		{t0, c(OpBitOp, "a", "a").i(BitOpNot), in(3)},
		{t0, c(OpGet, "a"), bulk("\x0f\xf0\x00")},
	})
	checkInvariants(t, s)
}

func TestBitField(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	u := func(bits int, off int64) BitFieldOp { return BitFieldOp{Bits: bits, Offset: off} }
	i := func(bits int, off int64) BitFieldOp { return BitFieldOp{Signed: true, Bits: bits, Offset: off} }
	set := func(op BitFieldOp, v int64, ow int) BitFieldOp {
		op.Write, op.Value, op.Overflow = true, v, ow
		return op
	}
	incr := func(op BitFieldOp, v int64, ow int) BitFieldOp {
		op = set(op, v, ow)
		op.Incr = true
		return op
	}
	W, S, F := BitFieldWrap, BitFieldSat, BitFieldFail
	run(t, s, []step{
		{t0, bfCmd(OpBitField, "bf", set(u(8, 0), 255, W), u(8, 0)), ints(0, 255)},
		{t0, bfCmd(OpBitField, "bf", incr(u(2, 100), 1, W), incr(u(2, 102), 1, S)), ints(1, 1)},
		{t0, bfCmd(OpBitField, "bf", i(64, 0), set(i(64, 64), -1, W), u(63, 64), incr(i(64, 64), 1, W)),
			ints(-72057594037927936, 83886080, 9223372036854775807, 0)},
		{t0, bfCmd(OpBitField, "bf", incr(i(8, 0), 200, W), incr(i(8, 0), -300, W), incr(i(8, 0), -300, S),
			incr(i(8, 0), 300, S)), ints(-57, -101, -128, 127)},
		{t0, bfCmd(OpBitField, "bf", set(u(1, 0), 2, W), set(i(1, 1), -1, W), set(i(1, 2), 1, W), set(u(3, 4), 100, S),
			set(i(3, 8), -100, S)), ints(0, -1, -1, 7, 0)},
		{t0, bfCmd(OpBitField, "bf", incr(u(63, 0), 9223372036854775807, W), incr(u(63, 0), 1, W)),
			ints(4593671619917905919, 4593671619917905920)},
		{t0, bfCmd(OpBitField, "bf", incr(i(64, 64), 9223372036854775807, F), incr(i(64, 64), -9223372036854775808, F)),
			ints(9223372036854775807, -1)},
		{t0, c(OpStrLen, "bf"), in(16)},
		// FAIL writes nothing, but the string is grown first.
		{t0, bfCmd(OpBitField, "nk", set(u(8, 80), 999, F)), arr(nilr)},
		{t0, c(OpStrLen, "nk"), in(11)},
		{t0, bfCmd(OpBitFieldRO, "nokey", i(8, 0), u(5, 1000)), ints(0, 0)},
		{t0, bfCmd(OpBitFieldRO, "nokey"), ints()},
		{t0, bfCmd(OpBitFieldRO, "h", i(8, 0)), errr(ErrWrongType)},
		{t0, bfCmd(OpBitField, "h", set(i(8, 0), 1, W)), errr(ErrWrongType)},
	})
	checkInvariants(t, s)
}

func TestLCS(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	rng := func(a, b int64) Reply { return ints(a, b) }
	match := func(a1, a2, b1, b2 int64, n ...int64) Reply {
		m := arr(rng(a1, a2), rng(b1, b2))
		for _, x := range n {
			m.Array = append(m.Array, in(x))
		}
		return m
	}
	idx := func(total int64, ms ...Reply) Reply {
		return Reply{Kind: ReplyMap, Array: []Reply{bulk("matches"), arr(ms...), bulk("len"), in(total)}}
	}
	lcsCmd := func(a, b string, f Flags, minLen int64) Command {
		return c(OpLCS, a, b).fl(f).i(minLen).i2(MaxStringLen)
	}
	run(t, s, []step{
		{t0, c(OpMSet, "a", "ohmytext", "b", "mynewtext", "x1", "abcabcabcxyz", "x2", "zzabcxyzabcq"), ok},
		{t0, lcsCmd("a", "b", 0, 0), bulk("mytext")},
		{t0, lcsCmd("a", "b", FlagLCSLen, 0), in(6)},
		{t0, lcsCmd("a", "b", FlagLCSIdx, 0), idx(6, match(4, 7, 5, 8), match(2, 3, 0, 1))},
		{t0, lcsCmd("a", "b", FlagLCSIdx, 4), idx(6, match(4, 7, 5, 8))},
		{t0, lcsCmd("a", "b", FlagLCSIdx|FlagLCSWithMatchLen, 0), idx(6, match(4, 7, 5, 8, 4), match(2, 3, 0, 1, 2))},
		{t0, lcsCmd("nokey", "nokey2", FlagLCSIdx, 0), idx(0)},
		{t0, lcsCmd("nokey", "a", 0, 0), bulk("")},
		{t0, lcsCmd("a", "h", 0, 0), errr(ErrLCSWrongType)},
		{t0, c(OpLCS, "h", "a", ErrSyntax).fl(FlagDeferredError), errr(ErrLCSWrongType)},
		{t0, c(OpLCS, "nokey", "a", ErrSyntax).fl(FlagDeferredError), errr(ErrSyntax)},
		{t0, c(OpLCS, "a", "b").i2(10), errr(ErrLCSMemoryLimit)},
		{t0, lcsCmd("x1", "x2", 0, 0), bulk("abcxyz")},
		{t0, lcsCmd("x1", "x2", FlagLCSIdx|FlagLCSWithMatchLen, 0), idx(6, match(6, 11, 2, 7, 6))},
	})
}

func TestObjectEncodingStrings(t *testing.T) {
	s := NewStore()
	enc := func(key string) Command { return c(OpObject, key).i(ObjectEncoding) }
	refs := func(key string) Command { return c(OpObject, key).i(ObjectRefCount) }
	run(t, s, []step{
		{t0, c(OpMSet, "n", "123", "n2", "12345", "neg", "-1", "e", "01", "big", "123456789012345678901"), ok},
		{t0, enc("n"), bulk("int")},
		{t0, refs("n"), in(sharedRefCount)},
		{t0, refs("n2"), in(1)},
		{t0, refs("neg"), in(1)},
		{t0, enc("e"), bulk("embstr")},
		{t0, enc("big"), bulk("embstr")},
		// Written in place: raw, whatever the length, as in Redis.
		{t0, c(OpAppend, "n", "4"), in(4)},
		{t0, enc("n"), bulk("raw")},
		{t0, refs("n"), in(1)},
		{t0, c(OpAppend, "fresh", "5"), in(1)},
		{t0, enc("fresh"), bulk("int")},
		{t0, c(OpSetBit, "sb").i(3).i2(1), in(0)},
		{t0, enc("sb"), bulk("raw")},
		{t0, c(OpSetRange, "sr", "x").i(2), in(3)},
		{t0, enc("sr"), bulk("raw")},
		{t0, c(OpRename, "sr", "sr2"), ok},
		{t0, enc("sr2"), bulk("raw")},
		{t0, c(OpIncrByFloat, "f", "2").f(2), bulk("2")},
		{t0, enc("f"), bulk("embstr")},
		{t0, refs("f"), in(1)},
		{t0, c(OpIncrBy, "f").i(1), in(3)},
		{t0, enc("f"), bulk("int")},
		{t0, c(OpIncrBy, "n").i(1), in(1235)},
		{t0, enc("n"), bulk("int")},
		{t0, c(OpSet, "sb", "x"), ok},
		{t0, enc("sb"), bulk("embstr")},
		{t0, c(OpSet, "five", "5"), ok},
		{t0, c(OpCopy, "five", "five2"), in(1)},
		{t0, enc("five2"), bulk("int")},
		{t0, refs("five2"), in(1)},
		{t0, c(OpIncrBy, "five2").i(1), in(6)},
		{t0, refs("five2"), in(sharedRefCount)},
		{t0, enc("nokey"), nilr},
		{t0, c(OpObject, "n").i(ObjectFreq), errr(ErrNoLFU)},
		{t0, c(OpObject, "nokey").i(ObjectFreq), nilr},
		{t0, c(OpObject, "n").i(ObjectIdleTime), in(0)},
	})
}

func TestCopy(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpSet, "a", "v").i(t0 + 5000), ok},
		{t0, c(OpCopy, "a", "b"), in(1)},
		{t0, c(OpCopy, "a", "b"), in(0)},
		{t0, c(OpGet, "b"), bulk("v")},
		{t0, c(OpPTTL, "b"), in(5000)},
		{t0, c(OpCopy, "nokey", "b"), in(0)},
		{t0, c(OpSet, "c", "other"), ok},
		{t0, c(OpCopy, "c", "b").fl(FlagReplace), in(1)},
		{t0, c(OpGet, "b"), bulk("other")},
		{t0, c(OpPTTL, "b"), in(-1)},
		{t0 + 6000, c(OpCopy, "a", "z"), in(0)},
	})
	// Both strings share bytes but not spare capacity: growing either
	// in place must not show in the other.
	s.Apply(0, t0, []Command{c(OpSet, "g", "x"), c(OpAppend, "g", "yyyyyyyyyyyyyyyy")})
	s.Apply(0, t0, []Command{c(OpAppend, "g", "1")})
	s.Apply(0, t0, []Command{c(OpCopy, "g", "g2"), c(OpAppend, "g", "A"), c(OpAppend, "g2", "B"),
		c(OpSetBit, "g").i(8 * 30).i2(1), c(OpSetBit, "g2").i(8*30 + 1).i2(1)})
	run(t, s, []step{
		{t0, c(OpGetRange, "g").i(0).i2(18), bulk("xyyyyyyyyyyyyyyyy1A")},
		{t0, c(OpGetRange, "g2").i(0).i2(18), bulk("xyyyyyyyyyyyyyyyy1B")},
		{t0, c(OpGetBit, "g").i(8*30 + 1), in(0)},
		{t0, c(OpGetBit, "g2").i(8 * 30), in(0)},
	})
	checkInvariants(t, s)
}

func TestKeysInSlot(t *testing.T) {
	s := NewStore()
	var cmds []Command
	bySlot := map[int][]string{}
	for i := range 3000 {
		k := "key:" + strconv.Itoa(i)
		if i%10 == 0 {
			k = "{tag}" + k // many keys in one slot
		}
		cmds = append(cmds, c(OpSet, k, "v"))
		if i%7 == 0 {
			cmds = append(cmds, c(OpExpireAt, k).i(t0+10)) // expired at t0+10
		} else {
			bySlot[KeySlot(k)] = append(bySlot[KeySlot(k)], k)
		}
	}
	s.Apply(0, t0, cmds)
	for _, slot := range []int{0, 1, KeySlot("{tag}"), KeySlot("key:1"), 16383, 9999} {
		if got := s.Read(t0+10, c(OpCountKeysInSlot).i(int64(slot))); got.Int != int64(len(bySlot[slot])) {
			t.Errorf("COUNTKEYSINSLOT %d = %v, want %d", slot, got, len(bySlot[slot]))
		}
		got := s.Read(t0+10, c(OpGetKeysInSlot).i(int64(slot)).i2(1000))
		seen := map[string]bool{}
		for _, r := range got.Array {
			seen[string(r.Bulk)] = true
		}
		for _, k := range bySlot[slot] {
			if !seen[k] {
				t.Errorf("GETKEYSINSLOT %d misses %q", slot, k)
			}
		}
		if len(got.Array) != len(bySlot[slot]) {
			t.Errorf("GETKEYSINSLOT %d: %d keys, want %d", slot, len(got.Array), len(bySlot[slot]))
		}
		if n := len(bySlot[slot]); n > 1 {
			if got := s.Read(t0+10, c(OpGetKeysInSlot).i(int64(slot)).i2(1)); len(got.Array) != 1 {
				t.Errorf("GETKEYSINSLOT %d 1: %v", slot, got)
			}
		}
	}
	if got := s.Read(t0, c(OpGetKeysInSlot).i(0).i2(0)); len(got.Array) != 0 || got.Kind != ReplyArray {
		t.Errorf("GETKEYSINSLOT 0 0 = %v", got)
	}
}

// TestSetBitGrowsLinearly sets bits ever further past the end of a large
// string: each must grow it in its spare capacity most of the time, not
// copy it (which would make building a bitmap quadratic).
func TestSetBitGrowsLinearly(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{c(OpSetBit, "b").i(8 << 20).i2(1)}) // a 1 MiB string
	off := int64(8<<20) + 8
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 2000 {
		s.Apply(0, t0, []Command{c(OpSetBit, "b").i(off).i2(1)})
		off += 8
	}
	runtime.ReadMemStats(&after)
	// A copy per call would allocate 2000 MiB; growing by a quarter at a
	// time allocates a few MiB.
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
		t.Fatalf("2000 SETBITs past the end of a 1 MiB string allocated %d MiB", grown>>20)
	}
	if r := s.Read(t0, c(OpBitCount, "b")); r.Int != 2001 {
		t.Fatalf("BITCOUNT = %v, want 2001", r)
	}
	checkInvariants(t, s)
}

// TestBitsSnapshotIsolation takes a snapshot, then changes the strings in
// every way the bit commands do (in place past the end, and with a copy
// below it): the snapshot must still show the state it was taken at.
func TestBitsSnapshotIsolation(t *testing.T) {
	s := NewStore()
	for i := range 2000 {
		k := "b" + strconv.Itoa(i)
		s.Apply(0, t0, []Command{c(OpSetBit, k).i(int64(i)).i2(1), c(OpSetBit, k).i(int64(i) + 64).i2(1)})
	}
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			k := "b" + strconv.Itoa(i)
			s.Apply(0, t0, []Command{
				c(OpSetBit, k).i(int64(i) + 200).i2(1), // past the end: spare capacity
				c(OpSetBit, k).i(int64(i)).i2(0),       // below it: a copy
				bfCmd(OpBitField, k, BitFieldOp{Write: true, Bits: 8, Offset: int64(i) + 300, Value: 7}),
				c(OpBitOp, k, k).i(BitOpNot),
			})
		}
	}()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	<-done
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("snapshot changed under concurrent bit writes")
	}
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(snapshotBytes(t, s))); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		k := "b" + strconv.Itoa(i)
		if a, b := s.Read(t0, c(OpGet, k)), r.Read(t0, c(OpGet, k)); !bytes.Equal(a.Bulk, b.Bulk) {
			t.Fatalf("%s after restore: %q, want %q", k, b.Bulk, a.Bulk)
		}
	}
	checkInvariants(t, s)
	checkInvariants(t, r)
}

// bitsSampleCmds are one of each write of bits.go and object.go, for
// round trips and fuzz seeds.
var bitsSampleCmds = []Command{
	c(OpSetBit, "b").i(100).i2(1),
	bfCmd(OpBitField, "b", BitFieldOp{Write: true, Incr: true, Signed: true, Bits: 5, Offset: 3, Value: -9,
		Overflow: BitFieldSat}, BitFieldOp{Bits: 63, Offset: 70}),
	c(OpBitOp, "d", "b", "nokey").i(BitOpXor),
	c(OpBitOp, "n", "b").i(BitOpNot),
	c(OpCopy, "b", "b2").fl(FlagReplace),
	c(OpSetBit, "b2").i(7).i2(0),
}

// TestBitsDeterminism applies the same random bit writes to two stores:
// the same replies and byte-identical snapshots.
func TestBitsDeterminism(t *testing.T) {
	gen := func() []Command {
		r := rand.New(rand.NewPCG(7, 7))
		var cmds []Command
		keys := []string{"a", "b", "c", "d"}
		for range 3000 {
			k := keys[r.IntN(len(keys))]
			switch r.IntN(5) {
			case 0:
				cmds = append(cmds, c(OpSetBit, k).i(r.Int64N(4000)).i2(r.Int64N(2)))
			case 1:
				cmds = append(cmds, bfCmd(OpBitField, k, BitFieldOp{Write: true, Incr: r.IntN(2) == 0,
					Signed: r.IntN(2) == 0, Bits: 1 + r.IntN(63), Offset: r.Int64N(3000), Value: r.Int64() - r.Int64(),
					Overflow: r.IntN(3)}))
			case 2:
				cmds = append(cmds, c(OpBitOp, k, keys[r.IntN(4)], keys[r.IntN(4)]).i(r.Int64N(3)))
			case 3:
				cmds = append(cmds, c(OpCopy, k, keys[r.IntN(4)]+"x").fl(FlagReplace))
			default:
				cmds = append(cmds, c(OpAppend, k, "xy"))
			}
		}
		return append(cmds, bitsSampleCmds...)
	}
	a, b := NewStore(), NewStore()
	cmds := gen()
	ra := a.Apply(1, t0, cmds)
	rb := b.Apply(1, t0, gen())
	for i := range ra {
		if ra[i].String() != rb[i].String() {
			t.Fatalf("reply %d to %v: %v and %v", i, cmds[i].Op, ra[i], rb[i])
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("snapshots differ")
	}
	checkInvariants(t, a)
}

func TestBitsValidate(t *testing.T) {
	bad := []Command{
		c(OpSetBit, "k").i(-1),
		c(OpSetBit, "k").i(1).i2(2),
		c(OpSetBit, "k").i(MaxBitOffset + 1),
		c(OpGetBit, "k").i(-1),
		c(OpBitOp, "d", "a", "b").i(BitOpNot),
		c(OpBitOp, "d", "a").i(9),
		c(OpBitField, "k"),
		c(OpBitField, "k", "short"),
		bfCmd(OpBitField, "k", BitFieldOp{Bits: 8}), // no write
		bfCmd(OpBitFieldRO, "k", BitFieldOp{Write: true, Bits: 8}),
		bfCmd(OpBitField, "k", BitFieldOp{Write: true, Bits: 64}), // u64
		bfCmd(OpBitField, "k", BitFieldOp{Write: true, Bits: 0}),
		bfCmd(OpBitField, "k", BitFieldOp{Write: true, Bits: 8, Offset: -8}),
		bfCmd(OpBitField, "k", BitFieldOp{Write: true, Bits: 8, Overflow: 3}),
		c(OpBitCount, "k", "extra"),
		c(OpBitCount, "k").fl(FlagDeferredError),
		c(OpLCS, "a").i2(1),
		c(OpObject, "k").i(ObjectDigest + 1),
		c(OpCountKeysInSlot).i(ClusterSlots),
		c(OpGetKeysInSlot).i(1).i2(-1),
		c(OpCopy, "a"),
	}
	for _, cmd := range bad {
		if err := cmd.Validate(); err == nil {
			t.Errorf("%v %q Int %d Int2 %d: valid", cmd.Op, cmd.Args, cmd.Int, cmd.Int2)
		}
	}
	for _, cmd := range bitsSampleCmds {
		if err := cmd.Validate(); err != nil {
			t.Errorf("%v: %v", cmd.Op, err)
		}
	}
}

// bitsAllocate is the length of string a bit write may build, for the
// fuzz targets to skip entries that are valid but huge.
func bitsAllocate(c Command) int64 {
	switch c.Op {
	case OpSetBit:
		return c.Int >> 3
	case OpBitField:
		var n int64
		for _, a := range c.Args[1:] {
			if op, ok := decodeBitFieldOp(a); ok {
				n = max(n, op.Offset>>3)
			}
		}
		return n
	}
	return 0
}

// fakeObj is a collection's large form for testing COPY before the
// collection types exist: clones are counted and never share elems.
type fakeObj struct {
	elems []string
	gen   uint64
}

func (o *fakeObj) clone() object   { return &fakeObj{elems: append([]string(nil), o.elems...)} }
func (o *fakeObj) size() int64     { return int64(len(o.elems)) * 16 }
func (o *fakeObj) cowGen() *uint64 { return &o.gen }
func (o *fakeObj) freeEffort() int { return len(o.elems) }

// TestCopyCollections: COPY gives the destination its own clone of a
// large form (a later edit of either leaves the other alone), shares a
// packed one, keeps the kind and TTL, and signals a list or sorted-set
// destination to blocked clients.
func TestCopyCollections(t *testing.T) {
	s := NewStore()
	var ready []string
	s.SetReadyHook(func(keys []string) { ready = append(ready, keys...) })
	s.mu.Lock()
	s.putLocked(s.newCollection([]byte("big"), kindList, nil, &fakeObj{elems: []string{"a", "b"}}, t0+5000))
	s.putLocked(s.newCollection([]byte("packed"), kindSet, []byte{1, 2, 3}, nil, 0))
	s.mu.Unlock()
	s.Apply(0, t0, []Command{c(OpCopy, "big", "big2"), c(OpCopy, "packed", "packed2")})
	s.mu.Lock()
	src, _ := s.getLocked([]byte("big"))
	dst, _ := s.getLocked([]byte("big2"))
	p2, _ := s.getLocked([]byte("packed2"))
	if src.obj == dst.obj || dst.kind != kindList || dst.exp != t0+5000 || *dst.obj.cowGen() != s.keys.gen {
		t.Errorf("copy of a large form: %+v from %+v", dst, src)
	}
	before := s.editLocked(&dst)
	dst.obj.(*fakeObj).elems[0] = "changed"
	s.endEditLocked(dst, before)
	if src.obj.(*fakeObj).elems[0] != "a" {
		t.Error("editing the copy changed the source")
	}
	if p2.kind != kindSet || string(p2.val) != "\x01\x02\x03" || cap(p2.val) != 3 {
		t.Errorf("copy of a packed form: %+v", p2)
	}
	s.mu.Unlock()
	if len(ready) != 1 || ready[0] != "big2" {
		t.Errorf("ready keys %v, want [big2]", ready)
	}
	checkInvariants(t, s)
}

// TestDirtySetBit: SETBIT counts a change only when the bit changed or
// the string was created or grown, as Redis's dirty counter does (INFO's
// rdb_changes_since_last_save); BITFIELD, whose count is per write, is
// checked against redis-server by test/diff_dirty_test.go.
func TestDirtySetBit(t *testing.T) {
	s := NewStore()
	for i, st := range []struct {
		off, on, want int64
	}{
		{0, 0, 1},  // created
		{0, 0, 0},  // the bit already there
		{0, 1, 1},  // changed
		{0, 1, 0},  // the bit already there
		{90, 0, 1}, // grown
	} {
		before := s.Dirty()
		s.Apply(0, 1000, []Command{c(OpSetBit, "b").i(st.off).i2(st.on)})
		if got := s.Dirty() - before; got != st.want {
			t.Errorf("step %d: SETBIT b %d %d counted %d changes, want %d", i, st.off, st.on, got, st.want)
		}
	}
}
