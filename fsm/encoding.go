package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Entry encoding, version 2. A log entry (one wal record, one raft log
// entry) is a batch of write commands and the proposer's clock:
//
//	entry   = version:byte(2) now:varint count:uvarint command*count
//	command = op:uvarint flags:uvarint fields:byte
//	          [int:varint] [int2:varint] [float:8 bytes little-endian]
//	          [float2:8 bytes little-endian] [db:uvarint]
//	          nargs:uvarint (len:uvarint bytes)*nargs
//
// fields has bit 0 set when Int is present, bit 1 for Int2, bit 2 for Float,
// bit 3 for Float2, bit 4 for DB (set only when DB is not 0: a command
// of database 0 is encoded as it was before databases, byte for byte, and a
// kvs from before databases refuses a command of another one by its unknown
// field rather than misreading it); absent fields are zero, which keeps the common commands
// (SET, DEL) to a few bytes of overhead. varint is zig-zag (encoding/binary's
// Varint). flags fit 32 bits.
//
// Version 1, written by kvs before the op table, is the same with op a
// single byte, flags within 16 bits and no Float2. Every version 1 op is
// below 128, where a uvarint is that byte, so one decoder reads both; a
// version 1 entry must also keep to version 1's limits. Entries are always
// written as version 2, so an older kvs refuses a newer log by its version
// instead of misreading it.
const (
	entryVersion   = 2
	entryVersionV1 = 1
)

const (
	fieldInt    = 1 << 0
	fieldInt2   = 1 << 1
	fieldFloat  = 1 << 2
	fieldFloat2 = 1 << 3
	fieldDB     = 1 << 4
)

// ErrCorrupt is wrapped by every error DecodeEntry and Restore return for
// bytes that are not a valid entry or snapshot.
var ErrCorrupt = errors.New("fsm: corrupt data")

// EncodeEntry appends the encoding of a log entry holding cmds, proposed at
// now (Unix ms), to dst and returns the extended slice. It allocates only if
// dst lacks capacity. cmds must be write commands that pass Validate;
// DecodeEntry rejects anything else.
func EncodeEntry(dst []byte, now int64, cmds []Command) []byte {
	dst = append(dst, entryVersion)
	dst = binary.AppendVarint(dst, now)
	return AppendCommands(dst, cmds)
}

// AppendCommands appends the encoding of a list of commands, count then
// commands, to dst: the part of an entry after its clock. It is also how a
// follower forwards a batch to the leader, where reads may be included;
// DecodeCommands reads it back.
func AppendCommands(dst []byte, cmds []Command) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		var fields byte
		if c.Int != 0 {
			fields |= fieldInt
		}
		if c.Int2 != 0 {
			fields |= fieldInt2
		}
		if math.Float64bits(c.Float) != 0 {
			fields |= fieldFloat
		}
		if math.Float64bits(c.Float2) != 0 {
			fields |= fieldFloat2
		}
		if c.DB != 0 {
			fields |= fieldDB
		}
		dst = binary.AppendUvarint(dst, uint64(c.Op))
		dst = binary.AppendUvarint(dst, uint64(c.Flags))
		dst = append(dst, fields)
		if fields&fieldInt != 0 {
			dst = binary.AppendVarint(dst, c.Int)
		}
		if fields&fieldInt2 != 0 {
			dst = binary.AppendVarint(dst, c.Int2)
		}
		if fields&fieldFloat != 0 {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.Float))
		}
		if fields&fieldFloat2 != 0 {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.Float2))
		}
		if fields&fieldDB != 0 {
			dst = binary.AppendUvarint(dst, uint64(c.DB))
		}
		dst = binary.AppendUvarint(dst, uint64(len(c.Args)))
		for _, a := range c.Args {
			dst = binary.AppendUvarint(dst, uint64(len(a)))
			dst = append(dst, a...)
		}
	}
	return dst
}

// EntrySize returns len(EncodeEntry(nil, now, cmds)) without encoding, so a
// caller can size its buffer once.
func EntrySize(now int64, cmds []Command) int {
	n := 1 + varintLen(now) + uvarintLen(uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		n += uvarintLen(uint64(c.Op)) + uvarintLen(uint64(c.Flags)) + 1
		if c.Int != 0 {
			n += varintLen(c.Int)
		}
		if c.Int2 != 0 {
			n += varintLen(c.Int2)
		}
		if math.Float64bits(c.Float) != 0 {
			n += 8
		}
		if math.Float64bits(c.Float2) != 0 {
			n += 8
		}
		if c.DB != 0 {
			n += uvarintLen(uint64(c.DB))
		}
		n += uvarintLen(uint64(len(c.Args)))
		for _, a := range c.Args {
			n += uvarintLen(uint64(len(a))) + len(a)
		}
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// DecodeEntry decodes a log entry written by EncodeEntry. It validates
// everything (version, lengths, ops, flags, argument counts) and returns an
// error wrapping ErrCorrupt, never panicking, for any other input; commands
// it returns are safe to Apply. The returned Args alias b: b must not be
// modified while they are in use (Apply copies what it keeps).
func DecodeEntry(b []byte) (now int64, cmds []Command, err error) {
	d := decoder{b: b}
	v := d.byte()
	if d.err == nil && v != entryVersion && v != entryVersionV1 {
		return 0, nil, fmt.Errorf("%w: entry version %d, want %d or %d", ErrCorrupt, v, entryVersionV1, entryVersion)
	}
	d.v1 = v == entryVersionV1
	now = d.varint()
	if cmds, err = d.commands(true); err != nil {
		return 0, nil, err
	}
	return now, cmds, nil
}

// DecodeCommands decodes a command list written by AppendCommands, reads
// and writes alike, with the same validation and aliasing as DecodeEntry:
// every error wraps ErrCorrupt, and the commands it returns pass Validate.
func DecodeCommands(b []byte) ([]Command, error) {
	d := decoder{b: b}
	return d.commands(false)
}

// commands reads a command list that must end the input. writesOnly
// rejects commands that are not writes, as a log entry must.
func (d *decoder) commands(writesOnly bool) ([]Command, error) {
	cmds, _, err := d.commandsInto(nil, nil, writesOnly)
	if err != nil {
		return nil, err
	}
	return cmds, nil
}

// commandsInto is commands decoding into dst's and pool's memory where
// they have room (the Commands, and one backing array for the Args of
// many commands), for a caller that decodes many lists into the same
// memory. It returns the commands and the pool, both possibly grown.
func (d *decoder) commandsInto(dst []Command, pool [][]byte, writesOnly bool) ([]Command, [][]byte, error) {
	n := d.count(4) // a command takes at least 4 bytes
	if d.err != nil {
		return dst[:0], pool, d.err
	}
	var cmds []Command
	if cap(dst) >= n {
		cmds = dst[:n]
		clear(cmds)
	} else {
		cmds = make([]Command, n)
	}
	pool = pool[:0]
	for i := range cmds {
		c := &cmds[i]
		op := d.uvarint()
		if op >= uint64(opLimit) || (d.v1 && op >= 128) {
			d.fail("op out of range")
		}
		c.Op = Op(op)
		flags := d.uvarint()
		if flags > math.MaxUint32 || (d.v1 && flags > math.MaxUint16) {
			d.fail("flags out of range")
		}
		c.Flags = Flags(flags)
		fields := d.byte()
		known := byte(fieldInt | fieldInt2 | fieldFloat | fieldFloat2 | fieldDB)
		if d.v1 {
			known = fieldInt | fieldInt2 | fieldFloat
		}
		if fields&^known != 0 {
			d.fail("unknown fields")
		}
		if fields&fieldInt != 0 {
			c.Int = d.varint()
		}
		if fields&fieldInt2 != 0 {
			c.Int2 = d.varint()
		}
		if fields&fieldFloat != 0 {
			c.Float = math.Float64frombits(d.uint64())
		}
		if fields&fieldFloat2 != 0 {
			c.Float2 = math.Float64frombits(d.uint64())
		}
		if fields&fieldDB != 0 {
			db := d.uvarint()
			if db == 0 || db > MaxDB {
				d.fail("database out of range")
			}
			c.DB = uint16(db)
		}
		nargs := d.count(1)
		if d.err != nil {
			return cmds[:0], pool, d.err
		}
		if nargs > 0 {
			if cap(pool)-len(pool) < nargs {
				pool = make([][]byte, 0, max(nargs, 2*(len(cmds)-i)))
			}
			c.Args = pool[len(pool) : len(pool)+nargs : len(pool)+nargs]
			pool = pool[:len(pool)+nargs]
			for j := range c.Args {
				c.Args[j] = d.bytes()
			}
		}
		if d.err != nil {
			return cmds[:0], pool, d.err
		}
		if writesOnly && !c.Op.IsWrite() {
			return cmds[:0], pool, fmt.Errorf("%w: command %d: op %d is not a write", ErrCorrupt, i, uint16(c.Op))
		}
		if err := c.Validate(); err != nil {
			return cmds[:0], pool, fmt.Errorf("%w: command %d: %v", ErrCorrupt, i, err)
		}
	}
	if len(d.b) != 0 {
		return cmds[:0], pool, fmt.Errorf("%w: %d trailing bytes after the commands", ErrCorrupt, len(d.b))
	}
	return cmds, pool, nil
}

// decoder reads from b; after the first failure every read returns zero and
// err keeps the first error, so callers check once after a group of reads.
type decoder struct {
	b   []byte
	off int // bytes consumed, for error messages
	err error
	v1  bool // reading an entry of version 1
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", ErrCorrupt, what, d.off)
	}
	d.b = nil
}

func (d *decoder) advance(n int) {
	d.b = d.b[n:]
	d.off += n
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("unexpected end")
		return 0
	}
	v := d.b[0]
	d.advance(1)
	return v
}

func (d *decoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("unexpected end")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.advance(8)
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

// count reads an element count and rejects one that the remaining bytes
// cannot hold at minSize bytes each, so corrupt input cannot make the
// decoder allocate without bound.
func (d *decoder) count(minSize int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/minSize) {
		d.fail(fmt.Sprintf("count %d exceeds remaining %d bytes", v, len(d.b)))
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string, aliasing d.b.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length exceeds remaining bytes")
		return nil
	}
	v := d.b[:n:n]
	d.advance(int(n))
	return v
}
