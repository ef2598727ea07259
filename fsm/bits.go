package fsm

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Bit operations on strings (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
// BITFIELD, BITFIELD_RO) and LCS, as in Redis 7.0's bitops.c and t_string.c.
// Bit 0 is the most significant bit of the first byte. A write never
// changes stored bytes below the string's length (see item): it builds a
// new buffer, except that growing the string may use the spare capacity
// past its length, as APPEND does, so that SETBIT at ever higher offsets
// of a large bitmap stays linear overall.

const (
	// OpSetBit: Args[0]=key, Int=bit offset (>= 0), Int2=0 or 1.
	// Reply :the bit's previous value.
	OpSetBit Op = opBaseBits + iota
	// OpBitField: Args[0]=key, Args[1:]=subcommands, each one
	// encodeBitFieldOp's 20 bytes; at least one writes. Reply an array,
	// one element per subcommand (nil for a write OVERFLOW FAIL refused).
	OpBitField
	// OpBitOp: Int=bitopAnd..bitopNot, Args[0]=destination, Args[1:]=
	// sources (one for NOT). Reply :length of the result; an empty result
	// deletes the destination.
	OpBitOp
	// OpGetBit: Args[0]=key, Int=bit offset (>= 0). Reply :0 or :1.
	OpGetBit
	// OpBitCount: Args[0]=key. With FlagBitRange, Int=start, Int2=end
	// (bytes, or bits with FlagBitUnit). FlagDeferredError: Args[1] is an
	// error to answer if the key holds a string (Redis 7.0 looks the key up
	// before it parses the range). Reply :count.
	OpBitCount
	// OpBitPos: Args[0]=key; FlagBitSet looks for a 1, else a 0; with
	// FlagBitRange, Int=start, and with FlagBitEnd Int2=end; FlagBitUnit
	// and FlagDeferredError as for OpBitCount. Reply :position or :-1.
	OpBitPos
	// OpBitFieldRO (BITFIELD_RO, and BITFIELD with only GETs): as
	// OpBitField with GET subcommands only. Reply an array of integers.
	OpBitFieldRO
	// OpLCS: Args[0], Args[1]=keys; FlagLCSLen, FlagLCSIdx,
	// FlagLCSWithMatchLen; Int=MINMATCHLEN; Int2=the limit on the
	// table's transient memory (proto-max-bulk-len); FlagDeferredError
	// with the error in Args[2] (Redis checks the keys' types first).
	// Reply the common subsequence (bulk), its length, or with IDX a map
	// of matches and len.
	OpLCS
)

// Flags of the bit ops.
const (
	FlagBitRange Flags = 1 << iota // OpBitCount, OpBitPos: a start (and end) given
	FlagBitEnd                     // OpBitPos: an end given
	FlagBitUnit                    // the range is in bits (BIT), not bytes
	FlagBitSet                     // OpBitPos: look for a 1
	// FlagDeferredError: the command's last argument is an error text
	// to answer once the lookup has found the key(s) of the right type.
	FlagDeferredError
)

// Flags of OpLCS.
const (
	FlagLCSLen Flags = 1 << iota
	FlagLCSIdx
	FlagLCSWithMatchLen
)

// BITOP operations, in OpBitOp's Int.
const (
	BitOpAnd = iota
	BitOpOr
	BitOpXor
	BitOpNot
)

// Error texts of the bit commands that depend on the data.
const (
	ErrLCSWrongType   = "ERR The specified keys must contain string values"
	ErrLCSTooLong     = "ERR String too long for LCS"
	ErrLCSMemoryLimit = "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
)

// MaxBitOffset bounds the bit offsets an entry may hold: past it a string
// would exceed any length kvs can hold in memory, so such an entry is
// corrupt (the server refuses offsets past proto-max-bulk-len first).
const MaxBitOffset = 1<<(32+3+3) - 1 // a 32 GiB string

func init() {
	registerOp(OpSetBit, opSpec{name: "SETBIT", write: true, args: 1, check: checkSetBit, apply: applySetBit})
	registerOp(OpBitField, opSpec{name: "BITFIELD", write: true, args: argsAtLeast(2), check: checkBitField,
		apply: applyBitField})
	registerOp(OpBitOp, opSpec{name: "BITOP", write: true, args: argsAtLeast(2), check: checkBitOp,
		apply: applyBitOp, keys: keysAll})
	registerOp(OpGetBit, opSpec{name: "GETBIT", args: 1, check: checkGetBit, read: readGetBit})
	registerOp(OpBitCount, opSpec{name: "BITCOUNT", args: argsAtLeast(1),
		flags: FlagBitRange | FlagBitUnit | FlagDeferredError, check: checkDeferred(1), read: readBitCount})
	registerOp(OpBitPos, opSpec{name: "BITPOS", args: argsAtLeast(1),
		flags: FlagBitRange | FlagBitEnd | FlagBitUnit | FlagBitSet | FlagDeferredError, check: checkDeferred(1),
		read: readBitPos})
	registerOp(OpBitFieldRO, opSpec{name: "BITFIELD_RO", args: argsAtLeast(1), check: checkBitField,
		read: readBitField})
	registerOp(OpLCS, opSpec{name: "LCS", args: argsAtLeast(2),
		flags: FlagLCSLen | FlagLCSIdx | FlagLCSWithMatchLen | FlagDeferredError, check: checkDeferred(2),
		read: readLCS, keys: keysFirst(2)})
}

// checkDeferred returns an opSpec.check for ops that take n arguments,
// and one more (the error) with FlagDeferredError.
func checkDeferred(n int) func(c *Command) error {
	return func(c *Command) error {
		want := n
		if c.Flags&FlagDeferredError != 0 {
			want++
		}
		if len(c.Args) != want {
			return errorString("wrong argument count for its flags")
		}
		return nil
	}
}

func checkSetBit(c *Command) error {
	if c.Int < 0 || c.Int > MaxBitOffset || c.Int2&^1 != 0 {
		return errorString("bad offset or bit")
	}
	return nil
}

func checkGetBit(c *Command) error {
	if c.Int < 0 {
		return errorString("negative offset")
	}
	return nil
}

func checkBitOp(c *Command) error {
	switch {
	case c.Int < BitOpAnd || c.Int > BitOpNot:
		return errorString("unknown BITOP operation")
	case c.Int == BitOpNot && len(c.Args) != 2:
		return errorString("NOT takes one source")
	}
	return nil
}

// deferredError is the error a FlagDeferredError command carries.
func deferredError(c *Command) (Reply, bool) {
	if c.Flags&FlagDeferredError == 0 {
		return Reply{}, false
	}
	return ErrorReply(string(c.Args[len(c.Args)-1])), true
}

// stringForBitsLocked returns the string at key (nil when missing), or
// wrong when another type is there.
func (s *Store) stringForBitsLocked(now int64, key []byte) (it item, ok, wrong bool) {
	return s.lookupLocked(now, key, kindString)
}

// bitsBuffer prepares the string of old (ok: it exists) to be written up
// to length n: it returns a buffer holding the old bytes, zero padded to at
// least n, that the caller may change from byte from on. When from is not
// below the old length the old bytes are never written, so the string
// grows in its spare capacity, or into a new buffer with room to grow
// (amortised linear, like APPEND); otherwise a new buffer is built.
func bitsBuffer(old []byte, n, from int) []byte {
	oldLen := len(old)
	size := max(n, oldLen)
	if from >= oldLen && size <= cap(old) {
		buf := old[:size]
		clear(buf[oldLen:])
		return buf
	}
	capacity := size
	if from >= oldLen && oldLen > 0 {
		// Growing an existing string: leave room for more, as append
		// does.
		capacity = max(size, oldLen+oldLen/4+64)
	}
	buf := make([]byte, size, capacity)
	copy(buf, old)
	return buf
}

// putBitsLocked stores buf as the string at key, keeping old's TTL.
func (s *Store) putBitsLocked(key []byte, old item, ok bool, buf []byte) {
	var exp int64
	if ok {
		exp = old.exp
	}
	it := item{hash: keyHash(unsafeString(key)), val: buf, exp: exp, kind: kindString, enc: encRaw}
	if ok {
		it.key = old.key // the same key; its allocation may be shared
	} else {
		it.key = string(key)
	}
	s.putLocked(it)
}

func applySetBit(s *Store, now int64, c *Command) Reply {
	key, offset, on := c.Args[0], c.Int, byte(c.Int2)
	old, ok, wrong := s.stringForBitsLocked(now, key)
	if wrong {
		return replyWrongType
	}
	byteIdx := int(offset >> 3)
	shift := 7 - uint(offset&7)
	var prev byte
	if byteIdx < len(old.val) {
		prev = old.val[byteIdx] >> shift & 1
		if prev == on {
			// Nothing changes but the encoding, as in Redis (which
			// unshares the value first), and no change counts.
			if old.enc != encRaw {
				old.enc = encRaw
				s.putLocked(old)
			}
			s.reportDirtyLocked(0)
			return IntReply(int64(prev))
		}
	}
	buf := bitsBuffer(old.val, byteIdx+1, byteIdx)
	buf[byteIdx] = buf[byteIdx]&^(1<<shift) | on<<shift
	s.putBitsLocked(key, old, ok, buf)
	s.reportDirtyLocked(1)
	return IntReply(int64(prev))
}

func readGetBit(s *Store, now int64, c *Command) Reply {
	it, _, wrong := s.stringForBitsLocked(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	byteIdx := c.Int >> 3
	if byteIdx >= int64(len(it.val)) {
		return replyZero
	}
	return IntReply(int64(it.val[byteIdx] >> (7 - uint(c.Int&7)) & 1))
}

// bitRange turns BITCOUNT's and BITPOS's start and end into a byte range
// [start, end] of a string of n bytes, with masks of the bits outside the
// range in its first and last byte (BIT unit), as Redis 7.0 does. An empty
// range has start > end.
func bitRange(n, start, end int64, inBits bool) (s, e int64, firstMask, lastMask byte) {
	total := n
	if inBits {
		total <<= 3
	}
	if start < 0 {
		start += total
	}
	if end < 0 {
		end += total
	}
	start, end = max(start, 0), max(end, 0)
	if end >= total {
		end = total - 1
	}
	if inBits && start <= end {
		firstMask = ^byte(1<<(8-uint(start&7)) - 1)
		lastMask = byte(1<<(7-uint(end&7)) - 1)
		start >>= 3
		end >>= 3
	}
	return start, end, firstMask, lastMask
}

func readBitCount(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.stringForBitsLocked(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	if r, deferred := deferredError(c); deferred {
		return r
	}
	v := it.val
	start, end := int64(0), int64(len(v))-1
	var firstMask, lastMask byte
	if c.Flags&FlagBitRange != 0 {
		if c.Int < 0 && c.Int2 < 0 && c.Int > c.Int2 {
			return replyZero
		}
		start, end, firstMask, lastMask = bitRange(int64(len(v)), c.Int, c.Int2, c.Flags&FlagBitUnit != 0)
	}
	if start > end {
		return replyZero
	}
	n := popcount(v[start : end+1])
	n -= int64(bits.OnesCount8(v[start]&firstMask) + bits.OnesCount8(v[end]&lastMask))
	return IntReply(n)
}

// popcount counts the bits set in b, eight bytes at a time.
func popcount(b []byte) int64 {
	var n int
	for len(b) >= 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return int64(n)
}

// firstBit is Redis's redisBitpos: the position of the first bit equal to
// bit in b; when there is none, -1 looking for a 1 and len(b)*8 looking
// for a 0 (the string is taken as zero padded on the right).
func firstBit(b []byte, bit byte) int64 {
	skip, skip64 := byte(0), uint64(0)
	if bit == 0 {
		skip, skip64 = 0xff, ^uint64(0)
	}
	i0 := 0
	for i0+8 <= len(b) && binary.LittleEndian.Uint64(b[i0:]) == skip64 {
		i0 += 8
	}
	for i := i0; i < len(b); i++ {
		x := b[i]
		if x == skip {
			continue
		}
		if bit == 0 {
			x = ^x
		}
		return int64(i)*8 + int64(bits.LeadingZeros8(x))
	}
	if bit == 1 {
		return -1
	}
	return int64(len(b)) * 8
}

func readBitPos(s *Store, now int64, c *Command) Reply {
	bit := byte(0)
	if c.Flags&FlagBitSet != 0 {
		bit = 1
	}
	it, ok, wrong := s.stringForBitsLocked(now, c.Args[0])
	switch {
	case !ok && !wrong:
		if bit == 1 {
			return IntReply(-1)
		}
		return replyZero
	case wrong:
		return replyWrongType
	}
	if r, deferred := deferredError(c); deferred {
		return r
	}
	return IntReply(bitPos(it.val, bit, c))
}

// bitPos follows Redis 7.0's bitposCommand step by step: the first byte
// and the last one are searched through their masks, the bytes between
// directly.
func bitPos(p []byte, bit byte, c *Command) int64 {
	inBits := c.Flags&FlagBitUnit != 0
	endGiven := c.Flags&FlagBitEnd != 0
	n := int64(len(p))
	start, end := int64(0), n-1
	var firstMask, lastMask byte
	if c.Flags&FlagBitRange != 0 {
		e := c.Int2
		if !endGiven {
			e = n - 1
			if inBits {
				e = n<<3 + 7
			}
		}
		start, end, firstMask, lastMask = bitRange(n, c.Int, e, inBits)
	}
	if start > end {
		return -1
	}
	masked := func(x, mask byte) byte {
		if bit == 1 {
			return x &^ mask
		}
		return x | mask
	}
	bytes := end - start + 1
	var pos int64
	done := func() int64 {
		if endGiven && bit == 0 && pos == bytes<<3 {
			return -1
		}
		if pos != -1 {
			pos += start << 3
		}
		return pos
	}
	if firstMask != 0 {
		tmp := masked(p[start], firstMask)
		if lastMask != 0 && bytes == 1 {
			tmp = masked(tmp, lastMask)
		}
		pos = firstBit([]byte{tmp}, bit)
		if bytes == 1 || (pos != -1 && pos != 8) {
			return done()
		}
		start++
		bytes--
	}
	cur := bytes
	if lastMask != 0 {
		cur--
	}
	if cur > 0 {
		pos = firstBit(p[start:start+cur], bit)
		if bytes == cur || (pos != -1 && pos != cur<<3) {
			return done()
		}
		start += cur
		bytes -= cur
	}
	pos = firstBit([]byte{masked(p[end], lastMask)}, bit)
	return done()
}

func applyBitOp(s *Store, now int64, c *Command) Reply {
	dst, srcs := c.Args[0], c.Args[1:]
	vals := make([][]byte, len(srcs))
	maxLen := 0
	for i, k := range srcs {
		it, _, wrong := s.stringForBitsLocked(now, k)
		if wrong {
			return replyWrongType
		}
		vals[i] = it.val
		maxLen = max(maxLen, len(it.val))
	}
	if maxLen == 0 {
		s.deleteLocked(dst)
		return replyZero
	}
	res := bitOp(int(c.Int), vals, maxLen)
	// The destination is set as SET sets it: any TTL goes.
	it := newItem(dst, nil, 0)
	it.val, it.enc = res, encRaw
	s.putLocked(it)
	return IntReply(int64(maxLen))
}

// bitOp computes BITOP's result of length n: shorter strings count as zero
// padded. It works eight bytes at a time.
func bitOp(op int, vals [][]byte, n int) []byte {
	res := make([]byte, n)
	copy(res, vals[0])
	if op == BitOpNot {
		for j := range res {
			res[j] = ^res[j]
		}
		return res
	}
	for _, v := range vals[1:] {
		if op == BitOpAnd {
			clear(res[len(v):])
		}
		m := min(len(v), n)
		j := 0
		for ; j+8 <= m; j += 8 {
			a, b := binary.LittleEndian.Uint64(res[j:]), binary.LittleEndian.Uint64(v[j:])
			switch op {
			case BitOpAnd:
				a &= b
			case BitOpOr:
				a |= b
			default:
				a ^= b
			}
			binary.LittleEndian.PutUint64(res[j:], a)
		}
		for ; j < m; j++ {
			switch op {
			case BitOpAnd:
				res[j] &= v[j]
			case BitOpOr:
				res[j] |= v[j]
			default:
				res[j] ^= v[j]
			}
		}
	}
	return res
}

// BITFIELD subcommands. Each travels as 20 bytes: opcode, overflow,
// signed, width, then offset and value, big-endian.
const (
	bfGet = iota
	bfSet
	bfIncrBy
)

// Overflow policies of BITFIELD.
const (
	BitFieldWrap = iota
	BitFieldSat
	BitFieldFail
)

// BitFieldOp is one BITFIELD subcommand.
type BitFieldOp struct {
	Write    bool  // SET (or INCRBY with Incr); else GET
	Incr     bool  // INCRBY
	Overflow int   // BitFieldWrap, BitFieldSat or BitFieldFail
	Signed   bool  // iN, else uN
	Bits     int   // 1..64 signed, 1..63 unsigned
	Offset   int64 // in bits, >= 0
	Value    int64 // SET's value or INCRBY's increment
}

const bitFieldOpLen = 20

// EncodeBitFieldOp returns op as an argument of OpBitField.
func EncodeBitFieldOp(op BitFieldOp) []byte {
	b := make([]byte, 4, bitFieldOpLen)
	switch {
	case op.Incr:
		b[0] = bfIncrBy
	case op.Write:
		b[0] = bfSet
	}
	b[1] = byte(op.Overflow)
	if op.Signed {
		b[2] = 1
	}
	b[3] = byte(op.Bits)
	b = binary.BigEndian.AppendUint64(b, uint64(op.Offset))
	return binary.BigEndian.AppendUint64(b, uint64(op.Value))
}

func decodeBitFieldOp(b []byte) (BitFieldOp, bool) {
	if len(b) != bitFieldOpLen || b[0] > bfIncrBy || b[1] > BitFieldFail || b[2] > 1 {
		return BitFieldOp{}, false
	}
	op := BitFieldOp{
		Write: b[0] != bfGet, Incr: b[0] == bfIncrBy, Overflow: int(b[1]), Signed: b[2] == 1, Bits: int(b[3]),
		Offset: int64(binary.BigEndian.Uint64(b[4:])), Value: int64(binary.BigEndian.Uint64(b[12:])),
	}
	maxBits := 63
	if op.Signed {
		maxBits = 64
	}
	if op.Bits < 1 || op.Bits > maxBits || op.Offset < 0 || op.Offset > MaxBitOffset-64 {
		return BitFieldOp{}, false
	}
	return op, true
}

// checkBitField validates the subcommands: OpBitFieldRO holds only GETs,
// OpBitField at least one write.
func checkBitField(c *Command) error {
	writes := 0
	for _, a := range c.Args[1:] {
		op, ok := decodeBitFieldOp(a)
		if !ok {
			return errorString("bad BITFIELD subcommand")
		}
		if op.Write {
			writes++
		}
	}
	switch {
	case c.Op == OpBitFieldRO && writes > 0:
		return errorString("BITFIELD_RO with a write")
	case c.Op == OpBitField && writes == 0:
		return errorString("BITFIELD without a write")
	}
	return nil
}

func applyBitField(s *Store, now int64, c *Command) Reply {
	key := c.Args[0]
	old, ok, wrong := s.stringForBitsLocked(now, key)
	if wrong {
		return replyWrongType
	}
	ops := make([]BitFieldOp, len(c.Args)-1)
	highest := int64(0)
	from := math.MaxInt
	writes := false
	for i, a := range c.Args[1:] {
		ops[i], _ = decodeBitFieldOp(a)
		if ops[i].Write {
			highest = max(highest, ops[i].Offset+int64(ops[i].Bits)-1)
			from = min(from, int(ops[i].Offset>>3))
			writes = true
		}
	}
	// Redis counts a change for each write that changed its field, or
	// every write when the string was created or grown.
	grew := writes && (!ok || len(old.val) < int(highest>>3)+1)
	changes := int64(0)
	// Like Redis, make room up to the farthest bit written before any
	// subcommand runs, even when OVERFLOW FAIL then refuses them all.
	buf := bitsBuffer(old.val, int(highest>>3)+1, from)
	out := make([]Reply, len(ops))
	for i, op := range ops {
		if !op.Write {
			out[i] = IntReply(getBitField(buf, op))
			continue
		}
		var oldv int64
		if op.Signed {
			oldv = getSignedBits(buf, uint64(op.Offset), op.Bits)
		} else {
			oldv = int64(getUnsignedBits(buf, uint64(op.Offset), op.Bits))
		}
		newv, overflow := bitFieldResult(op, oldv)
		if overflow && op.Overflow == BitFieldFail {
			out[i] = replyNil
			continue
		}
		setBits(buf, uint64(op.Offset), op.Bits, uint64(newv))
		if grew || newv != oldv {
			changes++
		}
		if op.Incr {
			out[i] = IntReply(newv)
		} else {
			out[i] = IntReply(oldv)
		}
	}
	s.putBitsLocked(key, old, ok, buf)
	s.reportDirtyLocked(changes)
	return Reply{Kind: ReplyArray, Array: out}
}

// bitFieldResult is the value a SET or INCRBY stores, and whether it
// overflowed (in which case the value is wrapped or saturated).
func bitFieldResult(op BitFieldOp, oldv int64) (int64, bool) {
	if op.Signed {
		v, incr := op.Value, int64(0)
		if op.Incr {
			v, incr = oldv, op.Value
		}
		limit, over := checkSignedOverflow(v, incr, op.Bits, op.Overflow)
		if over {
			return limit, true
		}
		return v + incr, false
	}
	v, incr := uint64(op.Value), int64(0)
	if op.Incr {
		v, incr = uint64(oldv), op.Value
	}
	limit, over := checkUnsignedOverflow(v, incr, op.Bits, op.Overflow)
	if over {
		return int64(limit), true
	}
	return int64(v + uint64(incr)), false
}

// checkUnsignedOverflow is Redis's checkUnsignedBitfieldOverflow: whether
// value+incr leaves the range of a bits-wide unsigned integer, and then
// the value to store (wrapped or saturated).
func checkUnsignedOverflow(value uint64, incr int64, width int, policy int) (uint64, bool) {
	maxv := uint64(1)<<uint(width) - 1
	maxincr := int64(maxv - value)
	minincr := -int64(value)
	wrap := func() (uint64, bool) {
		return (value + uint64(incr)) & maxv, true
	}
	if value > maxv || (incr > 0 && incr > maxincr) {
		if policy == BitFieldWrap {
			return wrap()
		}
		return maxv, true
	}
	if incr < 0 && incr < minincr {
		if policy == BitFieldWrap {
			return wrap()
		}
		return 0, true
	}
	return 0, false
}

// checkSignedOverflow is Redis's checkSignedBitfieldOverflow.
func checkSignedOverflow(value, incr int64, width int, policy int) (int64, bool) {
	maxv := int64(math.MaxInt64)
	if width != 64 {
		maxv = 1<<uint(width-1) - 1
	}
	minv := -maxv - 1
	maxincr := int64(uint64(maxv) - uint64(value))
	minincr := minv - value
	wrap := func() (int64, bool) {
		c := uint64(value) + uint64(incr)
		if width < 64 {
			mask := ^uint64(0) << uint(width)
			if c&(1<<uint(width-1)) != 0 {
				c |= mask
			} else {
				c &^= mask
			}
		}
		return int64(c), true
	}
	if value > maxv || (width != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
		if policy == BitFieldWrap {
			return wrap()
		}
		return maxv, true
	}
	if value < minv || (width != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
		if policy == BitFieldWrap {
			return wrap()
		}
		return minv, true
	}
	return 0, false
}

func getUnsignedBits(p []byte, offset uint64, width int) uint64 {
	var v uint64
	for j := 0; j < width; j++ {
		b := p[offset>>3] >> (7 - offset&7) & 1
		v = v<<1 | uint64(b)
		offset++
	}
	return v
}

func getSignedBits(p []byte, offset uint64, width int) int64 {
	v := getUnsignedBits(p, offset, width)
	if width < 64 && v&(1<<uint(width-1)) != 0 {
		v |= ^uint64(0) << uint(width)
	}
	return int64(v)
}

func setBits(p []byte, offset uint64, width int, v uint64) {
	for j := 0; j < width; j++ {
		bit := byte(v >> uint(width-1-j) & 1)
		shift := 7 - offset&7
		p[offset>>3] = p[offset>>3]&^(1<<shift) | bit<<shift
		offset++
	}
}

// getBitField reads a GET subcommand from a string that may be shorter
// than the field: the string is zero padded.
func getBitField(v []byte, op BitFieldOp) int64 {
	var buf [9]byte
	byteIdx := op.Offset >> 3
	if byteIdx < int64(len(v)) {
		copy(buf[:], v[byteIdx:])
	}
	off := uint64(op.Offset - byteIdx*8)
	if op.Signed {
		return getSignedBits(buf[:], off, op.Bits)
	}
	return int64(getUnsignedBits(buf[:], off, op.Bits))
}

func readBitField(s *Store, now int64, c *Command) Reply {
	it, _, wrong := s.stringForBitsLocked(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	out := make([]Reply, len(c.Args)-1)
	for i, a := range c.Args[1:] {
		op, _ := decodeBitFieldOp(a)
		out[i] = IntReply(getBitField(it.val, op))
	}
	return Reply{Kind: ReplyArray, Array: out}
}

func readLCS(s *Store, now int64, c *Command) Reply {
	a, _, wrongA := s.stringForBitsLocked(now, c.Args[0])
	b, _, wrongB := s.stringForBitsLocked(now, c.Args[1])
	if wrongA || wrongB {
		return ErrorReply(ErrLCSWrongType)
	}
	if r, deferred := deferredError(c); deferred {
		return r
	}
	return lcs(a.val, b.val, c)
}

// lcs is Redis 7.0's lcsCommand after its argument checks: the dynamic
// programming table, then a walk back from its end that collects the
// common subsequence and, for IDX, the matching ranges from last to first.
func lcs(a, b []byte, c *Command) Reply {
	if len(a) >= math.MaxUint32-1 || len(b) >= math.MaxUint32-1 {
		return ErrorReply(ErrLCSTooLong)
	}
	alen, blen := len(a), len(b)
	cells := uint64(alen+1) * uint64(blen+1)
	if cells*4 > uint64(c.Int2) {
		return ErrorReply(ErrLCSMemoryLimit)
	}
	table := make([]uint32, cells)
	at := func(i, j int) uint32 { return table[j+i*(blen+1)] }
	for i := 1; i <= alen; i++ {
		for j := 1; j <= blen; j++ {
			v := max(at(i-1, j), at(i, j-1))
			if a[i-1] == b[j-1] {
				v = at(i-1, j-1) + 1
			}
			table[j+i*(blen+1)] = v
		}
	}
	getIdx := c.Flags&FlagLCSIdx != 0
	getLen := c.Flags&FlagLCSLen != 0
	withLen := c.Flags&FlagLCSWithMatchLen != 0
	minLen := uint32(min(max(c.Int, 0), math.MaxUint32))
	total := at(alen, blen)
	if getLen && !getIdx {
		return IntReply(int64(total))
	}
	idx := total
	result := make([]byte, idx)
	matches := []Reply{}
	unset := uint32(alen)
	aStart, aEnd, bStart, bEnd := unset, uint32(0), uint32(0), uint32(0)
	for i, j := alen, blen; i > 0 && j > 0; {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			if aStart == unset {
				aStart, aEnd = uint32(i-1), uint32(i-1)
				bStart, bEnd = uint32(j-1), uint32(j-1)
			} else if aStart == uint32(i) && bStart == uint32(j) {
				aStart--
				bStart--
			} else {
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if at(i-1, j) > at(i, j-1) {
				i--
			} else {
				j--
			}
			if aStart != unset {
				emit = true
			}
		}
		matchLen := aEnd - aStart + 1
		if emit {
			if getIdx && (minLen == 0 || matchLen >= minLen) {
				m := []Reply{
					{Kind: ReplyArray, Array: []Reply{IntReply(int64(aStart)), IntReply(int64(aEnd))}},
					{Kind: ReplyArray, Array: []Reply{IntReply(int64(bStart)), IntReply(int64(bEnd))}},
				}
				if withLen {
					m = append(m, IntReply(int64(matchLen)))
				}
				matches = append(matches, Reply{Kind: ReplyArray, Array: m})
			}
			aStart = unset
		}
	}
	if getIdx {
		return Reply{Kind: ReplyMap, Array: []Reply{
			BulkReply([]byte("matches")), {Kind: ReplyArray, Array: matches},
			BulkReply([]byte("len")), IntReply(int64(total)),
		}}
	}
	return BulkReply(result)
}
