package fsm

import (
	"strconv"
	"testing"
)

// Benchmarks of the bit commands on small strings (16 bytes, over many
// keys) and on one large bitmap (1 MiB), with allocations.

const benchBitKeys = 10_000

// benchBitStore holds 10k strings of 16 bytes (small) or one of 1 MiB.
func benchBitStore(b *testing.B, small bool) *Store {
	s := NewStore()
	if small {
		for i := range benchBitKeys {
			s.Apply(0, t0, []Command{c(OpSetBit, "bits:"+strconv.Itoa(i)).i(127).i2(1)})
		}
	} else {
		s.Apply(0, t0, []Command{c(OpSetBit, "big").i(8<<20 - 1).i2(1)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	return s
}

func smallBitKey(i int) string { return "bits:" + strconv.Itoa(i%benchBitKeys) }

// BenchmarkSetBitSmall flips a bit of a 16-byte string: a new buffer each
// time.
func BenchmarkSetBitSmall(b *testing.B) {
	s := benchBitStore(b, true)
	cmds := smallBitCmds(OpSetBit)
	batch := make([]Command, 1)
	i := 0
	for b.Loop() {
		batch[0] = cmds[i%benchBitKeys]
		batch[0].Int, batch[0].Int2 = int64(i%128), int64(i/benchBitKeys%2)
		s.Apply(0, t0, batch)
		i++
	}
}

// BenchmarkSetBitGrow sets a bit in a new byte past the end of a large
// bitmap each time: it grows in its spare capacity (amortised O(1)).
func BenchmarkSetBitGrow(b *testing.B) {
	s := benchBitStore(b, false)
	off := int64(8 << 20)
	cmds := []Command{c(OpSetBit, "big").i2(1)}
	for b.Loop() {
		cmds[0].Int = off
		s.Apply(0, t0, cmds)
		off += 8
	}
}

// BenchmarkSetBitLargeInside changes a bit inside a 1 MiB bitmap: the
// string is copied (its bytes below the length are never written in
// place, see item), so this is O(length).
func BenchmarkSetBitLargeInside(b *testing.B) {
	s := benchBitStore(b, false)
	cmds := []Command{c(OpSetBit, "big")}
	i := int64(0)
	for b.Loop() {
		cmds[0].Int, cmds[0].Int2 = i*7919%(8<<20), i&1
		s.Apply(0, t0, cmds)
		i++
	}
}

// smallBitCmds returns one command of op per small key, built before the
// timer starts, as the server hands the store commands it has parsed.
func smallBitCmds(op Op, args ...string) []Command {
	cmds := make([]Command, benchBitKeys)
	for i := range cmds {
		cmds[i] = c(op, append([]string{smallBitKey(i)}, args...)...)
	}
	return cmds
}

func BenchmarkGetBit(b *testing.B) {
	cmds := smallBitCmds(OpGetBit)
	s := benchBitStore(b, true)
	i := 0
	for b.Loop() {
		cmd := cmds[i%benchBitKeys]
		cmd.Int = int64(i % 128)
		s.Read(t0, cmd)
		i++
	}
}

func BenchmarkBitCountSmall(b *testing.B) {
	cmds := smallBitCmds(OpBitCount)
	s := benchBitStore(b, true)
	i := 0
	for b.Loop() {
		s.Read(t0, cmds[i%benchBitKeys])
		i++
	}
}

// BenchmarkBitCountLarge counts the bits of a 1 MiB bitmap.
func BenchmarkBitCountLarge(b *testing.B) {
	s := benchBitStore(b, false)
	cmd := c(OpBitCount, "big")
	b.SetBytes(1 << 20)
	for b.Loop() {
		s.Read(t0, cmd)
	}
}

// BenchmarkBitPosLarge finds the one set bit at the end of a 1 MiB bitmap.
func BenchmarkBitPosLarge(b *testing.B) {
	s := benchBitStore(b, false)
	cmd := c(OpBitPos, "big").fl(FlagBitSet)
	b.SetBytes(1 << 20)
	for b.Loop() {
		s.Read(t0, cmd)
	}
}

// BenchmarkBitFieldIncr is BITFIELD INCRBY u8 on small strings.
func BenchmarkBitFieldIncr(b *testing.B) {
	s := benchBitStore(b, true)
	op := string(EncodeBitFieldOp(BitFieldOp{Write: true, Incr: true, Bits: 8, Offset: 40, Value: 1}))
	cmds := smallBitCmds(OpBitField, op)
	batch := make([]Command, 1)
	i := 0
	for b.Loop() {
		batch[0] = cmds[i%benchBitKeys]
		s.Apply(0, t0, batch)
		i++
	}
}

// BenchmarkBitFieldGet is BITFIELD_RO GET i16 on small strings.
func BenchmarkBitFieldGet(b *testing.B) {
	s := benchBitStore(b, true)
	cmds := smallBitCmds(OpBitFieldRO, string(EncodeBitFieldOp(BitFieldOp{Signed: true, Bits: 16, Offset: 100})))
	i := 0
	for b.Loop() {
		s.Read(t0, cmds[i%benchBitKeys])
		i++
	}
}

// BenchmarkBitOpLarge ANDs two 1 MiB bitmaps into a third.
func BenchmarkBitOpLarge(b *testing.B) {
	s := benchBitStore(b, false)
	s.Apply(0, t0, []Command{c(OpSetBit, "big2").i(8<<20 - 2).i2(1)})
	cmds := []Command{c(OpBitOp, "dst", "big", "big2").i(BitOpAnd)}
	b.SetBytes(2 << 20)
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}
