package fsm

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// sampleCmds covers every write op and every field.
var sampleCmds = []Command{
	c(OpSet, "k", "v").i(t0 + 5000).fl(FlagNX | FlagGet),
	c(OpSetNX, "k", ""),
	c(OpGetSet, "", "v"),
	c(OpGetDel, "k"),
	c(OpGetEx, "k").i(-1).fl(FlagExpire),
	c(OpMSet, "a", "1", "b", "2"),
	c(OpMSetNX, "a", "1"),
	c(OpAppend, "k", "\x00\xff"),
	c(OpSetRange, "k", "v").i(1 << 40),
	c(OpIncrBy, "k").i(math.MinInt64),
	c(OpIncrByFloat, "k").f(math.Copysign(0, -1)),
	c(OpIncrByFloat, "k", "1e3").f(math.Inf(1)),
	c(OpDel, "a", "b", "c"),
	c(OpRename, "a", "b"),
	c(OpRenameNX, "a", "b"),
	c(OpExpireAt, "k").i(math.MaxInt64).i2(7).fl(FlagGT | FlagXX),
	c(OpPersist, "k"),
	c(OpFlushAll),
	c(OpDelExpired),
	c(OpDelExpired, "x", "y"),
	c(OpMetaSet, "node/a/resp", "127.0.0.1:7001"),
	c(OpMetaSet, "node/a/resp", ""),
	c(OpMetaCAS, "slots", "", "1 0-16383:1"),
	c(OpMetaCAS, "slots", "1 0-16383:1", ""),
	MetaTxn([]string{"groups", "", "move/next", "3"}, []string{"move/next", "4", "move/4", "begun"}),
}

func sameCmds(a, b []Command) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Op != y.Op || x.Flags != y.Flags || x.Int != y.Int || x.Int2 != y.Int2 ||
			math.Float64bits(x.Float) != math.Float64bits(y.Float) || len(x.Args) != len(y.Args) {
			return false
		}
		for j := range x.Args {
			if !bytes.Equal(x.Args[j], y.Args[j]) {
				return false
			}
		}
	}
	return true
}

func TestEntryRoundTrip(t *testing.T) {
	for _, cmds := range [][]Command{nil, sampleCmds[:1], sampleCmds} {
		for _, now := range []int64{0, t0, -1, math.MaxInt64} {
			b := EncodeEntry([]byte("prefix"), now, cmds)
			if !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatal("EncodeEntry did not append")
			}
			b = b[len("prefix"):]
			if n := EntrySize(now, cmds); n != len(b) {
				t.Errorf("EntrySize = %d, encoded %d", n, len(b))
			}
			gotNow, got, err := DecodeEntry(b)
			if err != nil || gotNow != now || !sameCmds(got, cmds) {
				t.Fatalf("round trip of %d cmds at %d: now %d, err %v, %+v", len(cmds), now, gotNow, err, got)
			}
		}
	}
}

// TestDecodeEntryVersion1 decodes entries as kvs wrote them before the op
// table (version 1: the op one byte), the form every existing wal segment
// and raft log holds.
func TestDecodeEntryVersion1(t *testing.T) {
	// SET k v EX-deadline NX, DEL a b, INCRBYFLOAT f 1.5, as version 1
	// encoded them, byte for byte.
	v1 := []byte{1, 0x80, 0x01, 3,
		byte(OpSet), 1, fieldInt, 0xd0, 0x0f, 2, 1, 'k', 1, 'v',
		byte(OpDel), 0, 0, 2, 1, 'a', 1, 'b',
		byte(OpIncrByFloat), 0, fieldFloat, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 1, 1, 'f'}
	now, cmds, err := DecodeEntry(v1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{c(OpSet, "k", "v").i(1000).fl(FlagNX), c(OpDel, "a", "b"), c(OpIncrByFloat, "f")}
	want[2].Float = 1.5
	if now != 64 || !sameCmds(cmds, want) {
		t.Fatalf("decoded now %d, %+v", now, cmds)
	}
	// Re-encoded, it is version 2, which differs from version 1 only in
	// the version byte for these ops.
	v2 := EncodeEntry(nil, now, cmds)
	if v2[0] != entryVersion || !bytes.Equal(v2[1:], v1[1:]) {
		t.Fatalf("version 2 of a version 1 entry: % x", v2)
	}
}

func TestEncodeEntryAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = EncodeEntry(buf[:0], t0, sampleCmds) }); n != 0 {
		t.Errorf("EncodeEntry into a large enough buffer: %v allocs", n)
	}
}

func TestDecodeEntryRejects(t *testing.T) {
	good := EncodeEntry(nil, t0, []Command{c(OpSet, "k", "v")})
	tests := map[string][]byte{
		"empty":              {},
		"version":            append([]byte{3}, good[1:]...),
		"v1 op >= 128":       {1, 0, 1, 0x80, 0x01, 0, 0, 0},
		"v1 float2":          {1, 0, 1, byte(OpFlushAll), 0, fieldFloat2, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x40, 0},
		"v1 flags > 16 bits": {1, 0, 1, byte(OpSet), 0x80, 0x80, 0x04, 0, 2, 1, 'k', 1, 'v'},
		"op past limit":      {2, 0, 1, 0xff, 0xff, 0x03, 0, 0, 0},
		"truncated":          good[:len(good)-1],
		"trailing":           append(append([]byte{}, good...), 0),
		"huge count":         {1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"read op":            EncodeEntry(nil, t0, []Command{c(OpGet, "k")}),
		"unknown op":         EncodeEntry(nil, t0, []Command{{Op: 40}}),
		"bad arity":          EncodeEntry(nil, t0, []Command{c(OpSet, "k")}),
		"unknown flag":       EncodeEntry(nil, t0, []Command{c(OpDel, "k").fl(1 << 12)}),
		"negative off":       EncodeEntry(nil, t0, []Command{c(OpSetRange, "k", "v").i(-1)}),
		"meta no name":       EncodeEntry(nil, t0, []Command{c(OpMetaSet, "", "v")}),
		"meta arity":         EncodeEntry(nil, t0, []Command{c(OpMetaSet, "n")}),
		"meta cas no name":   EncodeEntry(nil, t0, []Command{c(OpMetaCAS, "", "", "v")}),
		"meta cas arity":     EncodeEntry(nil, t0, []Command{c(OpMetaCAS, "n", "v")}),
		"meta txn no sets":   EncodeEntry(nil, t0, []Command{c(OpMetaTxn, "2", "a", "", "b", "")}),
		"meta txn odd sets":  EncodeEntry(nil, t0, []Command{c(OpMetaTxn, "1", "a", "", "b", "1", "c")}),
		"meta txn count":     EncodeEntry(nil, t0, []Command{c(OpMetaTxn, "3", "a", "", "b", "1")}),
		"meta txn zero":      EncodeEntry(nil, t0, []Command{c(OpMetaTxn, "0", "a", "", "b", "1")}),
		"meta txn not count": EncodeEntry(nil, t0, []Command{c(OpMetaTxn, "x", "a", "", "b", "1")}),
		"meta txn no name":   EncodeEntry(nil, t0, []Command{c(OpMetaTxn, "1", "a", "", "", "1")}),
		"unknown field":      {1, 0, 1, byte(OpFlushAll), 0, 0x80, 0},
	}
	for name, b := range tests {
		if _, _, err := DecodeEntry(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

// entrySeeds are more FuzzDecodeEntry seeds, commands of each type's ops,
// added from the type's test file's init function.
var entrySeeds [][]Command

func FuzzDecodeEntry(f *testing.F) {
	for _, cmds := range entrySeeds {
		f.Add(EncodeEntry(nil, t0, cmds))
	}
	f.Add(EncodeEntry(nil, t0, sampleCmds))
	f.Add(EncodeEntry(nil, 0, nil))
	f.Add(EncodeEntry(nil, -5, sampleCmds[:3]))
	f.Add(EncodeEntry(nil, t0, bitsSampleCmds))
	f.Add([]byte{1, 0, 1, byte(OpDel), 0, 0, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		now, cmds, err := DecodeEntry(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// What decodes re-encodes to a decoding of the same commands,
		// and applies without panicking.
		again := EncodeEntry(nil, now, cmds)
		now2, cmds2, err := DecodeEntry(again)
		if err != nil || now2 != now || !sameCmds(cmds, cmds2) {
			t.Fatalf("re-encoding changed the entry: %v", err)
		}
		for _, c := range cmds {
			if c.Op == OpSetRange && c.Int > 1<<20 || bitsAllocate(c) > 1<<20 {
				return // valid, but would allocate up to 512 MB per run
			}
		}
		NewStore().Apply(1, now, cmds)
	})
}
