package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Snapshot format, version 6, shared by the wal's compaction and raft's
// snapshots:
//
//	snapshot = version:byte(6) index:uvarint
//	           nmeta:uvarint meta*nmeta
//	           acl
//	           versions
//	           slots
//	           count:uvarint record*count crc:uint32
//	meta     = namelen:uvarint name vallen:uvarint value
//	acl      = written:byte(0|1) nusers:uvarint (namelen:uvarint name linelen:uvarint line)*nusers
//	versions = writes:uvarint deleted:buckets written:buckets
//	buckets  = count:uvarint (bucket:uvarint version:uvarint)*count
//	record   = kind:byte keylen:uvarint key deadline:varint version:uvarint value
//	         | 0xFF db:uvarint versions
//
// The records of database 0 come first; a record of kind 0xFF starts the
// records of database db (above the previous one's, never 0), with its
// versions, and is written only for a database other than 0 that holds
// keys, so a store that never used another database writes what kvs wrote
// before databases, and a kvs from before them refuses the snapshot of one
// that did (an unknown type) rather than losing its keys. The order of
// keys below holds within each database; the count counts these records
// too.
//
// versions and each record's version are what WATCH compares (multi.go):
// the store's write counter, the non-zero entries of the records of
// deleted and of written keys by bucket, in ascending bucket order, and
// the item's version (48 bits).
//
// meta entries are the cluster metadata (Store.Meta), names strictly
// ascending, neither name nor value empty. Records are in keyspace order,
// (keyHash(key), key) ascending, strictly, where keyHash starts with the
// key's hash slot; Restore checks both orders, which also rejects
// duplicates. deadline is absolute Unix ms, 0 for none; keys already
// expired are kept, because a snapshot is the store's state, not a read of
// it. value is written by the kind's row of the kind table (kinds.go): for
// a string, vallen:uvarint bytes; each collection type draws its own in its
// file. crc is CRC-32C (Castagnoli), little-endian, over every byte before
// it.
//
// acl is the ACL table (fsm/acl.go), names strictly ascending, and whether
// an OpACLSet was ever applied. slots is the slot ownership table and the
// slot moves in flight (slots_snapshot.go). Version 5 is version 6 without
// slots (a store restored from one owns every slot and moves none).
// Version 4 is version 5 without acl (a store restored from one has no
// users and never had any).
//
// Version 3 is version 4 without versions and the records' version (a
// store restored from one starts with every version and the counter at 0,
// the same on every replica). Version 2 is version 3 with strings only and
// records in the order of legacyKeyHash (no slot); version 1 is version 2
// without nmeta and the meta entries. Restore reads them all (the keys of
// versions 1 and 2 are re-sorted into today's order); snapshots are
// written as version 6 by a store that holds a slot table, as version 5 by
// one that never did.
const (
	snapshotVersion   = 6
	snapshotVersionV5 = 5
	snapshotVersionV4 = 4
	snapshotVersionV3 = 3
	snapshotVersionV2 = 2
	snapshotVersionV1 = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// Snapshot is a frozen point-in-time view of a Store. Taking one costs O(1)
// under the lock: the B-tree is copied on write, so later writes to the store
// copy the nodes they touch instead of changing the snapshot's.
//
// A Snapshot is meant for one goroutine (the one writing it out); Release it
// when done so the nodes only it still holds can be freed.
type Snapshot struct {
	index uint64
	meta  map[string]string // shared with the store, which never modifies it
	acl   map[string]string // likewise
	aclW  bool              // an OpACLSet was ever applied
	slots *slotTable        // a frozen copy of the store's
	keys  *keyspace         // database 0's; nil after Release
	dbs   []snapDB          // the other databases holding keys, ascending
}

// snapDB is a database other than 0 in a snapshot.
type snapDB struct {
	db   uint16
	keys *keyspace
}

// recordDB is the kind byte of a snapshot record that starts a database.
const recordDB = 0xFF

// Snapshot returns a point-in-time view of the store, including its
// AppliedIndex.
func (s *Store) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Store) snapshotLocked() *Snapshot {
	// Copy starts a new copy-on-write generation, hence the exclusive
	// lock; it copies one array of tree pointers, whatever the key count.
	sn := &Snapshot{index: s.applied, meta: s.meta, acl: s.acl, aclW: s.aclWritten, slots: s.slots.frozen(),
		keys: s.keys.Copy()}
	s.otherDBsLocked(func(db uint16, d dbKeys) {
		if d.keys.Len() > 0 {
			sn.dbs = append(sn.dbs, snapDB{db: db, keys: d.keys.Copy()})
		}
	})
	return sn
}

// Index returns the AppliedIndex the snapshot was taken at.
func (sn *Snapshot) Index() uint64 { return sn.index }

// MovesInFlight reports whether the snapshot holds a move of slots in
// flight, out or in: restored beside other groups' snapshots, taken at
// other moments, it would hold half a move.
func (sn *Snapshot) MovesInFlight() bool {
	return sn.slots != nil && (len(sn.slots.out) > 0 || len(sn.slots.in) > 0)
}

// Len returns the number of keys in the snapshot, expired or not.
func (sn *Snapshot) Len() int {
	if sn.keys == nil {
		return 0
	}
	n := sn.keys.Len()
	for _, d := range sn.dbs {
		n += d.keys.Len()
	}
	return n
}

// Release drops the snapshot's view. WriteTo fails after it.
func (sn *Snapshot) Release() { sn.keys, sn.dbs, sn.meta, sn.acl, sn.slots = nil, nil, nil, nil, nil }

var errReleased = errors.New("fsm: snapshot already released")

// WriteTo streams the snapshot to w in the format above. It needs no lock
// and can run while the store takes writes.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	if sn.keys == nil {
		return 0, errReleased
	}
	cw := &crcWriter{w: bufio.NewWriterSize(w, 256<<10)}
	buf := make([]byte, 0, 4096)
	// A store never told about slots writes version 5, which is version 6
	// without the slots section: a replica still on a kvs that reads up
	// to version 5 can install it (a rolling upgrade), and nothing that
	// writes a slot table is proposed before every node reads version 6
	// (the cluster's apply level).
	version := byte(snapshotVersion)
	if sn.slots == nil {
		version = snapshotVersionV5
	}
	buf = append(buf, version)
	buf = binary.AppendUvarint(buf, sn.index)
	buf = binary.AppendUvarint(buf, uint64(len(sn.meta)))
	for _, name := range sortedMeta(sn.meta) {
		buf = appendString(buf, name)
		buf = appendString(buf, sn.meta[name])
		if len(buf) >= 4096 {
			cw.write(buf)
			buf = buf[:0]
		}
	}
	buf = appendACL(buf, sn.aclW, sn.acl)
	buf = appendVersions(buf, &sn.keys.vers)
	if version == snapshotVersion {
		buf = appendSlots(buf, sn.slots, cw)
	}
	count := sn.keys.Len()
	for _, d := range sn.dbs {
		count += 1 + d.keys.Len()
	}
	buf = binary.AppendUvarint(buf, uint64(count))
	sw := &snapWriter{cw: cw, buf: buf}
	record := func(it item) bool {
		sw.buf = append(sw.buf, byte(it.kind))
		sw.string(it.key)
		sw.varint(it.exp)
		sw.uvarint(it.version())
		kindTable[it.kind].write(sw, &it)
		return sw.ok()
	}
	sn.keys.Scan(record)
	for _, d := range sn.dbs {
		sw.buf = append(sw.buf, recordDB)
		sw.uvarint(uint64(d.db))
		sw.buf = appendVersions(sw.buf, &d.keys.vers)
		d.keys.Scan(record)
	}
	buf = sw.buf
	cw.write(buf)
	cw.w.Write(binary.LittleEndian.AppendUint32(nil, cw.crc))
	if cw.err == nil {
		cw.n += 4
		cw.err = cw.w.Flush()
	}
	return cw.n, cw.err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// crcWriter checksums what it writes and keeps the first error.
type crcWriter struct {
	w   *bufio.Writer
	crc uint32
	n   int64
	err error
}

func (c *crcWriter) write(b []byte) {
	if c.err != nil || len(b) == 0 {
		return
	}
	c.crc = crcUpdate(c.crc, b)
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

// Restore replaces the whole store with the snapshot read from r and returns
// its index, which becomes AppliedIndex. The new keyspace is built aside and
// swapped in under the lock at the end, so a corrupt or truncated snapshot
// returns an error (wrapping ErrCorrupt, or the reader's error) and leaves the
// store as it was. r is read through a buffer and may be read past the
// snapshot's end.
func (s *Store) Restore(r io.Reader) (uint64, error) {
	next, index, err := readSnapshot(r)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	acc, mods := s.keys.acc, s.keys.mods
	s.keys, s.bytes, s.dbs, s.applied = next.keys, next.bytes, next.dbs, index
	s.setAccessTableLocked(acc)
	s.setModsLocked(mods)
	s.flushedLocked()
	modBatch, modHook := s.takeModifiedLocked()
	s.bytesPub.Store(s.totalBytesLocked())
	s.setMetaMapLocked(next.meta)
	s.aclWritten = next.aclWritten
	s.setACLLocked(next.acl)
	s.slots = next.slots
	s.syncTrackLocked()
	metaChanged := s.takeMetaChangedLocked()
	s.mu.Unlock()
	if modHook != nil {
		modBatch.give(modHook)
	}
	if metaChanged != nil {
		metaChanged()
	}
	return index, nil
}

func readSnapshot(r io.Reader) (*Store, uint64, error) {
	sr := &snapReader{r: bufio.NewReaderSize(r, 256<<10)}
	v := sr.byte()
	if sr.err == nil && (v < snapshotVersionV1 || v > snapshotVersion) {
		return nil, 0, fmt.Errorf("%w: snapshot version %d at byte 0, want %d to %d", ErrCorrupt, v, snapshotVersionV1, snapshotVersion)
	}
	index := sr.uvarint()
	st := NewStore()
	if v >= snapshotVersionV2 {
		st.meta = sr.meta()
	}
	if v >= snapshotVersionV5 {
		st.aclWritten, st.acl = sr.aclSection()
	}
	if v >= snapshotVersionV4 {
		st.keys.vers = sr.versions()
	}
	if v >= snapshotVersion {
		st.slots = sr.slots()
	}
	// Before version 3 records came in another order: check that one, and
	// insert each key where it goes today instead of appending.
	legacy := v < snapshotVersionV3
	less := itemLess
	if legacy {
		less = func(a, b item) bool {
			ha, hb := legacyKeyHash(a.key), legacyKeyHash(b.key)
			return ha < hb || (ha == hb && a.key < b.key)
		}
	}
	if sr.err != nil {
		return nil, 0, fmt.Errorf("%w, in the header ending at byte %d", sr.err, sr.off)
	}
	count := sr.uvarint()
	var prev item
	first := true // the next record is the first of its database
	for i := uint64(0); i < count && sr.err == nil; i++ {
		start := sr.off
		k := kind(sr.byte())
		if k == recordDB && sr.err == nil && v >= snapshotVersionV5 {
			db := sr.uvarint()
			vers := sr.versions()
			if sr.err != nil {
				return nil, 0, fmt.Errorf("%w, in record %d of %d (starting at byte %d)", sr.err, i, count, start)
			}
			if db == 0 || db > MaxDB || uint16(db) <= st.cur {
				return nil, 0, fmt.Errorf("%w: snapshot record %d of %d at byte %d: database %d out of order", ErrCorrupt, i, count, start, db)
			}
			st.selectLocked(uint16(db))
			st.keys.vers = vers
			first = true
			continue
		}
		if sr.err == nil && (int(k) >= len(kindTable) || kindTable[k].name == "" || (legacy && k != kindString)) {
			return nil, 0, fmt.Errorf("%w: snapshot record %d of %d at byte %d: unknown type %d", ErrCorrupt, i, count, start, k)
		}
		// A string's key and value are read into one buffer, which
		// the item then owns: one allocation per key, as for a SET.
		buf := sr.bytes(nil)
		klen := len(buf)
		exp := sr.varint()
		var ver uint64
		if v >= snapshotVersionV4 {
			ver = sr.itemVersion()
		}
		var it item
		if k == kindString {
			buf = sr.bytes(buf)
			if sr.err == nil {
				it = ownItem(buf, klen, exp)
			}
		} else if sr.err == nil {
			key := string(buf)
			it = item{hash: keyHash(key), key: key, exp: exp, kind: k}
			kindTable[k].read(sr, &it)
			if it.obj != nil {
				*it.obj.cowGen() = st.keys.gen
			}
		}
		if sr.err != nil {
			return nil, 0, fmt.Errorf("%w, in record %d of %d (starting at byte %d)", sr.err, i, count, start)
		}
		it.setVersion(ver)
		if exp < 0 {
			return nil, 0, fmt.Errorf("%w: snapshot record %d of %d at byte %d: negative deadline", ErrCorrupt, i, count, start)
		}
		if !first && !less(prev, it) {
			return nil, 0, fmt.Errorf("%w: snapshot record %d of %d at byte %d: key %q out of order", ErrCorrupt, i, count, start, it.key)
		}
		if legacy {
			st.keys.Set(it)
		} else {
			st.keys.Load(it) // in order: appends without searching
		}
		st.bytes += it.size()
		prev, first = it, false
	}
	st.selectLocked(0)
	if sr.err != nil {
		return nil, 0, fmt.Errorf("%w, in the record count at byte %d", sr.err, sr.off)
	}
	want := sr.crc
	var tail [4]byte
	if _, err := io.ReadFull(sr.r, tail[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: snapshot checksum at byte %d: %v", ErrCorrupt, sr.off, err)
	}
	if got := binary.LittleEndian.Uint32(tail[:]); got != want {
		return nil, 0, fmt.Errorf("%w: snapshot checksum %#08x at byte %d, computed %#08x over the %d records before it", ErrCorrupt, got, sr.off, want, count)
	}
	st.applied = index
	return st, index, nil
}

// meta reads the metadata section of a version 2 snapshot.
func (s *snapReader) meta() map[string]string {
	n := s.uvarint()
	var m map[string]string
	prev := ""
	for i := uint64(0); i < n && s.err == nil; i++ {
		name, val := string(s.bytes(nil)), string(s.bytes(nil))
		switch {
		case s.err != nil:
		case name == "" || val == "":
			s.fail(fmt.Errorf("%w: snapshot metadata %d: empty name or value", ErrCorrupt, i))
		case i > 0 && name <= prev:
			s.fail(fmt.Errorf("%w: snapshot metadata %d: name %q out of order", ErrCorrupt, i, name))
		default:
			if m == nil {
				// Bounded by the input: every entry took bytes to read.
				m = make(map[string]string)
			}
			m[name] = val
			prev = name
		}
	}
	return m
}

// snapReader reads and checksums a snapshot; the first error sticks.
type snapReader struct {
	r   *bufio.Reader
	crc uint32
	off int64 // bytes read so far, for naming where damage is
	err error
	scr [binary.MaxVarintLen64]byte
}

func (s *snapReader) fail(err error) {
	if s.err == nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: snapshot truncated", ErrCorrupt)
		} else if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("fsm: reading snapshot: %w", err)
		}
		s.err = err
	}
}

func (s *snapReader) byte() byte {
	if s.err != nil {
		return 0
	}
	b, err := s.r.ReadByte()
	if err != nil {
		s.fail(err)
		return 0
	}
	s.off++
	s.scr[0] = b
	s.crc = crc32.Update(s.crc, castagnoli, s.scr[:1])
	return b
}

func (s *snapReader) uvarint() uint64 {
	v, err := binary.ReadUvarint(byteReader{s})
	if err != nil {
		s.fail(fmt.Errorf("%w: bad uvarint: %v", ErrCorrupt, err))
	}
	return v
}

func (s *snapReader) varint() int64 {
	v, err := binary.ReadVarint(byteReader{s})
	if err != nil {
		s.fail(fmt.Errorf("%w: bad varint: %v", ErrCorrupt, err))
	}
	return v
}

// bytes reads a length-prefixed string and appends it to dst. The buffer
// grows as data arrives, so a corrupt length cannot make Restore allocate
// much more than the input holds.
func (s *snapReader) bytes(dst []byte) []byte {
	n := s.uvarint()
	if s.err != nil {
		return nil
	}
	if n > MaxStringLen {
		s.fail(fmt.Errorf("%w: length %d exceeds %d", ErrCorrupt, n, MaxStringLen))
		return nil
	}
	const chunk = 1 << 20
	want := len(dst) + int(n)
	if dst == nil {
		// The key: leave room for a small value so that one
		// allocation usually holds both.
		dst = make([]byte, 0, min(n, chunk)+64)
	}
	for len(dst) < want {
		start := len(dst)
		dst = append(dst, make([]byte, min(want-start, chunk))...)
		n, err := io.ReadFull(s.r, dst[start:])
		s.off += int64(n)
		if err != nil {
			s.fail(err)
			return nil
		}
		s.crc = crcUpdate(s.crc, dst[start:])
	}
	return dst
}

// byteReader adapts snapReader for binary.ReadUvarint, checksumming as it
// goes; errors go to ReadUvarint's caller.
type byteReader struct{ s *snapReader }

func (b byteReader) ReadByte() (byte, error) {
	v := b.s.byte()
	if b.s.err != nil {
		return 0, b.s.err
	}
	return v, nil
}
