package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// HyperLogLog (PFADD, PFCOUNT, PFMERGE, PFDEBUG), as Redis 7.0.15's
// hyperloglog.c has it, byte for byte: a HyperLogLog is a string holding
// Redis's representation, so GET and SET move one between kvs and
// redis-server.
//
//	+------+---+-----+----------+--------------------------------+
//	| HYLL | E | N/U | Cardin.  | registers                      |
//	+------+---+-----+----------+--------------------------------+
//	  4      1   3     8 (little endian; bit 63 set: not valid)
//
// E is 0 for the dense encoding (16384 registers of 6 bits, 12288 bytes,
// the least significant bits first) and 1 for the sparse one (runs of
// opcodes: ZERO 00xxxxxx, XZERO 01xxxxxx yyyyyyyy, VAL 1vvvvvxx). A key
// starts sparse and turns dense when a register needs a value above 32 or
// the string would pass hll-sparse-max-bytes, which travels in the command
// (Command.Int) so that every replica promotes at the same add.
//
// The cached cardinality is part of the value: Redis's PFCOUNT of one key
// stores what it computed there and propagates the change. kvs makes
// PFCOUNT of one key a write (OpPFCount), so that the cache is written
// through the log and GET answers the same bytes on every replica; it
// changes the key only when the cache was not valid, as Redis does.
//
// Where Redis changes the value in place, a write here builds a new buffer
// (stored values are never changed below their length: see item), with
// the same bytes Redis ends with, including what a PFADD that meets a
// corrupted register list leaves behind before it answers INVALIDOBJ.

const (
	// OpPFAdd: Args[0]=key, Args[1:]=elements, Int=hll-sparse-max-bytes.
	// Reply :1 when a register changed or the key was created, else :0.
	OpPFAdd Op = opBaseHLL + iota
	// OpPFCount (PFCOUNT of one key): Args[0]=key. Reply :cardinality.
	// A write: it stores the cardinality in the key's cache when that was
	// not valid.
	OpPFCount
	// OpPFMerge: Args[0]=destination, Args[1:]=sources (the destination is
	// a source too, as in Redis), Int=hll-sparse-max-bytes. Reply +OK.
	OpPFMerge
	// OpPFDebug: Args[0]=key, Args[1]=the subcommand (GETREG, DECODE,
	// ENCODING, TODENSE, any case; another is answered as Redis does once
	// the key is found). Reply as the subcommand's.
	OpPFDebug
	// OpPFCountUnion (PFCOUNT of several keys): Args=keys (two or more).
	// Reply :cardinality of their union. A read.
	OpPFCountUnion
)

// Error texts of the HyperLogLog commands.
const (
	ErrNotHLL     = "WRONGTYPE Key is not a valid HyperLogLog string value."
	ErrHLLCorrupt = "INVALIDOBJ Corrupted HLL object detected"
	errHLLNoKey   = "ERR The specified key does not exist"
	errHLLSparse  = "ERR HLL encoding is not sparse"
)

// HLLSparseMaxBytes is hll-sparse-max-bytes' default.
const HLLSparseMaxBytes = 3000

func init() {
	registerOp(OpPFAdd, opSpec{name: "PFADD", write: true, args: argsAtLeast(1), check: checkHLLMax,
		apply: applyPFAdd, level: 3})
	registerOp(OpPFCount, opSpec{name: "PFCOUNT", write: true, args: 1, apply: applyPFCount, level: 3})
	registerOp(OpPFMerge, opSpec{name: "PFMERGE", write: true, args: argsAtLeast(1), check: checkHLLMax,
		apply: applyPFMerge, keys: keysAll, level: 3})
	registerOp(OpPFDebug, opSpec{name: "PFDEBUG", write: true, args: 2, apply: applyPFDebug, level: 3})
	registerOp(OpPFCountUnion, opSpec{name: "PFCOUNT", args: argsAtLeast(2), read: readPFCountUnion,
		keys: keysAll, level: 3})
}

func checkHLLMax(c *Command) error {
	if c.Int < 0 {
		return errorString("negative hll-sparse-max-bytes")
	}
	return nil
}

// The representation's constants (hyperloglog.c's HLL_*).
const (
	hllP          = 14
	hllQ          = 64 - hllP
	hllRegisters  = 1 << hllP
	hllPMask      = hllRegisters - 1
	hllBits       = 6
	hllRegMax     = 1<<hllBits - 1
	hllHdrSize    = 16
	hllDenseSize  = hllHdrSize + (hllRegisters*hllBits+7)/8
	hllDense      = 0
	hllSparse     = 1
	hllMaxEncoded = 1

	hllSparseValMax     = 32
	hllSparseValMaxLen  = 4
	hllSparseZeroMaxLen = 64
	hllSparseXZeroMax   = 16384

	hllAlphaInf = 0.721347520444481703680 // 0.5/ln(2)
	hllSeed     = 0xadc83b19
)

// murmurHash64A is Redis's MurmurHash2, 64-bit version, endian neutral.
func murmurHash64A(key []byte, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ uint64(len(key))*m
	n := len(key) &^ 7
	for i := 0; i < n; i += 8 {
		k := binary.LittleEndian.Uint64(key[i:])
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
	}
	tail := key[n:]
	switch len(tail) {
	case 7:
		h ^= uint64(tail[6]) << 48
		fallthrough
	case 6:
		h ^= uint64(tail[5]) << 40
		fallthrough
	case 5:
		h ^= uint64(tail[4]) << 32
		fallthrough
	case 4:
		h ^= uint64(tail[3]) << 24
		fallthrough
	case 3:
		h ^= uint64(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint64(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint64(tail[0])
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// hllPatLen returns the register an element hashes to and the length of
// the 000..1 pattern of the rest of its hash (1 to Q+1).
func hllPatLen(ele []byte) (index int, count uint8) {
	hash := murmurHash64A(ele, hllSeed)
	index = int(hash & hllPMask)
	hash >>= hllP
	hash |= 1 << hllQ
	return index, uint8(bits.TrailingZeros64(hash) + 1)
}

// denseGet returns register i of the dense registers regs. Redis reads
// the byte after the array for the last register (sds's terminator, 0);
// it contributes no bit there, so it is left out.
func denseGet(regs []byte, i int) uint8 {
	b := i * hllBits / 8
	fb := uint(i * hllBits & 7)
	v := uint(regs[b]) >> fb
	if b+1 < len(regs) {
		v |= uint(regs[b+1]) << (8 - fb)
	}
	return uint8(v & hllRegMax)
}

// denseSet sets register i of regs to v (at most hllRegMax).
func denseSet(regs []byte, i int, v uint8) {
	b := i * hllBits / 8
	fb := uint(i * hllBits & 7)
	regs[b] &^= byte(hllRegMax << fb)
	regs[b] |= byte(uint(v) << fb)
	if b+1 < len(regs) {
		regs[b+1] &^= byte(hllRegMax >> (8 - fb))
		regs[b+1] |= byte(uint(v) >> (8 - fb))
	}
}

// denseMax raises register i to v if it is below; it reports whether it
// did (hllDenseSet).
func denseMax(regs []byte, i int, v uint8) bool {
	if v > denseGet(regs, i) {
		denseSet(regs, i, v)
		return true
	}
	return false
}

// The sparse opcodes.
func spIsZero(op byte) bool  { return op&0xc0 == 0 }
func spIsXZero(op byte) bool { return op&0xc0 == 0x40 }
func spIsVal(op byte) bool   { return op&0x80 != 0 }
func spZeroLen(op byte) int  { return int(op&0x3f) + 1 }
func spXZeroLen(op, next byte) int {
	return (int(op&0x3f)<<8 | int(next)) + 1
}
func spValValue(op byte) int      { return int(op>>2&0x1f) + 1 }
func spValLen(op byte) int        { return int(op&3) + 1 }
func spVal(val, n int) byte       { return byte((val-1)<<2|(n-1)) | 0x80 }
func spZero(n int) byte           { return byte(n - 1) }
func spXZero(n int) (hi, lo byte) { return byte((n-1)>>8) | 0x40, byte((n - 1) & 0xff) }
func byteAt(b []byte, i int) byte {
	// Redis reads an XZERO's second byte even past the string's end,
	// where sds's terminator is: 0.
	if i < len(b) {
		return b[i]
	}
	return 0
}

// sparseRun is one opcode of a sparse representation at p: how many
// registers it covers, their value (0 for ZERO and XZERO), and its length
// in bytes.
func sparseRun(b []byte, p int) (runlen, val, oplen int) {
	switch op := b[p]; {
	case spIsZero(op):
		return spZeroLen(op), 0, 1
	case spIsXZero(op):
		return spXZeroLen(op, byteAt(b, p+1)), 0, 2
	default:
		return spValLen(op), spValValue(op), 1
	}
}

// sparseEach calls fn with each run of the sparse registers of hll, in
// order, and reports whether they cover exactly the 16384 registers; it
// stops at a run that would pass the last one, as Redis 7.0.15 does.
func sparseEach(hll []byte, fn func(first, runlen, val int)) bool {
	idx := 0
	for p := hllHdrSize; p < len(hll); {
		runlen, val, oplen := sparseRun(hll, p)
		if runlen+idx > hllRegisters {
			return false
		}
		fn(idx, runlen, val)
		idx += runlen
		p += oplen
	}
	return idx == hllRegisters
}

// newHLL returns an empty HyperLogLog: sparse, its registers one XZERO.
func newHLL() []byte {
	b := make([]byte, hllHdrSize+2, hllHdrSize+16)
	copy(b, "HYLL")
	b[4] = hllSparse
	b[hllHdrSize], b[hllHdrSize+1] = spXZero(hllRegisters)
	return b
}

// isHLL reports whether v passes Redis's isHLLObjectOrReply: the header,
// a known encoding, and a dense one's exact length.
func isHLL(v []byte) bool {
	if len(v) < hllHdrSize || string(v[:4]) != "HYLL" || v[4] > hllMaxEncoded {
		return false
	}
	return v[4] != hllDense || len(v) == hllDenseSize
}

func hllValidCache(v []byte) bool { return v[15]&0x80 == 0 }
func hllInvalidate(v []byte)      { v[15] |= 0x80 }

// hllToDense returns the dense form of hll (hll itself when it is dense
// already), the header copied; ok is false when the sparse registers are
// corrupted (hllSparseToDense).
func hllToDense(hll []byte) (dense []byte, ok bool) {
	if hll[4] == hllDense {
		return hll, true
	}
	dense = make([]byte, hllDenseSize)
	copy(dense, hll[:hllHdrSize])
	dense[4] = hllDense
	regs := dense[hllHdrSize:]
	ok = sparseEach(hll, func(first, runlen, val int) {
		for i := first; val != 0 && i < first+runlen; i++ {
			denseSet(regs, i, uint8(val))
		}
	})
	if !ok {
		return nil, false
	}
	return dense, true
}

// hllSparseSet raises register index of the sparse hll, which the caller
// owns, to count if it is below, as Redis's hllSparseSet does: it returns
// the representation (promoted to dense when count does not fit a VAL or
// the string would pass maxBytes), and 1 when it changed a register, 0
// when not, -1 when the representation is corrupted (then unchanged).
func hllSparseSet(hll []byte, index int, count uint8, maxBytes int64) ([]byte, int) {
	if count > hllSparseValMax {
		return hllPromote(hll, index, count)
	}
	// Step 1: the opcode covering the register.
	end := len(hll)
	p, prev, first, span := hllHdrSize, -1, 0, 0
	for p < end {
		var oplen int
		span, _, oplen = sparseRun(hll, p)
		if index <= first+span-1 {
			break
		}
		prev = p
		p += oplen
		first += span
	}
	if span == 0 || p >= end {
		return hll, -1
	}
	op := hll[p]
	next := p + 1
	if spIsXZero(op) {
		next = p + 2
	}
	if next >= end {
		next = -1
	}
	// Step 2: the easy cases, a VAL at least count (nothing to do), a
	// VAL or a ZERO of this register alone; else the opcode is split.
	if spIsVal(op) {
		if spValValue(op) >= int(count) {
			return hll, 0
		}
		if spValLen(op) == 1 {
			hll[p] = spVal(int(count), 1)
			return hllSparseMerge(hll, prev), 1
		}
	}
	if spIsZero(op) && spZeroLen(op) == 1 {
		hll[p] = spVal(int(count), 1)
		return hllSparseMerge(hll, prev), 1
	}
	var seq [5]byte
	n := 0
	last := first + span - 1
	zeros := func(l int) {
		if l > hllSparseZeroMaxLen {
			seq[n], seq[n+1] = spXZero(l)
			n += 2
		} else {
			seq[n] = spZero(l)
			n++
		}
	}
	if !spIsVal(op) {
		if index != first {
			zeros(index - first)
		}
		seq[n] = spVal(int(count), 1)
		n++
		if index != last {
			zeros(last - index)
		}
	} else {
		cur := spValValue(op)
		if index != first {
			seq[n] = spVal(cur, index-first)
			n++
		}
		seq[n] = spVal(int(count), 1)
		n++
		if index != last {
			seq[n] = spVal(cur, last-index)
			n++
		}
	}
	// Step 3: the new sequence in place of the opcode, unless the string
	// would grow past maxBytes.
	oldlen := 1
	if spIsXZero(op) {
		oldlen = 2
	}
	delta := n - oldlen
	if delta > 0 && int64(len(hll)+delta) > maxBytes {
		return hllPromote(hll, index, count)
	}
	nb := make([]byte, 0, len(hll)+max(delta, 0)+3)
	nb = append(nb, hll[:p]...)
	nb = append(nb, seq[:n]...)
	if next >= 0 {
		nb = append(nb, hll[next:]...)
	}
	// A truncated XZERO at the end: Redis's length is what it counts,
	// whatever it wrote past it.
	nb = nb[:len(hll)+delta]
	return hllSparseMerge(nb, prev), 1
}

// hllSparseMerge is step 4 of Redis's hllSparseSet: from the opcode before
// the one changed (prev, -1: the first), up to five opcodes on, adjacent
// VALs of one value are merged while they fit one; then the cache is
// invalidated.
func hllSparseMerge(hll []byte, prev int) []byte {
	p := prev
	if p < 0 {
		p = hllHdrSize
	}
	for scan := 5; p < len(hll) && scan > 0; {
		scan--
		switch op := hll[p]; {
		case spIsXZero(op):
			p += 2
			continue
		case spIsZero(op):
			p++
			continue
		}
		if p+1 < len(hll) && spIsVal(hll[p+1]) {
			v1, v2 := spValValue(hll[p]), spValValue(hll[p+1])
			if l := spValLen(hll[p]) + spValLen(hll[p+1]); v1 == v2 && l <= hllSparseValMaxLen {
				hll[p+1] = spVal(v1, l)
				hll = append(hll[:p], hll[p+1:]...)
				continue
			}
		}
		p++
	}
	hllInvalidate(hll)
	return hll
}

// hllPromote turns the sparse hll dense and raises register index to count.
func hllPromote(hll []byte, index int, count uint8) ([]byte, int) {
	dense, ok := hllToDense(hll)
	if !ok {
		return hll, -1
	}
	denseMax(dense[hllHdrSize:], index, count)
	return dense, 1
}

// hllAdd adds ele to hll, which the caller owns (hllAdd): the
// representation after, and 1, 0 or -1 as hllSparseSet.
func hllAdd(hll, ele []byte, maxBytes int64) ([]byte, int) {
	index, count := hllPatLen(ele)
	if hll[4] == hllDense {
		return hll, int(boolInt(denseMax(hll[hllHdrSize:], index, count)))
	}
	return hllSparseSet(hll, index, count, maxBytes)
}

// hllHisto is the histogram of hll's register values; ok is false when its
// sparse registers are corrupted.
func hllHisto(hll []byte) (h [64]int, ok bool) {
	if hll[4] == hllDense {
		regs := hll[hllHdrSize:]
		for i := range hllRegisters {
			h[denseGet(regs, i)]++
		}
		return h, true
	}
	ok = sparseEach(hll, func(_, runlen, val int) { h[val] += runlen })
	return h, ok
}

// hllSigma and hllTau are the helper functions of Otmar Ertl's "New
// cardinality estimation algorithms for HyperLogLog sketches"
// (arXiv:1702.01284), as Redis computes them. The explicit float64
// conversions keep each product rounded on its own, as Redis's build
// does, where a fused multiply-add would round once.
func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zPrime := z
		z += float64(x * y)
		y += y
		if zPrime == z {
			return z
		}
	}
}

func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zPrime := z
		y *= 0.5
		d := 1 - x
		z -= float64(float64(d*d) * y)
		if zPrime == z {
			return z / 3
		}
	}
}

// hllEstimate is hllCount's estimate from a register histogram.
func hllEstimate(h *[64]int) uint64 {
	const m = float64(hllRegisters)
	z := float64(m * hllTau((m-float64(h[hllQ+1]))/m))
	for j := hllQ; j >= 1; j-- {
		z += float64(h[j])
		z *= 0.5
	}
	z += float64(m * hllSigma(float64(h[0])/m))
	return uint64(math.Round(hllAlphaInf * m * m / z))
}

// hllCount is the cardinality hll's registers estimate; ok is false when
// they are corrupted.
func hllCount(hll []byte) (uint64, bool) {
	h, ok := hllHisto(hll)
	if !ok {
		return 0, false
	}
	return hllEstimate(&h), true
}

// hllMerge raises each of union's registers to hll's (hllMerge); false when
// hll's sparse registers are corrupted.
func hllMerge(union *[hllRegisters]uint8, hll []byte) bool {
	if hll[4] == hllDense {
		regs := hll[hllHdrSize:]
		for i := range union {
			if v := denseGet(regs, i); v > union[i] {
				union[i] = v
			}
		}
		return true
	}
	return sparseEach(hll, func(first, runlen, val int) {
		for i := first; i < first+runlen; i++ {
			if uint8(val) > union[i] {
				union[i] = uint8(val)
			}
		}
	})
}

// hllLookupLocked finds the HyperLogLog at key: ok false when missing;
// an error reply when another type or a string that is not one is there.
func (s *Store) hllLookupLocked(now int64, key []byte) (it item, ok bool, errReply Reply, bad bool) {
	it, ok, wrong := s.lookupLocked(now, key, kindString)
	switch {
	case wrong:
		return it, false, replyWrongType, true
	case ok && !isHLL(it.val):
		return it, false, ErrorReply(ErrNotHLL), true
	}
	return it, ok, Reply{}, false
}

// unshareLocked is Redis's dbUnshareStringValue for a value that stays
// as it is: the string becomes raw (OBJECT ENCODING).
func (s *Store) unshareLocked(it item) {
	if it.enc != encRaw {
		it.enc = encRaw
		s.putLocked(it)
	}
}

func applyPFAdd(s *Store, now int64, c *Command) Reply {
	key := c.Args[0]
	it, ok, e, bad := s.hllLookupLocked(now, key)
	if bad {
		return e
	}
	var hll []byte
	updated := 0
	if ok {
		hll = bytes.Clone(it.val)
	} else {
		hll = newHLL()
		updated++
	}
	for _, ele := range c.Args[1:] {
		var r int
		hll, r = hllAdd(hll, ele, c.Int)
		if r < 0 {
			// Redis keeps what the elements before changed, unannounced.
			s.putBitsLocked(key, it, ok, hll)
			s.reportDirtyLocked(0)
			return ErrorReply(ErrHLLCorrupt)
		}
		updated += r
	}
	if updated == 0 {
		s.unshareLocked(it)
		s.reportDirtyLocked(0)
		return replyZero
	}
	hllInvalidate(hll)
	s.putBitsLocked(key, it, ok, hll)
	s.reportDirtyLocked(int64(updated))
	return replyOne
}

func applyPFCount(s *Store, now int64, c *Command) Reply {
	key := c.Args[0]
	it, ok, e, bad := s.hllLookupLocked(now, key)
	switch {
	case bad:
		return e
	case !ok:
		s.reportDirtyLocked(0)
		return replyZero
	}
	if hllValidCache(it.val) {
		s.unshareLocked(it)
		s.reportDirtyLocked(0)
		return IntReply(int64(binary.LittleEndian.Uint64(it.val[8:16])))
	}
	card, valid := hllCount(it.val)
	if !valid {
		s.unshareLocked(it)
		s.reportDirtyLocked(0)
		return ErrorReply(ErrHLLCorrupt)
	}
	hll := bytes.Clone(it.val)
	binary.LittleEndian.PutUint64(hll[8:16], card)
	s.putBitsLocked(key, it, true, hll)
	s.reportDirtyLocked(1)
	return IntReply(int64(card))
}

// hllUnionLocked merges the registers of the HyperLogLogs at keys (missing
// ones are empty) into union; dense reports whether one of them is dense.
// It stops at the first key that is not one, with Redis's error.
func (s *Store) hllUnionLocked(now int64, keys [][]byte, union *[hllRegisters]uint8) (dense bool, e Reply, bad bool) {
	for _, k := range keys {
		it, ok, refusal, refused := s.hllLookupLocked(now, k)
		if refused {
			return false, refusal, true
		}
		if !ok {
			continue
		}
		dense = dense || it.val[4] == hllDense
		if !hllMerge(union, it.val) {
			return false, ErrorReply(ErrHLLCorrupt), true
		}
	}
	return dense, Reply{}, false
}

func readPFCountUnion(s *Store, now int64, c *Command) Reply {
	var union [hllRegisters]uint8
	if _, e, bad := s.hllUnionLocked(now, c.Args, &union); bad {
		return e
	}
	var h [64]int
	for _, v := range union {
		h[v]++
	}
	return IntReply(int64(hllEstimate(&h)))
}

func applyPFMerge(s *Store, now int64, c *Command) Reply {
	var union [hllRegisters]uint8
	useDense, e, bad := s.hllUnionLocked(now, c.Args, &union)
	if bad {
		s.reportDirtyLocked(0)
		return e
	}
	dst := c.Args[0]
	it, ok, _ := s.lookupLocked(now, dst, kindString)
	var hll []byte
	if ok {
		hll = bytes.Clone(it.val)
	} else {
		hll = newHLL()
	}
	if useDense {
		dense, valid := hllToDense(hll)
		if !valid {
			// Not reached: the destination was merged as a source.
			s.putBitsLocked(dst, it, ok, hll)
			s.reportDirtyLocked(0)
			return ErrorReply(ErrHLLCorrupt)
		}
		hll = dense
	}
	for j, v := range union {
		if v == 0 {
			continue
		}
		if hll[4] == hllDense {
			denseMax(hll[hllHdrSize:], j, v)
		} else {
			hll, _ = hllSparseSet(hll, j, v, c.Int)
		}
	}
	hllInvalidate(hll)
	s.putBitsLocked(dst, it, ok, hll)
	s.reportDirtyLocked(1)
	return replyOK
}

func applyPFDebug(s *Store, now int64, c *Command) Reply {
	key, sub := c.Args[0], c.Args[1]
	s.reportDirtyLocked(0)
	it, ok, e, bad := s.hllLookupLocked(now, key)
	switch {
	case bad:
		return e
	case !ok:
		return ErrorReply(errHLLNoKey)
	}
	s.unshareLocked(it)
	hll := it.val
	switch {
	case bytes.EqualFold(sub, []byte("getreg")):
		if hll[4] == hllSparse {
			dense, valid := hllToDense(hll)
			if !valid {
				return ErrorReply(ErrHLLCorrupt)
			}
			hll = dense
			s.putBitsLocked(key, it, true, hll)
			s.reportDirtyLocked(1)
		}
		regs := make([]Reply, hllRegisters)
		for j := range regs {
			regs[j] = IntReply(int64(denseGet(hll[hllHdrSize:], j)))
		}
		return Reply{Kind: ReplyArray, Array: regs}
	case bytes.EqualFold(sub, []byte("decode")):
		if hll[4] != hllSparse {
			return ErrorReply(errHLLSparse)
		}
		return BulkReply(hllDecode(hll))
	case bytes.EqualFold(sub, []byte("encoding")):
		if hll[4] == hllDense {
			return Reply{Kind: ReplyStatus, Str: "dense"}
		}
		return Reply{Kind: ReplyStatus, Str: "sparse"}
	case bytes.EqualFold(sub, []byte("todense")):
		if hll[4] != hllSparse {
			return replyZero
		}
		dense, valid := hllToDense(hll)
		if !valid {
			return ErrorReply(ErrHLLCorrupt)
		}
		s.putBitsLocked(key, it, true, dense)
		s.reportDirtyLocked(1)
		return replyOne
	}
	return ErrorReply("ERR Unknown PFDEBUG subcommand '" + errorArg(sub) + "'")
}

// errorArg is an argument as Redis's addReplyErrorFormat puts it in an
// error: newlines become spaces.
func errorArg(b []byte) string {
	return string(bytes.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, b))
}

// hllDecode is PFDEBUG DECODE's text of the sparse hll's opcodes.
func hllDecode(hll []byte) []byte {
	var out []byte
	for p := hllHdrSize; p < len(hll); {
		runlen, val, oplen := sparseRun(hll, p)
		switch {
		case val != 0:
			out = fmt.Appendf(out, "v:%d,%d ", val, runlen)
		case oplen == 2:
			out = fmt.Appendf(out, "Z:%d ", runlen)
		default:
			out = fmt.Appendf(out, "z:%d ", runlen)
		}
		p += oplen
	}
	return bytes.Trim(out, " ")
}

// HLLSelfTest is PFSELFTEST: Redis's self test of the registers and of the
// estimate's error, sparse and dense side by side, with random values
// from rnd (Redis's rand()). It returns "" or the error to answer.
func HLLSelfTest(maxBytes int64, rnd func() uint32) string {
	// Test 1: every register keeps what is set, and its neighbours theirs.
	regs := make([]byte, hllDenseSize-hllHdrSize)
	var want [hllRegisters]uint8
	for range 1000 {
		for i := range want {
			want[i] = uint8(rnd() & hllRegMax)
			denseSet(regs, i, want[i])
		}
		for i := range want {
			if v := denseGet(regs, i); v != want[i] {
				return fmt.Sprintf("TESTFAILED Register %d should be %d but is %d", i, want[i], v)
			}
		}
	}
	// Test 2: the estimate's error at 1, 10, 100, ... elements.
	clear(regs)
	dense := append(make([]byte, hllHdrSize), regs...)
	copy(dense, "HYLL")
	sparse := newHLL()
	relerr := 1.04 / math.Sqrt(hllRegisters)
	checkpoint := int64(1)
	seed := uint64(rnd()) | uint64(rnd())<<32
	var ele [8]byte
	for j := int64(1); j <= 10000000; j++ {
		binary.LittleEndian.PutUint64(ele[:], uint64(j)^seed)
		idx, count := hllPatLen(ele[:])
		denseMax(dense[hllHdrSize:], idx, count)
		sparse, _ = hllAdd(sparse, ele[:], maxBytes)
		if j != checkpoint {
			continue
		}
		if j < maxBytes/2 && sparse[4] != hllSparse {
			return "TESTFAILED sparse encoding not used"
		}
		cd, _ := hllCount(dense)
		if cs, _ := hllCount(sparse); cd != cs {
			return "TESTFAILED dense/sparse disagree"
		}
		abserr := checkpoint - int64(cd)
		maxerr := uint64(math.Ceil(relerr * 6 * float64(checkpoint)))
		if j == 10 {
			maxerr = 1
		}
		if abserr < 0 {
			abserr = -abserr
		}
		if abserr > int64(maxerr) {
			return "TESTFAILED Too big error. card:" + strconv.FormatInt(checkpoint, 10) +
				" abserr:" + strconv.FormatInt(abserr, 10)
		}
		checkpoint *= 10
	}
	return ""
}

// hllMergeable reports whether PFCOUNT of several keys and PFMERGE go past
// it (for the keys they look up after it): a HyperLogLog whose registers
// are not corrupted.
func hllMergeable(it *item) bool {
	if it.kind != kindString || !isHLL(it.val) {
		return false
	}
	return it.val[4] == hllDense || sparseEach(it.val, func(int, int, int) {})
}
