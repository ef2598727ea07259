package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The kind table: one row per value type, filled in by each type's file.
// A row names the type (TYPE, SCAN TYPE) and says how a value of the kind
// is written to a snapshot and read back, so snapshots carry every type
// without a central switch.

// kindSpec is one kind's row.
type kindSpec struct {
	name string // what TYPE answers: "string", "hash", ...
	// encoding is what OBJECT ENCODING answers for an item of the kind.
	encoding func(it *item) string
	// write appends the value of it (the part of a snapshot record after
	// its deadline) to w; it runs without the lock on a frozen view.
	write func(w *snapWriter, it *item)
	// read reads what write wrote into it.val or it.obj, validating it
	// (counts, order, no duplicates): on bad input it calls r.fail with
	// an error wrapping ErrCorrupt and returns.
	read func(r *snapReader, it *item)
	// elements calls fn for each element of a collection in its order
	// (a list's from head to tail, a set's members, a sorted set's
	// members by score), until fn returns false: SORT reads lists, sets
	// and sorted sets through it. nil for strings and hashes.
	elements func(it *item, fn func(elem []byte) bool)
}

var kindTable [16]kindSpec

// registerKind adds k's row; a kind registered twice is a programming error.
func registerKind(k kind, spec kindSpec) {
	if int(k) >= len(kindTable) || kindTable[k].name != "" || spec.name == "" || spec.write == nil || spec.read == nil {
		panic(fmt.Sprintf("fsm: bad kind registration %d %q", k, spec.name))
	}
	kindTable[k] = spec
}

func init() {
	// A string's value is read by readSnapshot itself, into the key's
	// buffer (one allocation per key, as for SET); read is its fallback.
	registerKind(kindString, kindSpec{
		name:     "string",
		encoding: stringEncoding,
		write:    func(w *snapWriter, it *item) { w.bytes(it.val) },
		read:     func(r *snapReader, it *item) { it.val = r.bytes(nil) },
	})
}

// stringEncoding is OBJECT ENCODING of a string, as Redis 7 decides it: an
// integer that fits a long is "int", up to 44 bytes "embstr", else "raw";
// a string changed in place stays "raw" and INCRBYFLOAT's result is never
// "int" (item.enc).
func stringEncoding(it *item) string {
	if it.enc == encRaw {
		return "raw"
	}
	if len(it.val) <= 20 && it.enc != encNoInt {
		if _, ok := parseInt(it.val); ok {
			return "int"
		}
	}
	if len(it.val) <= 44 {
		return "embstr"
	}
	return "raw"
}

// snapWriter is how a kind's write function writes: through a buffer into
// the checksummed stream, large byte strings straight through.
type snapWriter struct {
	cw  *crcWriter
	buf []byte
}

const snapBufFlush = 4096

func (w *snapWriter) flushIfFull() {
	if len(w.buf) >= snapBufFlush {
		w.cw.write(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *snapWriter) uvarint(x uint64) {
	w.buf = binary.AppendUvarint(w.buf, x)
	w.flushIfFull()
}

func (w *snapWriter) varint(x int64) {
	w.buf = binary.AppendVarint(w.buf, x)
	w.flushIfFull()
}

// float writes f as 8 bytes, little-endian IEEE 754.
func (w *snapWriter) float(f float64) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(f))
	w.flushIfFull()
}

// bytes writes b with its length.
func (w *snapWriter) bytes(b []byte) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(b)))
	if len(w.buf)+len(b) > cap(w.buf) && len(b) > snapBufFlush {
		w.cw.write(w.buf)
		w.cw.write(b)
		w.buf = w.buf[:0]
		return
	}
	w.buf = append(w.buf, b...)
	w.flushIfFull()
}

func (w *snapWriter) string(s string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
	w.flushIfFull()
}

// ok reports whether writing should go on.
func (w *snapWriter) ok() bool { return w.cw.err == nil }

// float reads what snapWriter.float wrote.
func (s *snapReader) float() float64 {
	var b [8]byte
	for i := range b {
		b[i] = s.byte()
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
}

// count reads an element count for a collection and rejects a zero one
// (Redis never keeps an empty collection) or one above max.
func (s *snapReader) count(max uint64) uint64 {
	n := s.uvarint()
	if s.err == nil && (n == 0 || n > max) {
		s.fail(fmt.Errorf("%w: collection of %d elements", ErrCorrupt, n))
		return 0
	}
	return n
}
