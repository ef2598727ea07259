package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// sc is a score argument of OpZAdd.
func sc(f float64) string { return string(ScoreArg(f)) }

func zadd(key string, pairs ...any) Command {
	cmd := c(OpZAdd, key)
	for i := 0; i < len(pairs); i += 2 {
		cmd.Args = append(cmd.Args, ScoreArg(toF(pairs[i])), []byte(pairs[i+1].(string)))
	}
	return cmd
}

func toF(x any) float64 {
	switch v := x.(type) {
	case int:
		return float64(v)
	case float64:
		return v
	}
	panic("score")
}

func dbl(s string) Reply { return Reply{Kind: ReplyDouble, Bulk: []byte(s)} }
func pair(m, s string) Reply {
	return Reply{Kind: ReplyArray, Array: []Reply{bulk(m), dbl(s)}}
}
func pairs(ps ...Reply) Reply {
	if ps == nil {
		ps = []Reply{}
	}
	return Reply{Kind: ReplyPairs, Array: ps}
}

// bothForms runs the test once with Redis's limits (small sets packed)
// and once with every set in the large form.
func bothForms(t *testing.T, fn func(t *testing.T, s *Store)) {
	t.Run("listpack", func(t *testing.T) { fn(t, NewStore()) })
	t.Run("skiplist", func(t *testing.T) {
		s := NewStore()
		l := DefaultLimits()
		l.ZSetMaxListpackEntries = 0
		s.SetLimits(l)
		fn(t, s)
	})
}

func byScore(min, max float64, f Flags) Command {
	cmd := c(OpZRange, "z").fl(FlagZByScore | f)
	cmd.Float, cmd.Float2, cmd.Int2 = min, max, -1
	return cmd
}

func TestZSetCommands(t *testing.T) {
	bothForms(t, func(t *testing.T, s *Store) {
		inf := math.Inf(1)
		run(t, s, []step{
			{t0, zadd("z", 1.1, "a", 2, "b", 3, "c"), in(3)},
			{t0, zadd("z", 5, "a", 6, "new").fl(FlagZXX | FlagZCH), in(1)},
			{t0, zadd("z", 1.1, "a").fl(FlagZGT), in(0)},
			{t0, zadd("z", 1.1, "a").fl(FlagZLT | FlagZCH), in(1)},
			{t0, zadd("z", 1, "a").fl(FlagZNX | FlagZIncr), nilr},
			{t0, zadd("z", 1, "b").fl(FlagZIncr), dbl("3")},
			{t0, zadd("z", 1, "zz").fl(FlagZXX | FlagZIncr), nilr},
			{t0, c(OpZCard, "z"), in(3)},
			{t0, c(OpZScore, "z", "a"), dbl("1.1000000000000001")},
			{t0, c(OpZMScore, "z", "a", "nope", "c"), arr(dbl("1.1000000000000001"), nilr, dbl("3"))},
			{t0, c(OpZRank, "z", "c"), in(2)},
			{t0, c(OpZRank, "z", "c").fl(FlagZRev), in(0)},
			{t0, c(OpZRank, "z", "a").fl(FlagZRev), in(2)},
			{t0, c(OpZRank, "z", "nope"), nilr},
			{t0, c(OpZRank, "z", "a").fl(FlagZWithScores), arr(in(0), dbl("1.1000000000000001"))},
			{t0, c(OpZRank, "z", "c").fl(FlagZRev | FlagZWithScores), arr(in(0), dbl("3"))},
			{t0, c(OpZRank, "z", "nope").fl(FlagZWithScores), Reply{Kind: ReplyNilArray}},
			{t0, c(OpZRank, "nokey", "a").fl(FlagZWithScores), Reply{Kind: ReplyNilArray}},
			{t0, c(OpZRange, "z").i(0).i2(-1), bulks("a", "b", "c")},
			{t0, c(OpZRange, "z").i(0).i2(-1).fl(FlagZRev | FlagZWithScores),
				pairs(pair("c", "3"), pair("b", "3"), pair("a", "1.1000000000000001"))},
			{t0, c(OpZRange, "z").i(-100).i2(-3), bulks("a")},
			{t0, c(OpZRange, "z").i(2).i2(1), bulks()},
			{t0, byScore(1.5, inf, 0), bulks("b", "c")},
			{t0, byScore(3, inf, FlagZMinEx), bulks()},
			{t0, byScore(1, 3, FlagZRev), bulks("c", "b", "a")},
			{t0, byScore(1, 3, FlagZRev).i(1).i2(1), bulks("b")},
			{t0, byScore(1, 3, 0).i(-1).i2(5), bulks()},
			{t0, byScore(1, 3, 0).i(1).i2(0), bulks()},
			{t0, c(OpZCount, "z").fl(FlagZByScore | FlagZMaxEx).f(1).f2(3), in(1)},
			{t0, zadd("z", 1, "b").fl(FlagZIncr), dbl("4")},
			{t0, c(OpZRem, "z", "c", "nope"), in(1)},
			{t0, c(OpZPop, "z"), arr(bulk("a"), dbl("1.1000000000000001"))},
			{t0, c(OpZPop, "z").fl(FlagZCount | FlagZMax).i(5), pairs(pair("b", "4"))},
			{t0, c(OpExists, "z"), in(0)},
			{t0, c(OpZPop, "z"), arr()},
			{t0, c(OpZMPop, "nope", "z").i(1), Reply{Kind: ReplyNilArray}},
			{t0, c(OpSet, "s", "x"), ok},
			{t0, zadd("s", 1, "a"), errr(ErrWrongType)},
			{t0, c(OpZRange, "s").i(0).i2(1), errr(ErrWrongType)},
			{t0, c(OpZMPop, "nope", "s").i(1), errr(ErrWrongType)},
			{t0, c(OpZMPop, "s").i(1).fl(FlagZReady), Reply{Kind: ReplyNilArray}},
		})
	})
}

func (cmd Command) f2(x float64) Command { cmd.Float2 = x; return cmd }

func TestZSetLexAndStore(t *testing.T) {
	bothForms(t, func(t *testing.T, s *Store) {
		lex := func(op Op, min, max string) Command {
			return c(op, "z", min, max).fl(FlagZByLex).i2(-1)
		}
		run(t, s, []step{
			{t0, zadd("z", 0, "a", 0, "b", 0, "c", 0, "d"), in(4)},
			{t0, lex(OpZRange, "[b", "(d"), bulks("b", "c")},
			{t0, lex(OpZRange, "-", "+").fl(FlagZRev), bulks("d", "c", "b", "a")},
			{t0, lex(OpZRange, "+", "-"), bulks()},
			{t0, lex(OpZCount, "(a", "+"), in(3)},
			{t0, lex(OpZRemRange, "-", "[a"), in(1)},
			{t0, c(OpZRemRange, "z").i(-1).i2(-1), in(1)},
			{t0, c(OpZRangeStore, "d", "z").i(0).i2(-1), in(2)},
			{t0, c(OpZRange, "d").i(0).i2(-1), bulks("b", "c")},
			{t0, c(OpZRangeStore, "d", "z").i(0).i2(-1).fl(FlagZRev), in(2)},
			{t0, c(OpZRange, "d").i(0).i2(-1), bulks("b", "c")},
			{t0, zadd("y", 2, "b", 5, "x"), in(2)},
			{t0, c(OpZSetOp, "z", "y").i2(ZSetUnion).fl(FlagZWithScores),
				pairs(pair("c", "0"), pair("b", "2"), pair("x", "5"))},
			{t0, c(OpZSetOp, "z", "y").i2(ZSetInter).fl(FlagZWithScores | FlagZAggMax), pairs(pair("b", "2"))},
			{t0, c(OpZSetOp, "y", "z").i2(ZSetDiff), bulks("x")},
			{t0, c(OpZSetOp, "y", "z", "nope").i2(ZSetInterCard), in(0)},
			{t0, Command{Op: OpZSetOp, Int2: ZSetUnion, Flags: FlagZWeights | FlagZWithScores,
				Args: [][]byte{[]byte("y"), []byte("y"), ScoreArg(math.Inf(1)), ScoreArg(math.Inf(-1))}},
				pairs(pair("b", "0"), pair("x", "0"))},
			{t0, c(OpZSetOpStore, "d", "y", "nope").i2(ZSetInter), in(0)},
			{t0, c(OpExists, "d"), in(0)},
			// As Redis 7.0.15: in ZINTER a later input's 0 * inf is NaN,
			// which makes a sum 0 and leaves MIN and MAX as they were.
			{t0, zadd("n", math.Inf(1), "", 1, "a", math.Inf(-1), "b"), in(3)},
			{t0, weightedOp(ZSetInter, 0, []string{"n", "n", "n"}, -1, 0, 0.5),
				pairs(pair("b", "-inf"), pair("a", "-0.5"), pair("", "inf"))},
			{t0, weightedOp(ZSetInter, 0, []string{"n", "n"}, 0, 1),
				pairs(pair("b", "-inf"), pair("a", "1"), pair("", "inf"))},
			{t0, weightedOp(ZSetInter, FlagZAggMin, []string{"n", "n"}, 1, 0),
				pairs(pair("b", "-inf"), pair("a", "0"), pair("", "inf"))},
			{t0, weightedOp(ZSetUnion, 0, []string{"n", "n", "n"}, -1, 0, 0.5),
				pairs(pair("a", "-0.5"), pair("", "0"), pair("b", "0"))},
			{t0, c(OpZSetOpStore, "d", "y", "z").i2(ZSetUnion), in(3)},
		})
	})
}

// weightedOp is a ZUNION or ZINTER WITHSCORES of keys with weights.
func weightedOp(op int64, f Flags, keys []string, weights ...float64) Command {
	cmd := Command{Op: OpZSetOp, Int2: op, Flags: f | FlagZWeights | FlagZWithScores}
	for _, k := range keys {
		cmd.Args = append(cmd.Args, []byte(k))
	}
	for _, w := range weights {
		cmd.Args = append(cmd.Args, ScoreArg(w))
	}
	return cmd
}

func TestZSetNegativeZeroAndNaN(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		// The packed form keeps -0 as 0, as Redis's listpack does; the
		// reply of INCR is the computed score.
		{t0, zadd("z", math.Copysign(0, -1), "a").fl(FlagZIncr), dbl("-0")},
		{t0, c(OpZScore, "z", "a"), dbl("0")},
		{t0, zadd("z", math.Inf(1), "b"), in(1)},
		{t0, zadd("z", math.Inf(-1), "b").fl(FlagZIncr), errr(ErrZSetNaN)},
		{t0, c(OpZScore, "z", "b"), dbl("inf")},
		{t0, c(OpZScan, "z", "").i(12345).i2(1), arr(bulk("0"), bulks("a", "0", "b", "inf"))},
	})
	l := DefaultLimits()
	l.ZSetMaxListpackEntries = 0
	s.SetLimits(l)
	run(t, s, []step{
		{t0, zadd("w", math.Copysign(0, -1), "a"), in(1)},
		{t0, c(OpZScore, "w", "a"), dbl("-0")},
	})
}

func zsetEncoding(t *testing.T, s *Store, key string) string {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, ok, _ := s.lookupLocked(t0, []byte(key), kindZSet)
	if !ok {
		return "none"
	}
	return kindTable[kindZSet].encoding(&it)
}

func TestZSetConversion(t *testing.T) {
	s := NewStore()
	for i := range 128 {
		s.Apply(0, t0, []Command{zadd("z", i, "m"+itoa(i))})
	}
	if e := zsetEncoding(t, s, "z"); e != "listpack" {
		t.Fatalf("128 members: %s", e)
	}
	s.Apply(0, t0, []Command{c(OpExpireAt, "z").i(t0 + 100000)})
	s.Apply(0, t0, []Command{zadd("z", -1, "first")})
	if e := zsetEncoding(t, s, "z"); e != "skiplist" {
		t.Fatalf("129 members: %s", e)
	}
	run(t, s, []step{
		{t0, c(OpZCard, "z"), in(129)},
		{t0, c(OpZRange, "z").i(0).i2(1), bulks("first", "m0")},
		{t0, c(OpPTTL, "z"), in(100000)},
		// Removing members does not go back, as in Redis.
		{t0, c(OpZRemRange, "z").i(0).i2(-3), in(127)},
		{t0, c(OpZRange, "z").i(0).i2(-1), bulks("m126", "m127")},
	})
	if e := zsetEncoding(t, s, "z"); e != "skiplist" {
		t.Fatalf("after removals: %s", e)
	}
	// A store rewrites the key, packed again when small.
	s.Apply(0, t0, []Command{c(OpZRangeStore, "z", "z").i(0).i2(-1)})
	if e := zsetEncoding(t, s, "z"); e != "listpack" {
		t.Fatalf("after ZRANGESTORE: %s", e)
	}
	// A member longer than zset-max-listpack-value converts.
	s.Apply(0, t0, []Command{zadd("long", 1, "a"), zadd("long", 2, string(bytes.Repeat([]byte("x"), 65)))})
	if e := zsetEncoding(t, s, "long"); e != "skiplist" {
		t.Fatalf("long member: %s", e)
	}
	checkInvariants(t, s)
}

// TestZSetScan pages through a large set: every member once, whatever the
// page size.
func TestZSetScan(t *testing.T) {
	s := NewStore()
	for i := range 1000 {
		s.Apply(0, t0, []Command{zadd("z", i, "m"+itoa(i))})
	}
	for _, count := range []int64{1, 7, 100, 5000} {
		seen := map[string]bool{}
		cursor := int64(0)
		for pages := 0; ; pages++ {
			r := s.Read(t0, c(OpZScan, "z", "").i(cursor).i2(count))
			for i := 0; i < len(r.Array[1].Array); i += 2 {
				seen[string(r.Array[1].Array[i].Bulk)] = true
			}
			next, _ := strconv.ParseInt(string(r.Array[0].Bulk), 10, 64)
			if next == 0 {
				break
			}
			if next <= cursor || pages > 2000 {
				t.Fatalf("count %d: cursor %d after %d", count, next, cursor)
			}
			cursor = next
		}
		if len(seen) != 1000 {
			t.Errorf("count %d: %d members seen", count, len(seen))
		}
	}
}

// randomZSetEntries is a reproducible workload over the sorted set ops,
// on sets crossing the packed limit.
func randomZSetEntries(seed uint64, n int) (nows []int64, entries [][]Command) {
	rng := rand.New(rand.NewPCG(seed, seed))
	key := func() string { return "z" + strconv.Itoa(rng.IntN(6)) }
	member := func() string { return "m" + strconv.Itoa(rng.IntN(300)) }
	now := int64(t0)
	for range n {
		now += int64(rng.IntN(20))
		var cmds []Command
		for range 1 + rng.IntN(6) {
			var cmd Command
			switch rng.IntN(12) {
			case 0:
				cmd = c(OpZAdd, key())
				for range 30 {
					cmd.Args = append(cmd.Args, ScoreArg(float64(rng.IntN(100))), []byte(member()))
				}
			case 1, 2, 3:
				cmd = zadd(key(), rng.IntN(50), member(), float64(rng.IntN(9))/4, member())
				cmd.Flags = []Flags{0, FlagZNX, FlagZXX | FlagZCH, FlagZGT}[rng.IntN(4)]
			case 4:
				cmd = zadd(key(), float64(rng.IntN(7))-3, member()).fl(FlagZIncr)
			case 5:
				cmd = c(OpZRem, key(), member(), member())
			case 6:
				cmd = c(OpZRemRange, key()).i(int64(rng.IntN(20))).i2(int64(rng.IntN(30)))
			case 7:
				cmd = c(OpZPop, key()).fl(FlagZCount | Flags(rng.IntN(2))*FlagZMax).i(int64(rng.IntN(4)))
			case 8:
				cmd = c(OpZSetOpStore, key(), key(), key()).i2(int64(rng.IntN(3)))
			case 9:
				cmd = c(OpZRangeStore, key(), key()).i(int64(rng.IntN(10))).i2(int64(rng.IntN(200)))
			case 10:
				cmd = c(OpExpireAt, key()).i(now + int64(rng.IntN(50000)))
			case 11:
				cmd = c(OpZMPop, key(), key()).i(int64(1 + rng.IntN(3)))
			}
			cmds = append(cmds, cmd)
		}
		nows, entries = append(nows, now), append(entries, cmds)
	}
	return nows, entries
}

func TestZSetDeterminismAndSnapshot(t *testing.T) {
	nows, entries := randomZSetEntries(11, 3000)
	a, b := NewStore(), NewStore()
	forms := map[string]int{}
	for i, cmds := range entries {
		now, dec, err := DecodeEntry(EncodeEntry(nil, nows[i], cmds))
		if err != nil {
			t.Fatal(err)
		}
		ra := a.Apply(uint64(i+1), nows[i], cmds)
		rb := b.Apply(uint64(i+1), now, dec)
		for j := range ra {
			if ra[j].String() != rb[j].String() {
				t.Fatalf("entry %d cmd %d: %v vs %v", i, j, ra[j], rb[j])
			}
		}
		if i%500 == 0 {
			checkInvariants(t, a)
		}
		if i%50 == 0 {
			for k := range 6 {
				forms[zsetEncoding(t, a, "z"+itoa(k))]++
			}
		}
	}
	if forms["listpack"] == 0 || forms["skiplist"] == 0 {
		t.Fatalf("workload did not use both forms: %v", forms)
	}
	checkInvariants(t, a)
	sa := snapshotBytes(t, a)
	if !bytes.Equal(sa, snapshotBytes(t, b)) {
		t.Fatal("same entries gave different snapshots")
	}
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(sa)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), sa) {
		t.Fatal("restored store writes a different snapshot")
	}
	checkInvariants(t, r)
	for i := range 6 {
		k := "z" + itoa(i)
		if zsetEncoding(t, r, k) != zsetEncoding(t, a, k) {
			t.Errorf("%s: encoding %s after restore, was %s", k, zsetEncoding(t, r, k), zsetEncoding(t, a, k))
		}
		want := a.Read(nows[len(nows)-1], c(OpZRange, k).i(0).i2(-1).fl(FlagZWithScores))
		if got := r.Read(nows[len(nows)-1], c(OpZRange, k).i(0).i2(-1).fl(FlagZWithScores)); got.String() != want.String() {
			t.Errorf("%s after restore: %v, want %v", k, got, want)
		}
	}
}

// TestZSetSnapshotWhileWriting streams a snapshot of large and small sets
// while another goroutine keeps changing them (run with -race): the
// snapshot holds exactly the state at Snapshot.
func TestZSetSnapshotWhileWriting(t *testing.T) {
	s := NewStore()
	for i := range 3000 {
		s.Apply(0, t0, []Command{zadd("big", i, "m"+itoa(i)), zadd("small"+itoa(i%50), i, "m"+itoa(i%7))})
	}
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 3000 {
			s.Apply(0, t0, []Command{
				zadd("big", -i, "m"+itoa(i)),
				c(OpZPop, "big"),
				zadd("small"+itoa(i%50), 1, "x"),
				c(OpZRem, "small"+itoa((i+1)%50), "m1"),
			})
			if i%500 == 0 {
				s.Apply(0, t0, []Command{c(OpZSetOpStore, "big", "big", "small1").i2(ZSetUnion)})
			}
		}
	}()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	<-done
	sn.Release()
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("snapshot changed under concurrent writes")
	}
	if bytes.Equal(snapshotBytes(t, s), want) {
		t.Fatal("writes after the snapshot are missing")
	}
	checkInvariants(t, s)
}

// zsetSnapshot is a snapshot of one sorted set key "z" whose value is
// val, with a valid checksum.
func zsetSnapshot(val []byte) []byte {
	b := []byte{snapshotVersionV3, 1, 0, 1, byte(kindZSet)}
	b = appendString(b, "z")
	b = binary.AppendVarint(b, 0)
	return appendCRC(append(b, val...))
}

func zsetLargeValue(ents ...zent) []byte {
	b := binary.AppendUvarint([]byte{1}, uint64(len(ents)))
	for _, e := range ents {
		b = appendString(b, e.member)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.score))
	}
	return b
}

func zsetPackedValue(ents ...zent) []byte {
	p := binary.AppendUvarint(nil, uint64(len(ents)))
	for _, e := range ents {
		p = appendString(p, e.member)
		p = binary.LittleEndian.AppendUint64(p, math.Float64bits(e.score))
	}
	return append(binary.AppendUvarint([]byte{0}, uint64(len(p))), p...)
}

func TestZSetRestoreCorrupt(t *testing.T) {
	good := []zent{{1, "a"}, {2, "b"}}
	for _, form := range []func(...zent) []byte{zsetLargeValue, zsetPackedValue} {
		if _, err := NewStore().Restore(bytes.NewReader(zsetSnapshot(form(good...)))); err != nil {
			t.Fatalf("well-formed sorted set: %v", err)
		}
	}
	nan := math.NaN()
	bad := map[string][]byte{
		"large out of order":   zsetLargeValue(zent{2, "b"}, zent{1, "a"}),
		"large same member":    zsetLargeValue(zent{1, "a"}, zent{2, "a"}),
		"large NaN":            zsetLargeValue(zent{nan, "a"}),
		"large empty":          zsetLargeValue(),
		"packed out of order":  zsetPackedValue(zent{1, "b"}, zent{1, "a"}),
		"packed same member":   zsetPackedValue(zent{1, "a"}, zent{2, "a"}),
		"packed NaN":           zsetPackedValue(zent{nan, "a"}),
		"packed negative zero": zsetPackedValue(zent{math.Copysign(0, -1), "a"}),
		"packed empty":         zsetPackedValue(),
		"packed truncated":     append([]byte{0, 3}, 1, 1, 'a'),
		"packed trailing":      append([]byte{0, 12}, append(zsetPackedValue(zent{1, "a"})[2:], 0)...),
		"form":                 {7, 0},
	}
	for name, val := range bad {
		_, err := NewStore().Restore(bytes.NewReader(zsetSnapshot(val)))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

// TestParseSmallInt checks the integer fast path against the general
// parse.
func TestParseSmallInt(t *testing.T) {
	for _, in := range []string{"0", "-0", "1", "-1", "42", "100000", "-987654321", "123456789012345", "-000000000000001"} {
		got, ok := parseSmallInt([]byte(in))
		want, wok := parseStrtod([]byte(in))
		if !ok || !wok || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("parseSmallInt(%q) = %v, %v; parseStrtod gives %v, %v", in, got, ok, want, wok)
		}
	}
}

func TestParseScore(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1.5", 1.5, true}, {"-0", math.Copysign(0, -1), true}, {"inf", math.Inf(1), true},
		{"-Infinity", math.Inf(-1), true}, {"0x10", 16, true}, {"1e-400", 0, false},
		{"5e-324", 5e-324, true}, {"1e400", 0, false}, {"nan", 0, false}, {" 1", 0, false},
		{"1 ", 0, false}, {"", 0, false}, {"0e-400", 0, true}, {"1_0", 0, false}, {"0x", 0, false},
		// parseSmallInt's and around it.
		{"0", 0, true}, {"-", 0, false}, {"+5", 5, true}, {"007", 7, true}, {"-12", -12, true},
		{"12a", 0, false}, {"--1", 0, false}, {"999999999999999", 999999999999999, true},
		{"-9999999999999999", -9999999999999999, true}, {"12345678901234567890", 12345678901234567890, true},
	} {
		got, ok := ParseScore([]byte(tc.in))
		if ok != tc.ok || (ok && math.Float64bits(got) != math.Float64bits(tc.want)) {
			t.Errorf("ParseScore(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in     string
		want   float64
		ex, ok bool
	}{
		{"(1", 1, true, true}, {"", 0, false, true}, {"(", 0, true, true}, {" 2", 2, false, true},
		{"1e400", math.Inf(1), false, true}, {"(nan", 0, true, false}, {" ", 0, false, false},
		{"1 ", 0, false, false}, {"abc", 0, false, false},
	} {
		got, ex, ok := ParseScoreBound([]byte(tc.in))
		if ok != tc.ok || (ok && (got != tc.want || ex != tc.ex)) {
			t.Errorf("ParseScoreBound(%q) = %v, %v, %v", tc.in, got, ex, ok)
		}
	}
}

// TestZSetFuzzSeeds writes sorted set seeds for FuzzRestore and
// FuzzDecodeEntry into their corpus directories when
// KVS_WRITE_FUZZ_SEEDS is set, and otherwise checks that the seeds there
// still decode.
func TestZSetFuzzSeeds(t *testing.T) {
	s := NewStore()
	s.Apply(1, t0, []Command{zadd("small", 1, "a", 2.5, "b"), c(OpExpireAt, "small").i(t0 + 10)})
	for i := range 130 {
		s.Apply(uint64(i+2), t0, []Command{zadd("large", i, "m"+itoa(i))})
	}
	nows, entries := randomZSetEntries(5, 3)
	seeds := map[string][]byte{
		"FuzzRestore/zset":     snapshotBytes(t, s),
		"FuzzDecodeEntry/zset": EncodeEntry(nil, nows[0], append(append(entries[0], entries[1]...), entries[2]...)),
	}
	for name, b := range seeds {
		path := filepath.Join("testdata", "fuzz", name)
		if os.Getenv("KVS_WRITE_FUZZ_SEEDS") != "" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("seed %s missing (run with KVS_WRITE_FUZZ_SEEDS=1): %v", name, err)
		}
	}
}

// TestStoreSignalsOnlyNewKeys: ZUNIONSTORE, ZRANGESTORE and SORT ... STORE
// signal their destination to blocked clients only when they create it,
// as Redis 7.0 signals the keys it adds and not those it overwrites.
func TestStoreSignalsOnlyNewKeys(t *testing.T) {
	s := NewStore()
	var ready []string
	s.SetReadyHook(func(keys []string) { ready = append(ready, keys...) })
	run(t, s, []step{
		{t0, zadd("src", 1, "a"), in(1)},
		{t0, c(OpRPush, "l", "7"), in(1)},
		{t0, c(OpSet, "str", "v"), ok},
	})
	ready = nil
	run(t, s, []step{
		{t0, c(OpZSetOpStore, "new1", "src").i2(ZSetUnion), in(1)},
		{t0, c(OpZSetOpStore, "str", "src").i2(ZSetUnion), in(1)},
		{t0, c(OpSet, "str", "v"), ok},
		{t0, c(OpZRangeStore, "new2", "src").i(0).i2(-1), in(1)},
		{t0, c(OpZRangeStore, "str", "src").i(0).i2(-1), in(1)},
		{t0, c(OpSortStore, "l", "new3", "").i2(-1), in(1)},
		{t0, c(OpSortStore, "l", "str", "").i2(-1), in(1)},
	})
	if want := []string{"new1", "new2", "new3"}; !slices.Equal(ready, want) {
		t.Errorf("ready keys %v, want %v", ready, want)
	}
}
