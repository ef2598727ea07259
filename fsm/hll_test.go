package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The bytes and counts below were taken from redis-server 7.0.15 running
// the same commands.

// pfadd is PFADD key elements... with hll-sparse-max-bytes max.
func pfadd(max int64, key string, elements ...string) Command {
	return c(OpPFAdd, append([]string{key}, elements...)...).i(max)
}

// hllAddRange adds prefix0 ... prefix(n-1) to key a hundred at a time, as
// the reference run did.
func hllAddRange(t *testing.T, s *Store, key, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		var els []string
		for j := 0; j < min(100, n-i); j++ {
			els = append(els, fmt.Sprintf("%s%d-%d", prefix, i, j))
		}
		if r := s.Apply(0, t0, []Command{pfadd(HLLSparseMaxBytes, key, els...)})[0]; r.Kind == ReplyError {
			t.Fatalf("PFADD %s: %v", key, r)
		}
	}
}

// value returns the string at key.
func value(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	r := s.Read(t0, c(OpGet, key))
	if r.Kind != ReplyBulk {
		t.Fatalf("GET %s: %v", key, r)
	}
	return r.Bulk
}

// digest is the value as the reference run printed it: quoted when short,
// else its length and SHA-256.
func digest(v []byte) string {
	if len(v) < 80 {
		return fmt.Sprintf("%q", v)
	}
	sum := sha256.Sum256(v)
	return fmt.Sprintf("len %d sha256 %s", len(v), hex.EncodeToString(sum[:]))
}

func TestHLLSmall(t *testing.T) {
	s := NewStore()
	putForeign(s, "h")
	run(t, s, []step{
		{t0, pfadd(3000, "k", "a", "b", "c"), in(1)},
		{t0, c(OpGet, "k"), bulk("HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ")},
		{t0, c(OpPFDebug, "k", "DECODE"), bulk("Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")},
		{t0, c(OpPFCount, "k"), in(3)},
		// The cardinality is cached in the header.
		{t0, c(OpGet, "k"), bulk("HYLL\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00`\xf3\x80P\xb1\x84K\xfb\x80BZ")},
		{t0, pfadd(3000, "k", "a", "b", "c"), in(0)},
		{t0, c(OpGetRange, "k").i(15).i2(15), bulk("\x00")},
		{t0, pfadd(3000, "k", "d"), in(1)},
		{t0, c(OpGetRange, "k").i(15).i2(15), bulk("\x80")},
		{t0, pfadd(3000, "x", ""), in(1)},
		{t0, c(OpGet, "x"), bulk("HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80W1\x84h\xcc")},
		// PFADD without elements creates the key, then changes nothing.
		{t0, pfadd(3000, "e"), in(1)},
		{t0, pfadd(3000, "e"), in(0)},
		{t0, c(OpPFCount, "e"), in(0)},
		{t0, c(OpPFCount, "nokey"), in(0)},
		{t0, c(OpExists, "nokey"), in(0)},
		{t0, c(OpPFDebug, "e", "encoding"), status("sparse")},
		{t0, c(OpPFDebug, "e", "todense"), in(1)},
		{t0, c(OpPFDebug, "e", "todense"), in(0)},
		{t0, c(OpPFDebug, "e", "encoding"), status("dense")},
		{t0, c(OpPFDebug, "e", "decode"), errr("ERR HLL encoding is not sparse")},
		{t0, c(OpPFDebug, "e", "nope"), errr("ERR Unknown PFDEBUG subcommand 'nope'")},
		{t0, c(OpPFDebug, "nokey", "nope"), errr("ERR The specified key does not exist")},
		{t0, c(OpStrLen, "e"), in(12304)},
		// Other types, and strings that are not HyperLogLogs.
		{t0, pfadd(3000, "h", "a"), errr(ErrWrongType)},
		{t0, c(OpPFCount, "h"), errr(ErrWrongType)},
		{t0, c(OpPFDebug, "h", "encoding"), errr(ErrWrongType)},
		{t0, c(OpSet, "s", "HYLL"), ok},
		{t0, pfadd(3000, "s", "a"), errr(ErrNotHLL)},
		{t0, c(OpPFCount, "s"), errr(ErrNotHLL)},
		{t0, c(OpPFMerge, "k", "s").i(3000), errr(ErrNotHLL)},
		{t0, c(OpPFCountUnion, "k", "h"), errr(ErrWrongType)},
		{t0, c(OpPFMerge, "h", "k").i(3000), errr(ErrWrongType)},
	})
}

// TestHLLReference adds growing sets as the reference run did and checks
// the bytes (sparse, promoted, dense), the counts and the cache.
func TestHLLReference(t *testing.T) {
	s := NewStore()
	for _, tc := range []struct {
		n             int
		before, after string
		count         int64
		encoding      string
	}{
		{10, "", "", 10, "sparse"}, // filled in below
		{100, "len 275 sha256 b7bfbc968707c892376d256fe04ef4c4fe45f5b33b52989dd9be7e2b363fb488",
			"len 275 sha256 01876a484c337d1ada2d444923dacbdb70a528afbf13604276b4985e378d4853", 100, "sparse"},
		{200, "len 496 sha256 02c79faf0b0832f6f7024cf8fa372ce99fc3d37c0b6dcfe0a3ed534f46e744a4",
			"len 496 sha256 88ffcf3be6a05fc23746f3cb35d6e9246d7d2cc9a63f57ef92a1524423053cbe", 199, "sparse"},
		{500, "len 1052 sha256 2c81a302eb96a8641cd6a48b0af4188bd6de5183dfe1ed9ab28e8e392e9ea46b",
			"len 1052 sha256 a0dd08beac48f7e8fa802ef1a9cd27322e22b7006dc839e3622d0550e4c56927", 497, "sparse"},
		{1000, "len 1894 sha256 a38e993fb339ff62aae742d4620acf32092803560923f70484424624cc7bc056",
			"len 1894 sha256 1989c31673c0cd586361e7b7fe8da28f67a5901cc65698a4f873a2c77cf146a8", 996, "sparse"},
		{2000, "len 12304 sha256 7c31ddc7548bdea51ff099ec03157f34f5470941cc23ccac20ebf32a34af2f20",
			"len 12304 sha256 01add9383be980442cb010e4e795028714eaa30765f6291df3bccdf4effbbf11", 2002, "dense"},
		{5000, "len 12304 sha256 abc6eaa92f5b05b2f7322939035bd2fbbba18a76c6f7e107f23e2e527ade5bcb",
			"len 12304 sha256 5f38284f50bcd95b3d623c5c33a371d55aa3b83a8ce3de4f40903ff395a0456b", 4975, "dense"},
		{100000, "len 12304 sha256 d92796143e7a31082c38cfb12a58ad51d449a5f599bec76fe4f5d10107c6b070",
			"len 12304 sha256 a71e53c372840e71eb3a78e458ae5b1b376595fa7b11ea8928a4001b12fb9b1c", 101412, "dense"},
	} {
		key := fmt.Sprintf("n%d", tc.n)
		hllAddRange(t, s, key, "e", tc.n)
		if tc.n == 10 {
			// The short value's bytes, unquoted.
			tc.before = digestOf("HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\t\x80C\x13\x8c@\xea\x80NބIH\x88Px\x80D\x1d\x84D\x1b\x80A,\x84E_\x84D\x84")
			tc.after = digestOf("HYLL\x01\x00\x00\x00\n\x00\x00\x00\x00\x00\x00\x00\t\x80C\x13\x8c@\xea\x80NބIH\x88Px\x80D\x1d\x84D\x1b\x80A,\x84E_\x84D\x84")
		}
		if got := digest(value(t, s, key)); got != tc.before {
			t.Errorf("%s: value %s, want %s", key, got, tc.before)
		}
		if r := s.Apply(0, t0, []Command{c(OpPFCount, key)})[0]; r.Kind != ReplyInt || r.Int != tc.count {
			t.Errorf("%s: PFCOUNT %v, want %d", key, r, tc.count)
		}
		if got := digest(value(t, s, key)); got != tc.after {
			t.Errorf("%s: value after PFCOUNT %s, want %s", key, got, tc.after)
		}
		if r := s.Apply(0, t0, []Command{c(OpPFDebug, key, "encoding")})[0]; r.Str != tc.encoding {
			t.Errorf("%s: encoding %v, want %s", key, r, tc.encoding)
		}
	}
	// Merges: of sparse ones stays sparse, with a dense one turns dense.
	run(t, s, []step{
		{t0, c(OpPFMerge, "m", "n10", "n100", "n200").i(3000), ok},
		{t0, c(OpPFCount, "m"), in(199)},
		{t0, c(OpPFCountUnion, "n10", "n100", "n200"), in(199)},
		{t0, c(OpPFMerge, "m2", "n10", "n5000").i(3000), ok},
		{t0, c(OpPFCountUnion, "n10", "n5000", "nokey"), in(4975)},
	})
	s.Apply(0, t0, []Command{c(OpPFMerge, "m3", "n10", "n100", "n200").i(3000)})
	if got, want := digest(value(t, s, "m3")), "len 496 sha256 02c79faf0b0832f6f7024cf8fa372ce99fc3d37c0b6dcfe0a3ed534f46e744a4"; got != want {
		t.Errorf("sparse merge: %s, want %s", got, want)
	}
	s.Apply(0, t0, []Command{c(OpPFMerge, "m4", "n10", "n5000").i(3000)})
	if got, want := digest(value(t, s, "m4")), "len 12304 sha256 abc6eaa92f5b05b2f7322939035bd2fbbba18a76c6f7e107f23e2e527ade5bcb"; got != want {
		t.Errorf("dense merge: %s, want %s", got, want)
	}
}

func digestOf(s string) string { return digest([]byte(s)) }

// TestHLLSparseMaxBytes: a small hll-sparse-max-bytes promotes early.
func TestHLLSparseMaxBytes(t *testing.T) {
	s := NewStore()
	var els []string
	for i := range 30 {
		els = append(els, fmt.Sprintf("s%d", i))
	}
	run(t, s, []step{
		{t0, pfadd(40, "small", els...), in(1)},
		{t0, c(OpPFDebug, "small", "encoding"), status("dense")},
		{t0, c(OpPFCount, "small"), in(30)},
	})
	s.Apply(0, t0, []Command{pfadd(40, "small2", els...)})
	if got, want := digest(value(t, s, "small2")), "len 12304 sha256 40682641462ec7135cdcc8e8ff0ddf5965f70644e667578279d2fe3812c1e55b"; got != want {
		t.Errorf("promoted: %s, want %s", got, want)
	}
}

// TestHLLSparseDense: the same elements give the same registers and count
// in both encodings, and the sparse form stays canonical-sized.
func TestHLLSparseDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		sparse, dense := newHLL(), newHLL()
		dense, _ = hllToDense(dense)
		n := rng.IntN(300)
		for range n {
			ele := []byte(fmt.Sprint(rng.Float64()))
			var r int
			sparse, r = hllAdd(sparse, ele, HLLSparseMaxBytes)
			if r < 0 {
				t.Fatalf("round %d: sparse add failed", round)
			}
			dense, _ = hllAdd(dense, ele, HLLSparseMaxBytes)
		}
		if sparse[4] != hllSparse {
			t.Fatalf("round %d: %d elements promoted", round, n)
		}
		cs, ok1 := hllCount(sparse)
		cd, ok2 := hllCount(dense)
		if !ok1 || !ok2 || cs != cd {
			t.Fatalf("round %d: sparse %d %v, dense %d %v", round, cs, ok1, cd, ok2)
		}
		d, ok := hllToDense(sparse)
		if !ok || !bytes.Equal(d[hllHdrSize:], dense[hllHdrSize:]) {
			t.Fatalf("round %d: sparse registers differ from dense", round)
		}
	}
}

// TestHLLCorrupt: Redis's checks of the representation, and a PFADD that
// meets corruption keeps what it changed before, as Redis does.
func TestHLLCorrupt(t *testing.T) {
	hdr := "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"
	// An XZERO of 16383 then nothing: one register short.
	short := hdr + "\x7f\xfe"
	// Two XZEROs of 16384: past the end.
	long := hdr + "\x7f\xff\x7f\xff"
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpSet, "short", short), ok},
		{t0, c(OpPFCount, "short"), errr(ErrHLLCorrupt)},
		{t0, c(OpPFCountUnion, "short", "x"), errr(ErrHLLCorrupt)},
		{t0, c(OpPFMerge, "d", "short").i(3000), errr(ErrHLLCorrupt)},
		{t0, c(OpExists, "d"), in(0)},
		{t0, c(OpPFDebug, "short", "getreg"), errr(ErrHLLCorrupt)},
		{t0, c(OpPFDebug, "short", "todense"), errr(ErrHLLCorrupt)},
		{t0, c(OpPFDebug, "short", "decode"), bulk("Z:16383")},
		{t0, c(OpSet, "long", long), ok},
		{t0, c(OpPFCount, "long"), errr(ErrHLLCorrupt)},
		{t0, c(OpSet, "magic", "HYLX\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"), ok},
		{t0, c(OpPFCount, "magic"), errr(ErrNotHLL)},
		{t0, c(OpSet, "enc", "HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"), ok},
		{t0, c(OpPFCount, "enc"), errr(ErrNotHLL)},
		{t0, c(OpSet, "dense", "HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"), ok},
		{t0, c(OpPFCount, "dense"), errr(ErrNotHLL)},
		{t0, c(OpSet, "hdr", hdr[:15]), ok},
		{t0, c(OpPFCount, "hdr"), errr(ErrNotHLL)},
		// "c" goes to register 8436, "b" to 15780: PFADD sets the
		// first, then finds the runs too short.
		{t0, c(OpSet, "partial", hdr+"\x63\x27"), ok},
		{t0, pfadd(3000, "partial", "c", "b"), errr(ErrHLLCorrupt)},
		{t0, c(OpPFDebug, "partial", "decode"), bulk("Z:8436 v:1,1 Z:563")},
		// A valid cache answers without looking at the registers.
		{t0, c(OpSet, "cached", hdr[:8]+"\x07\x00\x00\x00\x00\x00\x00\x00"+"\x7f\xfe"), ok},
		{t0, c(OpPFCount, "cached"), in(7)},
	})
	// Runs whose lengths add up past 2^32 are refused, not wrapped.
	var b strings.Builder
	b.WriteString(hdr)
	for range 131072 + 1000 {
		b.WriteString("\x7f\xff")
	}
	b.WriteString("\xff")
	run(t, s, []step{
		{t0, c(OpSet, "huge", b.String()), ok},
		{t0, c(OpPFCountUnion, "huge", "huge"), errr(ErrHLLCorrupt)},
		{t0, c(OpPFDebug, "huge", "getreg"), errr(ErrHLLCorrupt)},
	})
}

// TestHLLRandomCorruption never panics on random damage, and answers an
// error or a count.
func TestHLLRandomCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := NewStore()
	for round := range 300 {
		var els []string
		for range rng.IntN(3000) {
			els = append(els, fmt.Sprint(rng.Float64()))
		}
		s.Apply(0, t0, []Command{c(OpDel, "h"), pfadd(3000, "h", els...)})
		v := bytes.Clone(value(t, s, "h"))
		for range 1 + rng.IntN(5) {
			v[rng.IntN(len(v))] = byte(rng.IntN(256))
		}
		s.Apply(0, t0, []Command{c(OpSet, "h", string(v))})
		for _, cmd := range []Command{c(OpPFCount, "h"), pfadd(3000, "h", "x", "y"),
			c(OpPFMerge, "h2", "h").i(3000), c(OpPFDebug, "h", "getreg")} {
			if r := s.Apply(0, t0, []Command{cmd})[0]; r.Kind != ReplyInt && r.Kind != ReplyError &&
				r.Kind != ReplyStatus && r.Kind != ReplyArray {
				t.Fatalf("round %d: %v answered %v", round, cmd.Op, r)
			}
		}
	}
}

func TestHLLSelfTest(t *testing.T) {
	if testing.Short() {
		t.Skip("ten million adds")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	if e := HLLSelfTest(HLLSparseMaxBytes, rng.Uint32); e != "" {
		t.Fatal(e)
	}
}

// TestHLLNotify: PFADD and PFMERGE announce pfadd (and new for the key
// they create); PFCOUNT and PFMERGE miss keys they read.
func TestHLLNotify(t *testing.T) {
	s := NewStore()
	var got []string
	s.SetNotifyHook(func(ev []Event) {
		for _, e := range ev {
			got = append(got, e.Name+":"+e.Key)
		}
	})
	s.SetNotifyClasses(NotifyKeyspace | NotifyAll | NotifyKeyMiss | NotifyNew)
	for _, cmd := range []Command{
		pfadd(3000, "a", "x"), pfadd(3000, "a", "x"), pfadd(3000, "a", "y"),
		c(OpPFCount, "nokey"), c(OpPFCount, "a"),
		c(OpPFMerge, "m", "a", "b").i(3000),
	} {
		s.Apply(0, t0, []Command{cmd})
	}
	s.Read(t0, c(OpPFCountUnion, "a", "c"))
	want := "new:a pfadd:a pfadd:a keymiss:nokey keymiss:m keymiss:b new:m pfadd:m keymiss:c"
	if strings.Join(got, " ") != want {
		t.Errorf("events %s\nwant   %s", strings.Join(got, " "), want)
	}
}

// TestHLLDirty: Redis's dirty counter counts each changed register, the
// cache's update and a merge.
func TestHLLDirty(t *testing.T) {
	s := NewStore()
	steps := []struct {
		cmd  Command
		want int64
	}{
		{pfadd(3000, "a", "x", "y", "z"), 4},
		{pfadd(3000, "a", "x"), 0},
		{c(OpPFCount, "a"), 1},
		{c(OpPFCount, "a"), 0},
		{c(OpPFMerge, "m", "a").i(3000), 1},
		{c(OpPFDebug, "m", "todense"), 1},
		{c(OpPFDebug, "m", "encoding"), 0},
	}
	for i, st := range steps {
		before := s.Dirty()
		s.Apply(0, t0, []Command{st.cmd})
		if d := s.Dirty() - before; d != st.want {
			t.Errorf("step %d: dirty +%d, want +%d", i, d, st.want)
		}
	}
}

// TestHLLLevel: every HyperLogLog op, reads too, waits for a cluster that
// applies level 3, which an earlier kvs cannot.
func TestHLLLevel(t *testing.T) {
	for _, op := range []Op{OpPFAdd, OpPFCount, OpPFMerge, OpPFDebug, OpPFCountUnion} {
		if got := Level([]Command{{Op: op}}); got != 3 {
			t.Errorf("%v: level %d, want 3", op, got)
		}
	}
}

// TestHLLMergePromotes: PFMERGE into a sparse destination promotes it by
// the hll-sparse-max-bytes it carries (redis-server gave the same bytes).
func TestHLLMergePromotes(t *testing.T) {
	s := NewStore()
	for i := range 4 {
		var els []string
		for j := 1; j <= 60; j++ {
			els = append(els, fmt.Sprintf("x%d-%d", i, j))
		}
		s.Apply(0, t0, []Command{pfadd(3000, "src", els...)})
	}
	run(t, s, []step{
		{t0, c(OpPFMerge, "m", "src").i(100), ok},
		{t0, c(OpPFDebug, "m", "encoding"), status("dense")},
		{t0, c(OpPFDebug, "src", "encoding"), status("sparse")},
		{t0, c(OpPFCountUnion, "m", "src"), in(241)},
	})
	want := "len 12304 sha256 33062b585fb31267c3b0dc30b4472974a0d64df1fc781fbf1f80dcb282b96203"
	if got := digest(value(t, s, "m")); got != want {
		t.Errorf("merged value %s, want %s", got, want)
	}
}
