package fsm

import (
	"encoding/binary"

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
// each holding up to about listChunkTarget bytes of listEntries in the same entry
// format, ordered by a sequence number that leaves room between
// neighbours (a chunk split by LINSERT takes numbers between its own and
// the next one's; when none are left, the chunks are renumbered). Pushes
// and pops touch the chunk at their end, so they cost O(log chunks) plus
// the chunk's size; LINDEX, LSET and LRANGE walk the chunks from the
// nearer end, counting elements, as Redis walks its quicklist nodes.
//
// Chunks are values in the tree and their bytes are never changed below
// their length: a snapshot (or a reply) that holds a chunk sees its
// listEntries unchanged. RPUSH appends to the last chunk in its spare
// capacity, which no one else can see; every operation that shortens a
// chunk at its end clips its capacity, so bytes once visible are never
// written again, and clone clips the last chunk of the copy it returns so
// the two can never both append into one array.

// qchunk is one chunk of a large list.
type qchunk struct {
	seq int64
	n   int    // listEntries in buf
	buf []byte // listEntries; the capacity past len may be written only by the live list's tail push
}

// quicklist is a list's large form.
type quicklist struct {
	chunks *btree.BTreeG[qchunk]
	n      int64 // elements
	bytes  int64 // size(): the structure and each chunk's buffer
	gen    uint64
}

const (
	// listChunkTarget is the entry bytes a chunk is filled to before the next
	// one starts. It bounds the copy an LPUSH or LSET makes and the scan
	// that finds a chunk's last entry.
	listChunkTarget = 1024
	// listSeqGap is the room left between the sequence numbers of chunks
	// listPushed at either end.
	listSeqGap = 1 << 32
	// Estimated overheads, for size(): a chunk's slot in the tree (with
	// the slack of half-full nodes) and the structure itself.
	listChunkCost     = 64
	listQuicklistCost = 96
)

var listChunkTreeOptions = btree.Options{NoLocks: true, Degree: 32}

func listChunkLess(a, b qchunk) bool { return a.seq < b.seq }

func newQuicklist() *quicklist {
	return &quicklist{chunks: btree.NewBTreeGOptions(listChunkLess, listChunkTreeOptions), bytes: listQuicklistCost}
}

func (q *quicklist) size() int64     { return q.bytes }
func (q *quicklist) cowGen() *uint64 { return &q.gen }

// clone is O(1) but for clipping the copy's last chunk (see the top of
// this file).
func (q *quicklist) clone() object {
	c := &quicklist{chunks: q.chunks.Copy(), n: q.n, bytes: q.bytes, gen: q.gen}
	if last, ok := c.chunks.Max(); ok && cap(last.buf) > len(last.buf) {
		c.bytes -= int64(cap(last.buf) - len(last.buf))
		last.buf = last.buf[:len(last.buf):len(last.buf)]
		c.chunks.Set(last)
	}
	return c
}

// Entry encoding, shared by both forms.

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

// listEntries decodes n listEntries of buf, appending aliases of them to dst.
func listEntries(dst [][]byte, buf []byte, n int) [][]byte {
	off := 0
	for range n {
		var e []byte
		e, off = listNextEntry(buf, off)
		dst = append(dst, e)
	}
	return dst
}

// listPackChunks splits elems into chunk buffers of about listChunkTarget bytes.
func listPackChunks(elems [][]byte, fn func(buf []byte, n int)) {
	var buf []byte
	n := 0
	for _, e := range elems {
		sz := listEntrySize(e)
		if n > 0 && len(buf)+sz > listChunkTarget {
			fn(buf, n)
			buf, n = nil, 0
		}
		if buf == nil {
			buf = make([]byte, 0, max(sz, min(listChunkTarget, listEntriesBytes(elems))))
		}
		buf = listAppendEntry(buf, e)
		n++
	}
	if n > 0 {
		fn(buf[:len(buf):len(buf)], n)
	}
}

// listEntriesBytes is the size of elems' listEntries.
func listEntriesBytes(elems [][]byte) int {
	n := 0
	for _, e := range elems {
		n += listEntrySize(e)
	}
	return n
}

// quicklistOf builds a large list of elems (not copied into the tree's
// ownership: their bytes are copied into chunks).
func quicklistOf(elems [][]byte) *quicklist {
	q := newQuicklist()
	q.appendChunks(elems)
	return q
}

// appendChunks adds elems at the tail as new chunks.
func (q *quicklist) appendChunks(elems [][]byte) {
	seq := int64(0)
	if last, ok := q.chunks.Max(); ok {
		seq = last.seq + listSeqGap
	}
	listPackChunks(elems, func(buf []byte, n int) {
		q.setChunk(qchunk{seq: seq, n: n, buf: buf}, nil)
		q.n += int64(n)
		seq += listSeqGap
	})
}

// setChunk stores c, replacing old (nil: a new chunk), keeping bytes.
func (q *quicklist) setChunk(c qchunk, old *qchunk) {
	if old != nil {
		q.bytes -= int64(cap(old.buf)) + listChunkCost
	}
	q.bytes += int64(cap(c.buf)) + listChunkCost
	q.chunks.Set(c)
}

func (q *quicklist) deleteChunk(c qchunk) {
	q.bytes -= int64(cap(c.buf)) + listChunkCost
	q.chunks.Delete(c)
}

func (q *quicklist) pushTail(e []byte) {
	sz := listEntrySize(e)
	last, ok := q.chunks.Max()
	switch {
	case ok && len(last.buf)+sz <= cap(last.buf):
		// The spare capacity is this list's alone (see the top of the file).
		last.buf = listAppendEntry(last.buf, e)
		last.n++
		q.chunks.Set(last)
	case ok && len(last.buf)+sz <= listChunkTarget:
		old := last
		buf := make([]byte, len(last.buf), listChunkTarget)
		copy(buf, last.buf)
		last.buf = listAppendEntry(buf, e)
		last.n++
		q.setChunk(last, &old)
	default:
		seq := int64(0)
		if ok {
			seq = last.seq + listSeqGap
		}
		buf := make([]byte, 0, max(sz, listChunkTarget))
		q.setChunk(qchunk{seq: seq, n: 1, buf: listAppendEntry(buf, e)}, nil)
	}
	q.n++
}

func (q *quicklist) pushHead(e []byte) {
	sz := listEntrySize(e)
	first, ok := q.chunks.Min()
	if ok && len(first.buf)+sz <= listChunkTarget {
		old := first
		buf := make([]byte, 0, len(first.buf)+sz)
		buf = listAppendEntry(buf, e)
		first.buf = append(buf, first.buf...)
		first.n++
		q.setChunk(first, &old)
	} else {
		seq := int64(0)
		if ok {
			seq = first.seq - listSeqGap
		}
		q.setChunk(qchunk{seq: seq, n: 1, buf: listAppendEntry(make([]byte, 0, sz), e)}, nil)
	}
	q.n++
}

func (q *quicklist) popHead() []byte {
	first, _ := q.chunks.Min()
	e, off := listNextEntry(first.buf, 0)
	if first.n == 1 {
		q.deleteChunk(first)
	} else {
		old := first
		first.buf = first.buf[off:]
		first.n--
		q.setChunk(first, &old)
	}
	q.n--
	return e
}

func (q *quicklist) popTail() []byte {
	last, _ := q.chunks.Max()
	off := listLastEntryOffset(last)
	e, _ := listNextEntry(last.buf, off)
	if last.n == 1 {
		q.deleteChunk(last)
	} else {
		old := last
		last.buf = last.buf[:off:off]
		last.n--
		q.setChunk(last, &old)
	}
	q.n--
	return e
}

// listLastEntryOffset is where c's last entry starts.
func listLastEntryOffset(c qchunk) int {
	off := 0
	for range c.n - 1 {
		_, off = listNextEntry(c.buf, off)
	}
	return off
}

// locate returns the chunk holding element i (0 <= i < n) and i's index
// in it, walking from the nearer end.
func (q *quicklist) locate(i int64) (qchunk, int) {
	var found qchunk
	var at int
	if i < q.n/2 {
		q.chunks.Scan(func(c qchunk) bool {
			if i < int64(c.n) {
				found, at = c, int(i)
				return false
			}
			i -= int64(c.n)
			return true
		})
	} else {
		back := q.n - 1 - i // elements after i
		q.chunks.Reverse(func(c qchunk) bool {
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
	off := 0
	var e []byte
	for range j + 1 {
		e, off = listNextEntry(c.buf, off)
	}
	return e
}

// set replaces element i (0 <= i < n) with v: in a new buffer for its
// chunk, which is split only if it grows past listChunkTarget.
func (q *quicklist) set(i int64, v []byte) {
	c, j := q.locate(i)
	start := 0
	for range j {
		_, start = listNextEntry(c.buf, start)
	}
	_, end := listNextEntry(c.buf, start)
	size := len(c.buf) - (end - start) + listEntrySize(v)
	if size > listChunkTarget && c.n > 1 {
		elems := listEntries(nil, c.buf, c.n)
		elems[j] = v
		q.replace(c, elems)
		return
	}
	old := c
	buf := make([]byte, 0, size)
	buf = append(buf, c.buf[:start]...)
	buf = listAppendEntry(buf, v)
	c.buf = append(buf, c.buf[end:]...)
	q.setChunk(c, &old)
}

// rangeFrom calls fn for the elements from index start (0 <= start < n)
// towards the tail, until fn returns false.
func (q *quicklist) rangeFrom(start int64, fn func(e []byte) bool) {
	c, j := q.locate(start)
	q.chunks.Ascend(c, func(c qchunk) bool {
		off := 0
		for k := 0; k < c.n; k++ {
			var e []byte
			e, off = listNextEntry(c.buf, off)
			if k >= j && !fn(e) {
				return false
			}
		}
		j = 0
		return true
	})
}

// reverseFrom calls fn for the elements from index start towards the
// head, until fn returns false.
func (q *quicklist) reverseFrom(start int64, fn func(e []byte) bool) {
	c, j := q.locate(start)
	var scratch [][]byte
	q.chunks.Descend(c, func(c qchunk) bool {
		scratch = listEntries(scratch[:0], c.buf, c.n)
		if j < 0 {
			j = c.n - 1
		}
		for k := j; k >= 0; k-- {
			if !fn(scratch[k]) {
				return false
			}
		}
		j = -1
		return true
	})
}

// replace stores elems in place of chunk c: as one chunk or several (c's
// sequence number and numbers before the next chunk's), or none.
func (q *quicklist) replace(c qchunk, elems [][]byte) {
	var bufs [][]byte
	var ns []int
	listPackChunks(elems, func(buf []byte, n int) {
		bufs = append(bufs, buf)
		ns = append(ns, n)
	})
	step := int64(listSeqGap)
	if next, ok := q.successor(c.seq); ok {
		if next-c.seq < int64(len(bufs)) {
			// No numbers left between c and its successor.
			c.seq = q.renumber(c.seq)
			next = c.seq + listSeqGap
		}
		step = (next - c.seq) / int64(max(len(bufs), 1))
	}
	q.deleteChunk(c)
	q.n -= int64(c.n)
	for k, buf := range bufs {
		q.setChunk(qchunk{seq: c.seq + int64(k)*step, n: ns[k], buf: buf}, nil)
		q.n += int64(ns[k])
	}
}

// successor returns the sequence number of the chunk after seq.
func (q *quicklist) successor(seq int64) (next int64, ok bool) {
	if seq == maxInt64 {
		return 0, false
	}
	q.chunks.Ascend(qchunk{seq: seq + 1}, func(c qchunk) bool {
		next, ok = c.seq, true
		return false
	})
	return next, ok
}

// renumber gives the chunks sequence numbers listSeqGap apart, keeping their
// order, and returns the new number of the chunk numbered seq.
func (q *quicklist) renumber(seq int64) int64 {
	t := btree.NewBTreeGOptions(listChunkLess, listChunkTreeOptions)
	next, moved := int64(0), int64(0)
	q.chunks.Scan(func(c qchunk) bool {
		if c.seq == seq {
			moved = next
		}
		c.seq = next
		t.Set(c)
		next += listSeqGap
		return true
	})
	q.chunks = t
	return moved
}

// elementsOf returns every element of the list, head to tail.
func (q *quicklist) elementsOf() [][]byte {
	out := make([][]byte, 0, q.n)
	q.chunks.Scan(func(c qchunk) bool {
		out = listEntries(out, c.buf, c.n)
		return true
	})
	return out
}
