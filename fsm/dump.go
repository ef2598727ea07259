package fsm

import (
	"encoding/binary"
	"hash/crc64"
	"strconv"
)

// Redis's DUMP payload format, which FUNCTION DUMP writes and FUNCTION
// RESTORE reads (Redis's rdb.c and cluster.c, createDumpPayload and
// verifyDumpPayload):
//
//	payload = body version:uint16le crc:uint64le
//	crc     = CRC-64 (Jones polynomial, reflected, no final xor) of
//	          body and version
//	body    = (opcode string)*              for functions:
//	          opcode 245 (RDB_OPCODE_FUNCTION2), the library's code
//
// A string is a length (6, 14, 32 or 64 bits, see appendRDBLen) and its
// bytes, or an encoded value: an integer of 8, 16 or 32 bits, or LZF
// compressed bytes (their length, the plain length, the compressed
// bytes). Redis compresses a string longer than 20 bytes when that saves
// at least 4 (rdbcompression is on by default), and so does kvs.

// rdbVersion is Redis 7.0's RDB_VERSION: payloads of a later version are
// refused.
const rdbVersion = 10

// Opcodes of function payloads: a library's code (Redis 7.0), or its
// name, engine, description and code (7.0's release candidates).
const (
	rdbOpcodeFunction2 = 245
	rdbOpcodeFunction  = 246
)

// Length encodings (RDB_6BITLEN ...) and the string encodings after
// RDB_ENCVAL (RDB_ENC_INT8 ...).
const (
	rdb6BitLen  = 0
	rdb14BitLen = 1
	rdb32BitLen = 0x80
	rdb64BitLen = 0x81
	rdbEncVal   = 3
	rdbEncInt8  = 0
	rdbEncInt16 = 1
	rdbEncInt32 = 2
	rdbEncLZF   = 3
)

// jonesTable is the CRC-64 Redis's crc64.c computes (the Jones polynomial,
// reflected), from Go's table-driven CRC-64.
var jonesTable = crc64.MakeTable(0x95ac9329ac4bc9b5)

// crc64Jones is Redis's crc64(0, b). Go's crc64 inverts the register
// before and after; Redis's does neither, which inverting both undoes.
func crc64Jones(b []byte) uint64 { return ^crc64.Update(^uint64(0), jonesTable, b) }

// appendDumpFooter ends a payload: the RDB version and the checksum.
func appendDumpFooter(b []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, rdbVersion)
	return binary.LittleEndian.AppendUint64(b, crc64Jones(b))
}

// VerifyDumpPayload reports whether p ends with a version kvs reads and
// its checksum, as Redis's verifyDumpPayload checks before reading.
func VerifyDumpPayload(p []byte) bool {
	if len(p) < 10 {
		return false
	}
	footer := p[len(p)-10:]
	if binary.LittleEndian.Uint16(footer) > rdbVersion {
		return false
	}
	return binary.LittleEndian.Uint64(footer[2:]) == crc64Jones(p[:len(p)-8])
}

// appendRDBLen appends n as rdbSaveLen does.
func appendRDBLen(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n)|rdb6BitLen<<6)
	case n < 1<<14:
		return append(b, byte(n>>8)|rdb14BitLen<<6, byte(n))
	case n <= 1<<32-1:
		return binary.BigEndian.AppendUint32(append(b, rdb32BitLen), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, rdb64BitLen), n)
}

// appendRDBString appends s as rdbSaveRawString does with rdbcompression
// on: an integer if it is one in 11 bytes or fewer, LZF compressed if it
// is longer than 20 bytes and compresses by more than 4, else as it is.
func appendRDBString(b []byte, s []byte) []byte {
	if len(s) <= 11 {
		if v, err := strconv.ParseInt(string(s), 10, 32); err == nil && strconv.FormatInt(v, 10) == string(s) {
			switch {
			case v >= -(1<<7) && v <= 1<<7-1:
				return append(b, rdbEncVal<<6|rdbEncInt8, byte(v))
			case v >= -(1<<15) && v <= 1<<15-1:
				return binary.LittleEndian.AppendUint16(append(b, rdbEncVal<<6|rdbEncInt16), uint16(v))
			default:
				return binary.LittleEndian.AppendUint32(append(b, rdbEncVal<<6|rdbEncInt32), uint32(v))
			}
		}
	}
	if len(s) > 20 {
		if c := lzfCompress(s, len(s)-4); c != nil {
			b = append(b, rdbEncVal<<6|rdbEncLZF)
			b = appendRDBLen(b, uint64(len(c)))
			b = appendRDBLen(b, uint64(len(s)))
			return append(b, c...)
		}
	}
	return append(appendRDBLen(b, uint64(len(s))), s...)
}

// rdbReader reads a payload as Redis's rio over a buffer does.
type rdbReader struct {
	b   []byte
	pos int
}

func (r *rdbReader) read(n uint64) ([]byte, bool) {
	if n > uint64(len(r.b)-r.pos) {
		return nil, false
	}
	p := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return p, true
}

// readLen is rdbLoadLenByRef: a length, or with encoded the kind of an
// encoded string.
func (r *rdbReader) readLen() (n uint64, encoded, ok bool) {
	p, ok := r.read(1)
	if !ok {
		return 0, false, false
	}
	switch kind := p[0] >> 6; {
	case kind == rdbEncVal:
		return uint64(p[0] & 0x3f), true, true
	case kind == rdb6BitLen:
		return uint64(p[0] & 0x3f), false, true
	case kind == rdb14BitLen:
		q, ok := r.read(1)
		if !ok {
			return 0, false, false
		}
		return uint64(p[0]&0x3f)<<8 | uint64(q[0]), false, true
	case p[0] == rdb32BitLen:
		q, ok := r.read(4)
		if !ok {
			return 0, false, false
		}
		return uint64(binary.BigEndian.Uint32(q)), false, true
	case p[0] == rdb64BitLen:
		q, ok := r.read(8)
		if !ok {
			return 0, false, false
		}
		return binary.BigEndian.Uint64(q), false, true
	}
	return 0, false, false
}

// readString is rdbGenericLoadStringObject.
func (r *rdbReader) readString() ([]byte, bool) {
	n, encoded, ok := r.readLen()
	if !ok {
		return nil, false
	}
	if !encoded {
		p, ok := r.read(n)
		return append([]byte{}, p...), ok
	}
	switch n {
	case rdbEncInt8:
		p, ok := r.read(1)
		if !ok {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(int8(p[0])), 10), true
	case rdbEncInt16:
		p, ok := r.read(2)
		if !ok {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(int16(binary.LittleEndian.Uint16(p))), 10), true
	case rdbEncInt32:
		p, ok := r.read(4)
		if !ok {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(p))), 10), true
	case rdbEncLZF:
		clen, _, ok1 := r.readLen()
		plen, _, ok2 := r.readLen()
		if !ok1 || !ok2 {
			return nil, false
		}
		c, ok := r.read(clen)
		if !ok || plen == 0 || plen > MaxStringLen {
			return nil, false
		}
		return lzfDecompress(c, int(plen))
	}
	return nil, false
}

// LZF, as Redis's lzf_c.c and lzf_d.c (liblzf 3.6, with Redis's settings:
// HLOG 16, VERY_FAST). Redis's compressor does not clear its hash table
// between calls (INIT_HTAB 0), so what it left there may, rarely, find a
// match this one does not; both outputs decompress to the same bytes.

const (
	lzfHLog   = 16
	lzfHSize  = 1 << lzfHLog
	lzfMaxLit = 1 << 5
	lzfMaxOff = 1 << 13
	lzfMaxRef = 1<<8 + 1<<3
)

func lzfIdx(h uint32) uint32 { return ((h >> (3*8 - lzfHLog)) - h*5) & (lzfHSize - 1) }

// lzfCompress compresses in into at most outLen bytes, or returns nil if
// it does not fit.
func lzfCompress(in []byte, outLen int) []byte {
	n := len(in)
	if n == 0 || outLen <= 0 {
		return nil
	}
	if n < 3 {
		return nil // nothing to match; Redis compresses only longer strings
	}
	var htab [lzfHSize]int32 // position+1 of the last 3 bytes with a hash; 0: none
	out := make([]byte, outLen)
	op, ip, lit := 1, 0, 0 // op starts past the first run's length byte
	frst := func(p int) uint32 { return uint32(in[p])<<8 | uint32(in[p+1]) }
	next := func(v uint32, p int) uint32 { return v<<8 | uint32(in[p+2]) }
	hval := frst(ip)
	for ip < n-2 {
		hval = next(hval, ip)
		slot := lzfIdx(hval)
		ref := int(htab[slot]) - 1
		htab[slot] = int32(ip + 1)
		off := ip - ref - 1
		if ref > 0 && off < lzfMaxOff && in[ref+2] == in[ip+2] && in[ref] == in[ip] && in[ref+1] == in[ip+1] {
			l := 2
			maxlen := min(n-ip-l, lzfMaxRef)
			if op+3+1 >= outLen && op-b2i(lit == 0)+3+1 >= outLen {
				return nil
			}
			out[op-lit-1] = byte(lit - 1)
			op -= b2i(lit == 0)
			l = lzfMatch(in, ref, ip, maxlen)
			l -= 2
			ip++
			if l < 7 {
				out[op] = byte(off>>8 + l<<5)
				op++
			} else {
				out[op] = byte(off>>8 + 7<<5)
				out[op+1] = byte(l - 7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++
			ip += l + 1
			if ip >= n-2 {
				break
			}
			ip -= 2
			hval = frst(ip)
			hval = next(hval, ip)
			htab[lzfIdx(hval)] = int32(ip + 1)
			ip++
			hval = next(hval, ip)
			htab[lzfIdx(hval)] = int32(ip + 1)
			ip++
		} else {
			if op >= outLen {
				return nil
			}
			lit++
			out[op] = in[ip]
			op++
			ip++
			if lit == lzfMaxLit {
				out[op-lit-1] = byte(lit - 1)
				lit = 0
				op++
			}
		}
	}
	if op+3 > outLen {
		return nil
	}
	for ip < n {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	out[op-lit-1] = byte(lit - 1)
	op -= b2i(lit == 0)
	return out[:op]
}

// lzfMatch is how far the bytes at ref and ip, equal for 3, go on equal,
// measured as lzf_compress measures it: 16 bytes are compared at once
// when maxlen allows, which may run a little past maxlen.
func lzfMatch(in []byte, ref, ip, maxlen int) int {
	l := 2
	if maxlen > 16 {
		for range 16 {
			l++
			if in[ref+l] != in[ip+l] {
				return l
			}
		}
	}
	for {
		l++
		if l >= maxlen || in[ref+l] != in[ip+l] {
			return l
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lzfDecompress decompresses in, which must give exactly n bytes.
func lzfDecompress(in []byte, n int) ([]byte, bool) {
	// A back reference of 2 or 3 bytes gives at most 264: a payload of a
	// few bytes that claims 512 MB does not get them allocated.
	out := make([]byte, 0, min(n, 132*len(in)+64))
	for ip := 0; ip < len(in); {
		ctrl := int(in[ip])
		ip++
		if ctrl < 1<<5 { // a literal run of ctrl+1 bytes
			l := ctrl + 1
			if len(out)+l > n || ip+l > len(in) {
				return nil, false
			}
			out = append(out, in[ip:ip+l]...)
			ip += l
			continue
		}
		l := ctrl >> 5 // a back reference
		if l == 7 {
			if ip >= len(in) {
				return nil, false
			}
			l += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return nil, false
		}
		ref := len(out) - (ctrl&0x1f)<<8 - int(in[ip]) - 1
		ip++
		l += 2
		if len(out)+l > n || ref < 0 {
			return nil, false
		}
		for i := 0; i < l; i++ { // byte by byte: the reference may overlap
			out = append(out, out[ref+i])
		}
	}
	return out, len(out) == n
}
