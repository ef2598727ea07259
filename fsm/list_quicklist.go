package fsm

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/tidwall/btree"
)

// A list's two forms.
//
// Packed (Redis's listpack), in item.val while the list is small:
//
//	uvarint count | entry*      entry = uvarint length | bytes
//
// The buffer is immutable like a string's bytes: a write builds a new one.
//
// Large (Redis's quicklist), in item.obj: a copy-on-write B-tree of chunks,
// each holding up to about listChunkTarget bytes of chunk entries, ordered
// by a sequence number that leaves room between neighbours (a chunk split
// by LINSERT takes numbers between its own and the next one's; when none
// are left, the chunks are renumbered). A chunk entry can be read from
// either end, as a listpack entry can:
//
//	chunk entry = uvarint length | bytes | the uvarint's bytes reversed
//
// so a pop at either end finds its element without walking the chunk.
// Pushes and pops touch the chunk at their end and, in the common case,
// change it in place: O(log chunks) to find it and O(1) to change it.
// LINDEX, LSET and LRANGE walk the chunks from the nearer end, counting
// elements, as Redis walks its quicklist nodes.
//
// Chunks are shared, by pointer, between a list and its clones (a
// snapshot's view, COPY's copy), and replies alias their bytes after the
// store's lock is released. Two rules keep both safe:
//
//   - A chunk is changed in place only by the quicklist whose id it
//     carries (owner). clone gives the original and the copy new ids, so
//     neither owns a chunk they share; the first write to one copies its
//     header (mut) and can no longer push into the shared bytes' room.
//   - Bytes that were ever part of a chunk's entries are never written
//     again. A chunk's entries are buf[lo:hi]; the headRoom bytes before
//     lo and the tailRoom bytes after hi never held an entry, and only
//     the chunk's owner pushes into them. A pop moves lo or hi and leaves
//     no room on its side: the popped bytes, which a reply may hold, stay
//     as they were.

// qchunk is one chunk of a large list.
type qchunk struct {
	seq                int64
	owner              uint64 // the id of the quicklist that may change the chunk in place
	n                  int    // entries in buf[lo:hi]
	lo, hi             int
	headRoom, tailRoom int    // buf[lo-headRoom:lo] and buf[hi:hi+tailRoom] never held an entry
	buf                []byte // len(buf) == cap(buf)
}

// quicklist is a list's large form.
type quicklist struct {
	chunks *btree.BTreeG[*qchunk]
	id     uint64 // see qchunk.owner
	n      int64  // elements
	bytes  int64  // size(): the structure and each chunk's buffer
	gen    uint64
}

const (
	// listChunkTarget is the entry bytes a chunk is filled to before the
	// next one starts. It bounds the copy an LSET or LINSERT makes and the
	// walk to an element inside a chunk.
	listChunkTarget = 1024
	// listSeqGap is the room left between the sequence numbers of chunks
	// pushed at either end.
	listSeqGap = 1 << 32
	// Estimated overheads, for size(): a chunk's header and its slot in
	// the tree (with the slack of half-full nodes), and the structure
	// itself.
	listChunkCost     = 96
	listQuicklistCost = 96
)

var listChunkTreeOptions = btree.Options{NoLocks: true, Degree: 32}

func listChunkLess(a, b *qchunk) bool { return a.seq < b.seq }

// listIDs hands out quicklist ids. Ids only say who owns a chunk, never
// what a command answers, so drawing them from a shared counter keeps
// apply deterministic.
var listIDs atomic.Uint64

func newQuicklist() *quicklist {
	return &quicklist{chunks: btree.NewBTreeGOptions(listChunkLess, listChunkTreeOptions),
		id: listIDs.Add(1), bytes: listQuicklistCost}
}

func (q *quicklist) size() int64     { return q.bytes }
func (q *quicklist) cowGen() *uint64 { return &q.gen }
func (q *quicklist) freeEffort() int { return q.chunks.Len() }

// clone is O(1). The original and the copy both get new ids, so that
// neither changes a chunk they share (see the top of this file).
func (q *quicklist) clone() object {
	q.id = listIDs.Add(1)
	return &quicklist{chunks: q.chunks.Copy(), id: listIDs.Add(1), n: q.n, bytes: q.bytes, gen: q.gen}
}

// Entry encoding. listAppendEntry and listNextEntry are the packed form's
// (and snapshot restore's); the chunk functions are the large form's.

func listAppendEntry(buf, e []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(e)))
	return append(buf, e...)
}

func listEntrySize(e []byte) int { return listUvarintLen(uint64(len(e))) + len(e) }

func listUvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// listNextEntry returns the entry at buf[off:] (its capacity clipped, so no
// caller can append into the store) and the offset after it. The bytes
// were validated when they entered the store.
func listNextEntry(buf []byte, off int) ([]byte, int) {
	l, n := binary.Uvarint(buf[off:])
	off += n
	end := off + int(l)
	return buf[off:end:end], end
}

// listEntries decodes n packed entries of buf, appending aliases of them
// to dst.
func listEntries(dst [][]byte, buf []byte, n int) [][]byte {
	off := 0
	for range n {
		var e []byte
		e, off = listNextEntry(buf, off)
		dst = append(dst, e)
	}
	return dst
}

// listEntriesBytes is the size of elems' packed entries.
func listEntriesBytes(elems [][]byte) int {
	n := 0
	for _, e := range elems {
		n += listEntrySize(e)
	}
	return n
}

func chunkEntrySize(e []byte) int { return 2*listUvarintLen(uint64(len(e))) + len(e) }

// putChunkEntry writes e's chunk entry at the start of dst, which has
// exactly chunkEntrySize(e) bytes.
func putChunkEntry(dst, e []byte) {
	k := binary.PutUvarint(dst, uint64(len(e)))
	copy(dst[k:], e)
	tail := dst[k+len(e):]
	for i := range k {
		tail[i] = dst[k-1-i]
	}
}

// chunkNext returns the entry starting at buf[off] (its capacity clipped)
// and the offset after it.
func chunkNext(buf []byte, off int) ([]byte, int) {
	l, k := binary.Uvarint(buf[off:])
	off += k
	end := off + int(l)
	return buf[off:end:end], end + k
}

// chunkPrev returns the entry ending at buf[end] (its capacity clipped)
// and the offset where it starts.
func chunkPrev(buf []byte, end int) ([]byte, int) {
	var l uint64
	k := 0
	for shift := 0; ; shift += 7 {
		b := buf[end-1-k]
		k++
		l |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	stop := end - k
	start := stop - int(l)
	return buf[start:stop:stop], start - k
}

// entries appends aliases of c's entries to dst.
func (c *qchunk) entries(dst [][]byte) [][]byte {
	for off := c.lo; off < c.hi; {
		var e []byte
		e, off = chunkNext(c.buf, off)
		dst = append(dst, e)
	}
	return dst
}

// entryAt returns the offsets of c's entry j (0 <= j < c.n), walking from
// the nearer end.
func (c *qchunk) entryAt(j int) (start, end int) {
	if j < c.n/2 {
		start = c.lo
		for range j {
			_, start = chunkNext(c.buf, start)
		}
		_, end = chunkNext(c.buf, start)
		return start, end
	}
	end = c.hi
	for range c.n - 1 - j {
		_, end = chunkPrev(c.buf, end)
	}
	_, start = chunkPrev(c.buf, end)
	return start, end
}

// packedChunk is a new chunk holding elems' entries, exactly sized.
func packedChunk(elems [][]byte) *qchunk {
	size := 0
	for _, e := range elems {
		size += chunkEntrySize(e)
	}
	buf := make([]byte, size)
	off := 0
	for _, e := range elems {
		sz := chunkEntrySize(e)
		putChunkEntry(buf[off:off+sz], e)
		off += sz
	}
	return &qchunk{n: len(elems), hi: size, buf: buf}
}

// listPackChunks splits elems into chunks of about listChunkTarget bytes.
func listPackChunks(elems [][]byte, fn func(c *qchunk)) {
	start, size := 0, 0
	for i, e := range elems {
		sz := chunkEntrySize(e)
		if i > start && size+sz > listChunkTarget {
			fn(packedChunk(elems[start:i]))
			start, size = i, 0
		}
		size += sz
	}
	if start < len(elems) {
		fn(packedChunk(elems[start:]))
	}
}

// quicklistOf builds a large list of elems (their bytes are copied into
// chunks).
func quicklistOf(elems [][]byte) *quicklist {
	q := newQuicklist()
	seq := int64(0)
	listPackChunks(elems, func(c *qchunk) {
		c.seq = seq
		q.addChunk(c)
		seq += listSeqGap
	})
	return q
}

// addChunk inserts the new chunk c, which q then owns.
func (q *quicklist) addChunk(c *qchunk) {
	c.owner = q.id
	q.bytes += int64(len(c.buf)) + listChunkCost
	q.n += int64(c.n)
	q.chunks.Set(c)
}

func (q *quicklist) deleteChunk(c *qchunk) {
	q.bytes -= int64(len(c.buf)) + listChunkCost
	q.n -= int64(c.n)
	q.chunks.Delete(c)
}

// mut returns c ready to be changed in place: c itself when q owns it,
// else a copy of its header that q owns, in c's place in the tree. The
// copy shares c's bytes but none of their room, which c's other holders
// may still push into.
func (q *quicklist) mut(c *qchunk) *qchunk {
	if c.owner == q.id {
		return c
	}
	m := *c
	m.owner, m.headRoom, m.tailRoom = q.id, 0, 0
	q.chunks.Set(&m)
	return &m
}

// rebuffer gives the chunk c (owned by q) a new buffer of listChunkTarget
// bytes (or just enough for its entries and need more) holding its
// entries, with the room on the side a push of need bytes will use: the
// front for a head push, the back for a tail push, split evenly when c is
// the only chunk and so both ends' room.
func (q *quicklist) rebuffer(c *qchunk, need int, head bool) {
	used := c.hi - c.lo
	size := max(listChunkTarget, used+need)
	buf := make([]byte, size)
	at := 0 // a tail push's room: all of it at the back
	switch {
	case q.chunks.Len() == 1 && head:
		at = max((size-used)/2, need)
	case q.chunks.Len() == 1:
		at = min((size-used)/2, size-used-need)
	case head:
		at = size - used
	}
	copy(buf[at:], c.buf[c.lo:c.hi])
	q.bytes += int64(size - len(c.buf))
	c.buf, c.lo, c.hi, c.headRoom, c.tailRoom = buf, at, at+used, at, size-at-used
}

func (q *quicklist) pushHead(e []byte) {
	sz := chunkEntrySize(e)
	c, ok := q.chunks.Min()
	switch {
	case ok && c.owner == q.id && c.headRoom >= sz:
	case ok && c.hi-c.lo+sz <= listChunkTarget:
		c = q.mut(c)
		q.rebuffer(c, sz, true)
	default:
		seq := int64(0)
		if ok {
			seq = c.seq - listSeqGap
		}
		size := max(sz, listChunkTarget)
		c = &qchunk{seq: seq, lo: size, hi: size, headRoom: size, buf: make([]byte, size)}
		q.addChunk(c)
	}
	c.lo -= sz
	c.headRoom -= sz
	putChunkEntry(c.buf[c.lo:c.lo+sz], e)
	c.n++
	q.n++
}

func (q *quicklist) pushTail(e []byte) {
	sz := chunkEntrySize(e)
	c, ok := q.chunks.Max()
	switch {
	case ok && c.owner == q.id && c.tailRoom >= sz:
	case ok && c.hi-c.lo+sz <= listChunkTarget:
		c = q.mut(c)
		q.rebuffer(c, sz, false)
	default:
		seq := int64(0)
		if ok {
			seq = c.seq + listSeqGap
		}
		size := max(sz, listChunkTarget)
		c = &qchunk{seq: seq, tailRoom: size, buf: make([]byte, size)}
		q.addChunk(c)
	}
	putChunkEntry(c.buf[c.hi:c.hi+sz], e)
	c.hi += sz
	c.tailRoom -= sz
	c.n++
	q.n++
}

func (q *quicklist) popHead() []byte {
	c, _ := q.chunks.Min()
	e, next := chunkNext(c.buf, c.lo)
	if c.n == 1 {
		q.deleteChunk(c)
		return e
	}
	c = q.mut(c)
	c.lo, c.headRoom = next, 0
	c.n--
	q.n--
	return e
}

func (q *quicklist) popTail() []byte {
	c, _ := q.chunks.Max()
	e, start := chunkPrev(c.buf, c.hi)
	if c.n == 1 {
		q.deleteChunk(c)
		return e
	}
	c = q.mut(c)
	c.hi, c.tailRoom = start, 0
	c.n--
	q.n--
	return e
}

// locate returns the chunk holding element i (0 <= i < n) and i's index
// in it, walking from the nearer end.
func (q *quicklist) locate(i int64) (*qchunk, int) {
	var found *qchunk
	var at int
	if i < q.n/2 {
		q.chunks.Scan(func(c *qchunk) bool {
			if i < int64(c.n) {
				found, at = c, int(i)
				return false
			}
			i -= int64(c.n)
			return true
		})
	} else {
		back := q.n - 1 - i // elements after i
		q.chunks.Reverse(func(c *qchunk) bool {
			if back < int64(c.n) {
				found, at = c, c.n-1-int(back)
				return false
			}
			back -= int64(c.n)
			return true
		})
	}
	return found, at
}

func (q *quicklist) index(i int64) []byte {
	c, j := q.locate(i)
	start, _ := c.entryAt(j)
	e, _ := chunkNext(c.buf, start)
	return e
}

// set replaces element i (0 <= i < n) with v: in a new buffer for its
// chunk, which is split only if it grows past listChunkTarget.
func (q *quicklist) set(i int64, v []byte) {
	c, j := q.locate(i)
	start, end := c.entryAt(j)
	size := c.hi - c.lo - (end - start) + chunkEntrySize(v)
	if size > listChunkTarget && c.n > 1 {
		elems := c.entries(nil)
		elems[j] = v
		q.replace(c, elems)
		return
	}
	buf := make([]byte, size)
	k := copy(buf, c.buf[c.lo:start])
	sz := chunkEntrySize(v)
	putChunkEntry(buf[k:k+sz], v)
	copy(buf[k+sz:], c.buf[end:c.hi])
	c = q.mut(c)
	q.bytes += int64(size - len(c.buf))
	c.buf, c.lo, c.hi, c.headRoom, c.tailRoom = buf, 0, size, 0, 0
}

// rangeFrom calls fn for the elements from index start (0 <= start < n)
// towards the tail, until fn returns false.
func (q *quicklist) rangeFrom(start int64, fn func(e []byte) bool) {
	c, j := q.locate(start)
	off, _ := c.entryAt(j)
	q.chunks.Ascend(c, func(c *qchunk) bool {
		if off < 0 {
			off = c.lo
		}
		for off < c.hi {
			var e []byte
			e, off = chunkNext(c.buf, off)
			if !fn(e) {
				return false
			}
		}
		off = -1
		return true
	})
}

// reverseFrom calls fn for the elements from index start towards the
// head, until fn returns false.
func (q *quicklist) reverseFrom(start int64, fn func(e []byte) bool) {
	c, j := q.locate(start)
	_, end := c.entryAt(j)
	q.chunks.Descend(c, func(c *qchunk) bool {
		if end < 0 {
			end = c.hi
		}
		for end > c.lo {
			var e []byte
			e, end = chunkPrev(c.buf, end)
			if !fn(e) {
				return false
			}
		}
		end = -1
		return true
	})
}

// replace stores elems in place of chunk c: as one chunk or several (c's
// sequence number and numbers before the next chunk's), or none.
func (q *quicklist) replace(c *qchunk, elems [][]byte) {
	var chunks []*qchunk
	listPackChunks(elems, func(c *qchunk) { chunks = append(chunks, c) })
	seq := c.seq
	step := int64(listSeqGap)
	if next, ok := q.successor(seq); ok {
		if next-seq < int64(len(chunks)) {
			// No numbers left between c and its successor.
			seq = q.renumber(seq)
			next = seq + listSeqGap
		}
		step = (next - seq) / int64(max(len(chunks), 1))
	}
	q.deleteChunk(&qchunk{seq: seq, n: c.n, buf: c.buf})
	for k, nc := range chunks {
		nc.seq = seq + int64(k)*step
		q.addChunk(nc)
	}
}

// successor returns the sequence number of the chunk after seq.
func (q *quicklist) successor(seq int64) (next int64, ok bool) {
	if seq == maxInt64 {
		return 0, false
	}
	q.chunks.Ascend(&qchunk{seq: seq + 1}, func(c *qchunk) bool {
		next, ok = c.seq, true
		return false
	})
	return next, ok
}

// renumber gives the chunks sequence numbers listSeqGap apart, keeping their
// order, and returns the new number of the chunk numbered seq. The chunks
// get new headers (a clone may share the old ones).
func (q *quicklist) renumber(seq int64) int64 {
	t := btree.NewBTreeGOptions(listChunkLess, listChunkTreeOptions)
	next, moved := int64(0), int64(0)
	q.chunks.Scan(func(c *qchunk) bool {
		if c.seq == seq {
			moved = next
		}
		m := *c
		if m.owner != q.id {
			m.owner, m.headRoom, m.tailRoom = q.id, 0, 0
		}
		m.seq = next
		t.Load(&m)
		next += listSeqGap
		return true
	})
	q.chunks = t
	return moved
}

// trim removes l elements from the head and r from the tail.
func (q *quicklist) trim(l, r int64) {
	for l > 0 {
		c, _ := q.chunks.Min()
		if int64(c.n) <= l {
			l -= int64(c.n)
			q.deleteChunk(c)
			continue
		}
		start, _ := c.entryAt(int(l))
		c = q.mut(c)
		c.lo, c.headRoom, c.n = start, 0, c.n-int(l)
		q.n -= l
		l = 0
	}
	for r > 0 {
		c, _ := q.chunks.Max()
		if int64(c.n) <= r {
			r -= int64(c.n)
			q.deleteChunk(c)
			continue
		}
		_, end := c.entryAt(c.n - 1 - int(r))
		c = q.mut(c)
		c.hi, c.tailRoom, c.n = end, 0, c.n-int(r)
		q.n -= r
		r = 0
	}
}

// elementsOf returns every element of the list, head to tail.
func (q *quicklist) elementsOf() [][]byte {
	out := make([][]byte, 0, q.n)
	q.chunks.Scan(func(c *qchunk) bool {
		out = c.entries(out)
		return true
	})
	return out
}
