package fsm

import (
	"encoding/binary"
	"strconv"
)

// Redis's flat encodings, as DUMP payloads carry them: listpack (Redis
// 7.0's small hashes, sorted sets and quicklist nodes, listpack.c),
// intset (intset.c) and, read only, the ziplist of earlier versions
// (ziplist.c). kvs never keeps these bytes: DUMP builds them from its own
// forms and RESTORE decodes them into its own, validating them first as
// Redis does with sanitize-dump-payload yes (every entry walked, lengths,
// back lengths and counts checked), whatever the setting, so that no
// payload can put a value kvs cannot hold into the store.
//
//	listpack = total:uint32le count:uint16le entry* 0xFF
//	entry    = encoding [data] backlen
//	intset   = width:uint32le (2, 4 or 8) count:uint32le value* (ascending)
//	ziplist  = total:uint32le tail:uint32le count:uint16le zentry* 0xFF
//	zentry   = prevlen encoding [data]

const (
	lpHeaderSize    = 6
	lpEOF           = 0xFF
	lpNumeleUnknown = 65535
	// lpLongStrSize is Redis's LONG_STR_SIZE: a string of this many bytes
	// or more is never an integer entry.
	lpLongStrSize = 21
)

// lpStringToInt64 is listpack.c's: s as an int64 if it is the canonical
// decimal form of one (no sign but a leading '-', no leading zeros).
func lpStringToInt64(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) >= lpLongStrSize {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	neg := s[0] == '-'
	p := s
	if neg {
		p = s[1:]
	}
	if len(p) == 0 || p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<64-1)/10 {
			return 0, false
		}
		v *= 10
		if v > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		v += uint64(c - '0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// lpBacklenSize is the size of the back length of an entry of l bytes.
func lpBacklenSize(l int) int {
	switch {
	case l <= 127:
		return 1
	case l < 16383:
		return 2
	case l < 2097151:
		return 3
	case l < 268435455:
		return 4
	}
	return 5
}

// appendLPBacklen appends lpEncodeBacklen's bytes for l.
func appendLPBacklen(b []byte, l int) []byte {
	n := lpBacklenSize(l)
	for i := n - 1; i >= 0; i-- {
		c := byte(l>>(7*i)) & 127
		if i != n-1 {
			c |= 128
		}
		b = append(b, c)
	}
	return b
}

// appendLPInt appends v's entry, in the smallest integer encoding.
func appendLPInt(b []byte, v int64) []byte {
	start := len(b)
	switch {
	case v >= 0 && v <= 127:
		b = append(b, byte(v))
	case v >= -4096 && v <= 4095:
		u := uint64(v) & (1<<13 - 1)
		b = append(b, byte(u>>8)|0xC0, byte(u))
	case v >= -32768 && v <= 32767:
		b = append(b, 0xF1, byte(v), byte(v>>8))
	case v >= -8388608 && v <= 8388607:
		b = append(b, 0xF2, byte(v), byte(v>>8), byte(v>>16))
	case v >= -2147483648 && v <= 2147483647:
		b = append(b, 0xF3)
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	default:
		b = append(b, 0xF4)
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return appendLPBacklen(b, len(b)-start)
}

// appendLPEntry appends s's entry as lpAppend writes it: an integer when
// s is one, else a string.
func appendLPEntry(b []byte, s []byte) []byte {
	if v, ok := lpStringToInt64(s); ok {
		return appendLPInt(b, v)
	}
	start := len(b)
	switch n := len(s); {
	case n < 64:
		b = append(b, 0x80|byte(n))
	case n < 4096:
		b = append(b, 0xE0|byte(n>>8), byte(n))
	default:
		b = append(b, 0xF0)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	b = append(b, s...)
	return appendLPBacklen(b, len(b)-start)
}

// lpEntrySize is the size appendLPEntry gives s.
func lpEntrySize(s []byte) int {
	var n int
	if v, ok := lpStringToInt64(s); ok {
		switch {
		case v >= 0 && v <= 127:
			n = 1
		case v >= -4096 && v <= 4095:
			n = 2
		case v >= -32768 && v <= 32767:
			n = 3
		case v >= -8388608 && v <= 8388607:
			n = 4
		case v >= -2147483648 && v <= 2147483647:
			n = 5
		default:
			n = 9
		}
	} else {
		switch l := len(s); {
		case l < 64:
			n = 1 + l
		case l < 4096:
			n = 2 + l
		default:
			n = 5 + l
		}
	}
	return n + lpBacklenSize(n)
}

// lpBuilder builds a listpack entry by entry.
type lpBuilder struct {
	b []byte
	n int
}

func newLPBuilder() *lpBuilder { return &lpBuilder{b: make([]byte, lpHeaderSize, 64)} }

func (l *lpBuilder) add(s []byte) { l.b = appendLPEntry(l.b, s); l.n++ }

func (l *lpBuilder) addInt(v int64) { l.b = appendLPInt(l.b, v); l.n++ }

// bytes is the listpack's size once finished.
func (l *lpBuilder) bytes() int { return len(l.b) + 1 }

func (l *lpBuilder) finish() []byte {
	b := append(l.b, lpEOF)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	binary.LittleEndian.PutUint16(b[4:], uint16(min(l.n, lpNumeleUnknown)))
	return b
}

// lpEntries validates a listpack as lpValidateIntegrity does with deep
// validation and returns its entries (integers as their decimal text).
func lpEntries(lp []byte) ([][]byte, bool) {
	if len(lp) < lpHeaderSize+1 || int(binary.LittleEndian.Uint32(lp)) != len(lp) || lp[len(lp)-1] != lpEOF {
		return nil, false
	}
	numele := int(binary.LittleEndian.Uint16(lp[4:]))
	var out [][]byte
	p := lpHeaderSize
	last := len(lp) - 1 // the EOF byte
	for p < last {
		e, size, ok := lpDecodeEntry(lp[p:last])
		if !ok {
			return nil, false
		}
		bl := lpBacklenSize(size)
		if p+size+bl > last || lpBacklenBefore(lp, p+size+bl) != uint64(size) {
			return nil, false
		}
		out = append(out, e)
		p += size + bl
	}
	if p != last || numele != lpNumeleUnknown && numele != len(out) {
		return nil, false
	}
	return out, true
}

// lpBacklenBefore is lpDecodeBacklen: the back length that ends at
// lp[end], read backwards (at most 5 bytes; more is invalid).
func lpBacklenBefore(lp []byte, end int) uint64 {
	var v uint64
	for i := range 5 {
		c := lp[end-1-i]
		v |= uint64(c&127) << (7 * i)
		if c&128 == 0 {
			return v
		}
	}
	return 1<<64 - 1
}

// lpDecodeEntry decodes the entry at the start of p (which ends before
// the listpack's EOF byte): its value and its size without the back
// length.
func lpDecodeEntry(p []byte) (v []byte, size int, ok bool) {
	if len(p) == 0 {
		return nil, 0, false
	}
	c := p[0]
	signed := func(u uint64, bits uint) []byte {
		if u >= 1<<(bits-1) {
			return strconv.AppendInt(nil, int64(u)-int64(1)<<bits, 10)
		}
		return strconv.AppendInt(nil, int64(u), 10)
	}
	str := func(hdr, n int) ([]byte, int, bool) {
		if hdr+n > len(p) || n < 0 {
			return nil, 0, false
		}
		return append([]byte{}, p[hdr:hdr+n]...), hdr + n, true
	}
	switch {
	case c&0x80 == 0:
		return strconv.AppendInt(nil, int64(c&0x7f), 10), 1, true
	case c&0xC0 == 0x80:
		return str(1, int(c&0x3f))
	case c&0xE0 == 0xC0:
		if len(p) < 2 {
			return nil, 0, false
		}
		return signed(uint64(c&0x1f)<<8|uint64(p[1]), 13), 2, true
	case c&0xF0 == 0xE0:
		if len(p) < 2 {
			return nil, 0, false
		}
		return str(2, int(c&0x0f)<<8|int(p[1]))
	case c == 0xF0:
		if len(p) < 5 {
			return nil, 0, false
		}
		n := binary.LittleEndian.Uint32(p[1:])
		if n > MaxStringLen {
			return nil, 0, false
		}
		return str(5, int(n))
	case c >= 0xF1 && c <= 0xF4:
		w := [...]int{2, 3, 4, 8}[c-0xF1]
		if len(p) < 1+w {
			return nil, 0, false
		}
		var u uint64
		for i := w; i >= 1; i-- {
			u = u<<8 | uint64(p[i])
		}
		if w == 8 {
			return strconv.AppendInt(nil, int64(u), 10), 9, true
		}
		return signed(u, uint(8*w)), 1 + w, true
	}
	return nil, 0, false
}

// appendIntset appends the intset of vs, which are ascending, in the
// smallest width that holds them all.
func appendIntset(b []byte, vs []int64) []byte {
	width := 2
	for _, v := range vs {
		switch {
		case v < -1<<31 || v > 1<<31-1:
			width = 8
		case (v < -1<<15 || v > 1<<15-1) && width < 4:
			width = 4
		}
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(width))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(vs)))
	for _, v := range vs {
		switch width {
		case 2:
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		case 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		default:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

// intsetMembers validates an intset as intsetValidateIntegrity does with
// deep validation (not empty, ascending, no duplicates) and returns its
// members as decimal text.
func intsetMembers(p []byte) ([][]byte, bool) {
	if len(p) < 8 {
		return nil, false
	}
	width := binary.LittleEndian.Uint32(p)
	count := uint64(binary.LittleEndian.Uint32(p[4:]))
	if width != 2 && width != 4 && width != 8 || 8+count*uint64(width) != uint64(len(p)) || count == 0 {
		return nil, false
	}
	out := make([][]byte, 0, count)
	var prev int64
	for i := range int(count) {
		q := p[8+i*int(width):]
		var v int64
		switch width {
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(q)))
		case 4:
			v = int64(int32(binary.LittleEndian.Uint32(q)))
		default:
			v = int64(binary.LittleEndian.Uint64(q))
		}
		if i > 0 && v <= prev {
			return nil, false
		}
		prev = v
		out = append(out, strconv.AppendInt(nil, v, 10))
	}
	return out, true
}

// ziplistEntries validates a ziplist as ziplistValidateIntegrity does
// with deep validation (header, every entry's previous length and
// encoding, the tail offset, the count unless it saturated) and returns
// its entries.
func ziplistEntries(z []byte) ([][]byte, bool) {
	const header = 10
	if len(z) < header+1 || int(binary.LittleEndian.Uint32(z)) != len(z) || z[len(z)-1] != 0xFF {
		return nil, false
	}
	tail := int(binary.LittleEndian.Uint32(z[4:]))
	count := int(binary.LittleEndian.Uint16(z[8:]))
	var out [][]byte
	p, prevSize, lastAt := header, 0, header
	end := len(z) - 1
	for p < end {
		start := p
		// The previous entry's length: 1 byte, or 0xFE and 4 bytes.
		var prevlen int
		if z[p] < 0xFE {
			prevlen = int(z[p])
			p++
		} else if z[p] == 0xFE && p+5 <= end {
			prevlen = int(binary.LittleEndian.Uint32(z[p+1:]))
			p += 5
		} else {
			return nil, false
		}
		if prevlen != prevSize {
			return nil, false
		}
		v, n, ok := ziplistDecode(z[p:end])
		if !ok {
			return nil, false
		}
		p += n
		out = append(out, v)
		prevSize, lastAt = p-start, start
	}
	if p != end || lastAt != tail || count != 0xFFFF && count != len(out) {
		return nil, false
	}
	return out, true
}

// ziplistDecode decodes the encoding and data of a ziplist entry at the
// start of p: the value and how many bytes it took.
func ziplistDecode(p []byte) ([]byte, int, bool) {
	if len(p) == 0 {
		return nil, 0, false
	}
	c := p[0]
	str := func(hdr, n int) ([]byte, int, bool) {
		if n < 0 || hdr+n > len(p) {
			return nil, 0, false
		}
		return append([]byte{}, p[hdr:hdr+n]...), hdr + n, true
	}
	intOf := func(w int) ([]byte, int, bool) {
		if 1+w > len(p) {
			return nil, 0, false
		}
		var u uint64
		for i := w; i >= 1; i-- {
			u = u<<8 | uint64(p[i])
		}
		v := int64(u<<(64-8*w)) >> (64 - 8*w) // sign-extended
		return strconv.AppendInt(nil, v, 10), 1 + w, true
	}
	switch {
	case c>>6 == 0:
		return str(1, int(c&0x3f))
	case c>>6 == 1:
		if len(p) < 2 {
			return nil, 0, false
		}
		return str(2, int(c&0x3f)<<8|int(p[1]))
	case c == 0x80:
		if len(p) < 5 {
			return nil, 0, false
		}
		n := binary.BigEndian.Uint32(p[1:])
		if n > MaxStringLen {
			return nil, 0, false
		}
		return str(5, int(n))
	case c == 0xC0:
		return intOf(2)
	case c == 0xD0:
		return intOf(4)
	case c == 0xE0:
		return intOf(8)
	case c == 0xF0:
		return intOf(3)
	case c == 0xFE:
		return intOf(1)
	case c >= 0xF1 && c <= 0xFD:
		return strconv.AppendInt(nil, int64(c&0x0f)-1, 10), 1, true
	}
	return nil, 0, false
}

// zipmapPairs validates a zipmap, Redis 2.4's small hash, as
// zipmapValidateIntegrity does with deep validation, and returns its
// fields and values in turn:
//
//	zipmap = count:byte (len field len free:byte value free-bytes)* 0xFF
//	len    = byte (< 254) | 254 uint32le
func zipmapPairs(zm []byte) ([][]byte, bool) {
	const bigLen, end = 254, 0xFF
	if len(zm) < 2 || zm[len(zm)-1] != end {
		return nil, false
	}
	last := len(zm) - 1
	// length reads the length at p, or fails if it reaches past the map
	// or takes 5 bytes for a length under 254 (the check of the fix for
	// CVE-2026-25243, which Debian's redis-server 7.0.15 has).
	length := func(p int) (n, size int, ok bool) {
		if zm[p] < bigLen {
			return int(zm[p]), 1, p+1 <= last
		}
		if p+5 > last {
			return 0, 0, false
		}
		n = int(binary.LittleEndian.Uint32(zm[p+1:]))
		return n, 5, n >= bigLen
	}
	var out [][]byte
	p := 1
	for zm[p] != end {
		l, s, ok := length(p)
		if !ok || p+s+l > last {
			return nil, false
		}
		f := zm[p+s : p+s+l]
		p += s + l
		if l, s, ok = length(p); !ok || p+s >= last {
			return nil, false
		}
		free := int(zm[p+s])
		v := zm[p+s+1 : min(p+s+1+l, last)]
		p += s + 1 + l + free
		if p > last || len(v) != l {
			return nil, false
		}
		out = append(out, append([]byte{}, f...), append([]byte{}, v...))
	}
	n := len(out) / 2
	if n == 0 || zm[0] != bigLen && int(zm[0]) != n {
		return nil, false
	}
	return out, true
}
