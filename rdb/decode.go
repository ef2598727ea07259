package rdb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"kvs/fsm"
)

// Decoder reads an RDB file: see the package's doc.
type Decoder struct {
	r       *bufio.Reader
	off     int64  // bytes read
	crc     uint64 // Redis's crc64 of them
	capture bool   // append what is read to buf
	buf     []byte
	version int
	db      uint64
	done    bool
	err     error
	recAt   int64 // the record being read starts here
}

// NewDecoder returns a Decoder reading from r. It reads r through its own
// buffer: nothing after the file's checksum is consumed beyond that
// buffer, so a caller that goes on reading the same stream passes a
// *bufio.Reader, which the Decoder then reads from directly.
func NewDecoder(r io.Reader) *Decoder {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	return &Decoder{r: br}
}

// Version is the file's RDB version, once Next has read the header.
func (d *Decoder) Version() int { return d.version }

// Offset is the number of bytes read so far.
func (d *Decoder) Offset() int64 { return d.off }

// errShort stands for a read past the end of the input.
var errShort = errors.New("unexpected end of file")

// fail records the first error, at the record being read.
func (d *Decoder) fail(format string, args ...any) error {
	if d.err == nil {
		d.err = &Error{Offset: d.recAt, Msg: fmt.Sprintf(format, args...)}
	}
	return d.err
}

// read reads exactly n bytes into a slice the caller must not keep past
// the next read (it may be the bufio's).
func (d *Decoder) read(n int) ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	p, err := d.r.Peek(n)
	if err != nil && len(p) < n {
		if n > d.r.Size() {
			return d.readLong(n)
		}
		return nil, d.short(err)
	}
	d.consume(p)
	d.r.Discard(n)
	return p, nil
}

// readLong reads n bytes longer than the buffer, as they come: a damaged
// length claiming gigabytes costs no more memory than the bytes there are.
func (d *Decoder) readLong(n int) ([]byte, error) {
	out := make([]byte, 0, min(n, 1<<20))
	for len(out) < n {
		chunk := min(n-len(out), 1<<20)
		start := len(out)
		out = append(out, make([]byte, chunk)...)
		if _, err := io.ReadFull(d.r, out[start:]); err != nil {
			return nil, d.short(err)
		}
		d.consume(out[start:])
	}
	return out, nil
}

func (d *Decoder) short(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return d.fail("%s (the file is truncated)", errShort)
	}
	return d.fail("read: %v", err)
}

func (d *Decoder) consume(p []byte) {
	d.off += int64(len(p))
	d.crc = fsm.CRC64(d.crc, p)
	if d.capture {
		d.buf = append(d.buf, p...)
	}
}

func (d *Decoder) byte() (byte, error) {
	p, err := d.read(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// length is rdbLoadLenByRef: a length, or with encoded the kind of an
// encoded string.
func (d *Decoder) length() (n uint64, encoded bool, err error) {
	b, err := d.byte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3f), false, nil
	case 1:
		c, err := d.byte()
		return uint64(b&0x3f)<<8 | uint64(c), false, err
	case 3:
		return uint64(b & 0x3f), true, nil
	}
	switch b {
	case 0x80:
		p, err := d.read(4)
		if err != nil {
			return 0, false, err
		}
		return uint64(binary.BigEndian.Uint32(p)), false, nil
	case 0x81:
		p, err := d.read(8)
		if err != nil {
			return 0, false, err
		}
		return binary.BigEndian.Uint64(p), false, nil
	}
	return 0, false, d.fail("unknown length encoding 0x%02x", b)
}

// plainLen reads a length that may not be a string's encoding.
func (d *Decoder) plainLen(what string) (uint64, error) {
	n, enc, err := d.length()
	if err == nil && enc {
		return 0, d.fail("%s: an encoded string where a length belongs", what)
	}
	return n, err
}

// maxString bounds a string's length: a damaged length is refused before
// it is read.
const maxString = 1 << 40

// skipString reads a string without decoding it (the value's bytes are
// captured).
func (d *Decoder) skipString() error {
	n, enc, err := d.length()
	if err != nil {
		return err
	}
	if enc {
		switch n {
		case 0:
			_, err = d.read(1)
		case 1:
			_, err = d.read(2)
		case 2:
			_, err = d.read(4)
		case 3:
			var clen uint64
			if clen, err = d.plainLen("compressed string"); err != nil {
				return err
			}
			if _, err = d.plainLen("compressed string"); err != nil {
				return err
			}
			if clen > maxString {
				return d.fail("compressed string of %d bytes", clen)
			}
			_, err = d.read(int(clen))
		default:
			return d.fail("unknown string encoding %d", n)
		}
		return err
	}
	if n > maxString {
		return d.fail("string of %d bytes", n)
	}
	_, err = d.read(int(n))
	return err
}

// str reads and decodes a string (a key, an AUX field, a library's code).
func (d *Decoder) str() ([]byte, error) {
	n, enc, err := d.length()
	if err != nil {
		return nil, err
	}
	if !enc {
		if n > maxString {
			return nil, d.fail("string of %d bytes", n)
		}
		p, err := d.read(int(n))
		return append([]byte(nil), p...), err
	}
	switch n {
	case 0:
		p, err := d.read(1)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int8(p[0])), 10), nil
	case 1:
		p, err := d.read(2)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int16(binary.LittleEndian.Uint16(p))), 10), nil
	case 2:
		p, err := d.read(4)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(p))), 10), nil
	case 3:
		clen, err := d.plainLen("compressed string")
		if err != nil {
			return nil, err
		}
		plen, err := d.plainLen("compressed string")
		if err != nil {
			return nil, err
		}
		if clen > maxString || plen == 0 || plen > fsm.MaxStringLen {
			return nil, d.fail("compressed string of %d bytes to %d", clen, plen)
		}
		c, err := d.read(int(clen))
		if err != nil {
			return nil, err
		}
		out, ok := fsm.LZFDecompress(c, int(plen))
		if !ok {
			return nil, d.fail("compressed string does not decompress")
		}
		return out, nil
	}
	return nil, d.fail("unknown string encoding %d", n)
}

// Next returns the next record, io.EOF once the EOF opcode and the
// checksum were read and the checksum matched, or an *Error. After an
// error it returns that error again.
func (d *Decoder) Next() (*Entry, error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.done {
		return nil, io.EOF
	}
	if d.version == 0 {
		if err := d.header(); err != nil {
			return nil, err
		}
	}
	e := &Entry{Expire: -1, Idle: -1, Freq: -1, Version: d.version}
	d.recAt = d.off
	e.Offset = d.off
	for {
		t, err := d.byte()
		if err != nil {
			return nil, err
		}
		switch t {
		case opExpireTime:
			p, err := d.read(4)
			if err != nil {
				return nil, err
			}
			e.Expire = int64(int32(binary.LittleEndian.Uint32(p))) * 1000
			continue
		case opExpireTimeMs:
			p, err := d.read(8)
			if err != nil {
				return nil, err
			}
			e.Expire = int64(binary.LittleEndian.Uint64(p))
			continue
		case opFreq:
			b, err := d.byte()
			if err != nil {
				return nil, err
			}
			e.Freq = int(b)
			continue
		case opIdle:
			n, err := d.plainLen("IDLE")
			if err != nil {
				return nil, err
			}
			e.Idle = int64(min(n, 1<<62))
			continue
		case opSelectDB:
			n, err := d.plainLen("SELECTDB")
			if err != nil {
				return nil, err
			}
			d.db = n
			continue
		case opResizeDB:
			if _, err := d.plainLen("RESIZEDB"); err != nil {
				return nil, err
			}
			if _, err := d.plainLen("RESIZEDB"); err != nil {
				return nil, err
			}
			continue
		case opAux:
			name, err := d.str()
			if err != nil {
				return nil, err
			}
			val, err := d.str()
			if err != nil {
				return nil, err
			}
			e.Kind, e.Key, e.Value = KindAux, name, val
			return e, nil
		case opModuleAux:
			return nil, d.fail("module data (MODULE_AUX): kvs has no modules")
		case opFunction2:
			code, err := d.str()
			if err != nil {
				return nil, err
			}
			e.Kind, e.Value = KindFunction, code
			return e, nil
		case opFunction:
			return d.oldFunction(e)
		case opEOF:
			return nil, d.end()
		}
		// A key: its record starts here, past the SELECTDB and RESIZEDB
		// before it (a key's attributes before those are kept for it, as
		// Redis keeps them).
		if e.Expire == -1 && e.Idle == -1 && e.Freq == -1 {
			d.recAt, e.Offset = d.off-1, d.off-1
		}
		e.Kind, e.Type, e.DB = KindKey, t, d.db
		if TypeName(t) == "unknown" {
			return nil, d.fail("unknown value type %d", t)
		}
		if e.Key, err = d.str(); err != nil {
			return nil, err
		}
		d.capture, d.buf = true, nil
		err = d.skipValue(t, e.Key)
		d.capture = false
		if err != nil {
			return nil, err
		}
		e.Value, d.buf = d.buf, nil
		if t == TypeStreamListpacks3 {
			// Its consumers' active times were left out (skipStream):
			// the value is type 19's, which RESTORE reads.
			e.Type = TypeStreamListpacks2
		}
		return e, nil
	}
}

func (d *Decoder) header() error {
	p, err := d.read(9)
	if err != nil {
		return err
	}
	if string(p[:5]) != "REDIS" {
		return d.fail("not an RDB file (it does not start with REDIS)")
	}
	v, err := strconv.Atoi(string(p[5:9]))
	if err != nil || v < 1 {
		return d.fail("bad RDB version %q", p[5:9])
	}
	if v > MaxVersion {
		return d.fail("RDB version %d: kvs reads versions up to %d (Redis 7.2)", v, MaxVersion)
	}
	d.version = v
	return nil
}

// end reads the checksum after the EOF opcode (version 5 on).
func (d *Decoder) end() error {
	d.recAt = d.off
	if d.version >= 5 {
		want := d.crc
		p, err := d.read(8)
		if err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint64(p); got != 0 && got != want {
			return d.fail("wrong checksum %016x (the file's bytes give %016x)", got, want)
		}
	}
	d.done = true
	return io.EOF
}

// oldFunction reads a library in the format of 7.0's release candidates,
// translated as rdbFunctionLoad does.
func (d *Decoder) oldFunction(e *Entry) (*Entry, error) {
	name, err := d.str()
	if err != nil {
		return nil, err
	}
	engine, err := d.str()
	if err != nil {
		return nil, err
	}
	hasDesc, err := d.plainLen("function description")
	if err != nil {
		return nil, err
	}
	if hasDesc != 0 {
		if _, err := d.str(); err != nil {
			return nil, err
		}
	}
	code, err := d.str()
	if err != nil {
		return nil, err
	}
	e.Kind = KindFunction
	e.Value = append([]byte("#!"+string(engine)+" name="+string(name)+"\n"), code...)
	return e, nil
}

// count reads a collection's count.
func (d *Decoder) count(what string) (uint64, error) {
	return d.plainLen(what)
}

// skipValue reads a value of type t to its end, as rdbLoadObject would
// read it, without decoding its strings.
func (d *Decoder) skipValue(t byte, key []byte) error {
	switch t {
	case TypeString, TypeHashZipmap, TypeListZiplist, TypeSetIntset, TypeZSetZiplist,
		TypeHashZiplist, TypeHashListpack, TypeZSetListpack, TypeSetListpack:
		return d.skipString()
	case TypeList, TypeSet, TypeListQuicklist:
		n, err := d.count("count")
		for ; err == nil && n > 0; n-- {
			err = d.skipString()
		}
		return err
	case TypeHash:
		n, err := d.count("count")
		for ; err == nil && n > 0; n-- {
			if err = d.skipString(); err == nil {
				err = d.skipString()
			}
		}
		return err
	case TypeZSet:
		n, err := d.count("count")
		for ; err == nil && n > 0; n-- {
			if err = d.skipString(); err != nil {
				return err
			}
			var l byte
			if l, err = d.byte(); err == nil && l < 253 {
				_, err = d.read(int(l))
			}
		}
		return err
	case TypeZSet2:
		n, err := d.count("count")
		for ; err == nil && n > 0; n-- {
			if err = d.skipString(); err == nil {
				_, err = d.read(8)
			}
		}
		return err
	case TypeListQuicklist2:
		n, err := d.count("count")
		for ; err == nil && n > 0; n-- {
			if _, err = d.plainLen("quicklist container"); err == nil {
				err = d.skipString()
			}
		}
		return err
	case TypeStreamListpacks, TypeStreamListpacks2, TypeStreamListpacks3:
		return d.skipStream(t)
	case TypeModule, TypeModule2:
		return d.fail("key %q: a module's value (RDB type %d): kvs has no modules", key, t)
	}
	return d.fail("unknown value type %d", t)
}

// skipStream reads a stream (rdbLoadObject's RDB_TYPE_STREAM_LISTPACKS*).
func (d *Decoder) skipStream(t byte) error {
	lens := func(n int) error {
		for range n {
			if _, err := d.plainLen("stream"); err != nil {
				return err
			}
		}
		return nil
	}
	nodes, err := d.count("stream nodes")
	for ; err == nil && nodes > 0; nodes-- {
		if err = d.skipString(); err == nil { // the master ID
			err = d.skipString() // the listpack
		}
	}
	if err != nil {
		return err
	}
	// length, last ID; from type 19 the first ID, the greatest deleted
	// ID and the entries added.
	n := 3
	if t != TypeStreamListpacks {
		n += 5
	}
	if err := lens(n); err != nil {
		return err
	}
	groups, err := d.count("stream groups")
	for ; err == nil && groups > 0; groups-- {
		if err = d.skipString(); err != nil { // the name
			return err
		}
		n := 2 // the last delivered ID; from type 19 the offset
		if t != TypeStreamListpacks {
			n++
		}
		if err = lens(n); err != nil {
			return err
		}
		var pel uint64
		pel, err = d.count("stream PEL")
		for ; err == nil && pel > 0; pel-- {
			if _, err = d.read(16 + 8); err == nil { // ID, delivery time
				_, err = d.plainLen("stream PEL") // delivery count
			}
		}
		if err != nil {
			return err
		}
		var consumers uint64
		consumers, err = d.count("stream consumers")
		for ; err == nil && consumers > 0; consumers-- {
			if err = d.skipString(); err != nil { // the name
				return err
			}
			// The seen time; type 21 (Redis 7.2) the active time too,
			// which Redis 7.0's type 19 lacks: it is read and left out of
			// the value, which is then type 19's (see Next).
			if _, err = d.read(8); err != nil {
				return err
			}
			if t == TypeStreamListpacks3 {
				capture := d.capture
				d.capture = false
				_, err = d.read(8)
				d.capture = capture
				if err != nil {
					return err
				}
			}
			pel, err = d.count("stream consumer PEL")
			for ; err == nil && pel > 0; pel-- {
				_, err = d.read(16)
			}
		}
	}
	return err
}
