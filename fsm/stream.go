package fsm

import (
	"encoding/binary"
	"strconv"
	"unsafe"

	"github.com/tidwall/btree"
)

// Streams. A stream is held as Redis holds it: a sorted run of nodes, each
// a flat buffer of up to stream-node-max-entries entries (Redis's radix
// tree of listpacks). A node is immutable once a snapshot may see it: a
// write to a node builds a new one (appending to the tail node's buffer
// reuses its spare capacity, which no alias can see, and which a clone's
// tail does not have: see clone). Nodes split where
// Redis's do: each node keeps the byte size Redis's listpack of the same
// entries would have and its count of deleted entries, so approximate
// trimming (MAXLEN ~, MINID ~), which removes whole nodes only, removes
// the entries Redis removes. The command carries stream-node-max-bytes
// and stream-node-max-entries as the server had them, so every replica
// splits alike.
//
// Consumer groups are kept sorted by name, each with its pending entries
// list (PEL) in a copy-on-write B-tree by ID and its consumers sorted by
// name, each with the IDs it owns.

// streamID is an entry's ID: milliseconds and sequence.
type streamID struct{ ms, seq uint64 }

func (a streamID) cmp(b streamID) int {
	switch {
	case a.ms > b.ms:
		return 1
	case a.ms < b.ms:
		return -1
	case a.seq > b.seq:
		return 1
	case a.seq < b.seq:
		return -1
	}
	return 0
}

func (a streamID) less(b streamID) bool { return a.cmp(b) < 0 }
func (a streamID) isZero() bool         { return a.ms == 0 && a.seq == 0 }

var (
	streamIDMin = streamID{}
	streamIDMax = streamID{^uint64(0), ^uint64(0)}
)

// incr is streamIncrID: false (and 0-0) past the last ID.
func (a streamID) incr() (streamID, bool) {
	switch {
	case a.seq != ^uint64(0):
		a.seq++
	case a.ms != ^uint64(0):
		a.ms++
		a.seq = 0
	default:
		return streamID{}, false
	}
	return a, true
}

// decr is streamDecrID: false (and the last ID) before 0-0.
func (a streamID) decr() (streamID, bool) {
	switch {
	case a.seq != 0:
		a.seq--
	case a.ms != 0:
		a.ms--
		a.seq = ^uint64(0)
	default:
		return streamIDMax, false
	}
	return a, true
}

func (a streamID) appendTo(b []byte) []byte {
	b = strconv.AppendUint(b, a.ms, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, a.seq, 10)
}

func (a streamID) String() string { return string(a.appendTo(nil)) }

func (a streamID) reply() Reply { return BulkReply(a.appendTo(make([]byte, 0, 24))) }

// streamNode is one node: its entries' IDs and fields packed in buf,
// each as uvarint ms, uvarint seq, uvarint number of pairs, then each
// field and value as uvarint length and bytes. Deleted entries leave
// the buffer but are counted in deleted, and last stays the ID of the
// last entry ever appended, as Redis's listpack keeps its tombstones.
type streamNode struct {
	master  streamID // the first entry ever appended (the radix tree key)
	last    streamID // the last entry ever appended
	count   int32    // live entries
	deleted int32    // deleted entries
	// fields is the master entry's field names (uvarint length, bytes).
	fields  []byte
	nfields int
	// lpFixed is the bytes of Redis's listpack for the node, less its
	// count and deleted elements, whose size depends on their value.
	lpFixed int
	buf     []byte
}

// lpBytes is what lpBytes says of Redis's listpack for the node.
func (n *streamNode) lpBytes() int {
	return n.lpFixed + lpIntElemSize(int64(n.count)) + lpIntElemSize(int64(n.deleted))
}

// lpIntElemSize is the size of an integer element of a listpack
// (encoding and back length).
func lpIntElemSize(v int64) int {
	switch {
	case v >= 0 && v <= 127:
		return 2
	case v >= -4096 && v <= 4095:
		return 3
	case v >= -32768 && v <= 32767:
		return 4
	case v >= -8388608 && v <= 8388607:
		return 5
	case v >= -2147483648 && v <= 2147483647:
		return 6
	}
	return 10
}

// lpStrElemSize is the size of a string element of a listpack (which
// keeps a string that reads as an integer as that integer).
func lpStrElemSize(s []byte) int {
	if len(s) < 21 {
		if v, ok := parseInt(s); ok {
			return lpIntElemSize(v)
		}
	}
	l := len(s)
	var enc int
	switch {
	case l < 64:
		enc = 1 + l
	case l < 4096:
		enc = 2 + l
	default:
		enc = 5 + l
	}
	switch {
	case enc <= 127:
		return enc + 1
	case enc < 16383:
		return enc + 2
	case enc < 2097151:
		return enc + 3
	case enc < 268435455:
		return enc + 4
	}
	return enc + 5
}

// streamEntry is one entry as read from a node: fields and values alias
// the node's buffer.
type streamEntry struct {
	id    streamID
	pairs [][]byte // field, value, field, value, ...
	off   int      // offset of the entry in its node's buffer
	end   int      // offset just past it
}

// decodeEntry reads the entry at off of buf.
func decodeEntry(buf []byte, off int, withPairs bool) streamEntry {
	e := streamEntry{off: off}
	p := off
	ms, n := binary.Uvarint(buf[p:])
	p += n
	seq, n := binary.Uvarint(buf[p:])
	p += n
	np, n := binary.Uvarint(buf[p:])
	p += n
	e.id = streamID{ms, seq}
	if withPairs {
		e.pairs = make([][]byte, 0, 2*np)
	}
	for i := uint64(0); i < 2*np; i++ {
		l, n := binary.Uvarint(buf[p:])
		p += n
		if withPairs {
			e.pairs = append(e.pairs, buf[p:p+int(l):p+int(l)])
		}
		p += int(l)
	}
	e.end = p
	return e
}

// entries returns the node's live entries.
func (n *streamNode) entries(withPairs bool) []streamEntry {
	out := make([]streamEntry, 0, n.count)
	for p := 0; p < len(n.buf); {
		e := decodeEntry(n.buf, p, withPairs)
		out = append(out, e)
		p = e.end
	}
	return out
}

func appendEntry(buf []byte, id streamID, pairs [][]byte) []byte {
	buf = binary.AppendUvarint(buf, id.ms)
	buf = binary.AppendUvarint(buf, id.seq)
	buf = binary.AppendUvarint(buf, uint64(len(pairs)/2))
	for _, b := range pairs {
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	return buf
}

// streamGroup is a consumer group.
type streamGroup struct {
	name        string
	lastID      streamID
	entriesRead int64 // -1: not known (SCG_INVALID_ENTRIES_READ)
	pel         *btree.BTreeG[streamNack]
	consumers   []*streamConsumer // by name
}

// streamNack is an entry delivered and not yet acknowledged.
type streamNack struct {
	id       streamID
	time     int64 // last delivery, Unix ms
	count    int64 // deliveries
	consumer string
}

type streamConsumer struct {
	name string
	seen int64 // Unix ms of its last attempted interaction
	pel  *btree.BTreeG[streamID]
}

func nackLess(a, b streamNack) bool { return a.id.less(b.id) }
func idLess(a, b streamID) bool     { return a.less(b) }

func newPEL() *btree.BTreeG[streamNack] { return btree.NewBTreeGOptions(nackLess, treeOptions) }
func newCPEL() *btree.BTreeG[streamID]  { return btree.NewBTreeGOptions(idLess, treeOptions) }

// stream is a stream's value (item.obj).
type stream struct {
	nodes        []*streamNode
	length       int64
	lastID       streamID
	firstID      streamID
	maxDeleted   streamID
	entriesAdded int64
	groups       []*streamGroup // by name
	gen          uint64
	bytes        int64
	nbytes       int64 // the nodes' part of bytes, kept as nodes change
}

const (
	streamObjBytes  = int64(unsafe.Sizeof(stream{})) + 16
	streamNodeBytes = int64(unsafe.Sizeof(streamNode{})) + 8
	streamNackBytes = int64(unsafe.Sizeof(streamNack{})) + int64(unsafe.Sizeof(streamID{}))
)

func newStream() *stream { return &stream{bytes: streamObjBytes} }

func (s *stream) clone() object {
	c := *s
	c.nodes = append([]*streamNode(nil), s.nodes...)
	if len(c.nodes) > 0 {
		// The tail node's spare capacity is the original's to append
		// into (a COPY's source goes on appending, and the copy too):
		// the clone's tail gets none, so its first append reallocates.
		t := *c.nodes[len(c.nodes)-1]
		t.buf = t.buf[:len(t.buf):len(t.buf)]
		c.nbytes += nodeBytes(&t) - nodeBytes(c.nodes[len(c.nodes)-1])
		c.nodes[len(c.nodes)-1] = &t
	}
	c.groups = make([]*streamGroup, len(s.groups))
	for i, g := range s.groups {
		c.groups[i] = g.clone()
	}
	return &c
}

func (g *streamGroup) clone() *streamGroup {
	c := *g
	c.pel = g.pel.Copy()
	c.consumers = make([]*streamConsumer, len(g.consumers))
	for i, cs := range g.consumers {
		cc := *cs
		cc.pel = cs.pel.Copy()
		c.consumers[i] = &cc
	}
	return &c
}

func (s *stream) size() int64       { return s.bytes }
func (s *stream) cowGen() *uint64   { return &s.gen }
func (s *stream) freeEffort() int   { return len(s.nodes) + len(s.groups) }
func nodeBytes(n *streamNode) int64 { return streamNodeBytes + int64(cap(n.buf)+len(n.fields)) }

// recount recomputes bytes from every node and group.
func (s *stream) recount() {
	s.nbytes = 0
	for _, n := range s.nodes {
		s.nbytes += nodeBytes(n)
	}
	s.recountGroups()
}

// recountGroups recomputes bytes after a change of nodes (whose part
// nbytes follows) or of groups and PELs.
func (s *stream) recountGroups() {
	b := streamObjBytes + s.nbytes
	for _, g := range s.groups {
		b += int64(len(g.name)) + 64 + int64(g.pel.Len())*streamNackBytes
		for _, c := range g.consumers {
			b += int64(len(c.name)) + 48
		}
	}
	s.bytes = b
}

// nodeFor returns the index of the first node whose last ID is >= id.
func (s *stream) nodeFor(id streamID) int {
	lo, hi := 0, len(s.nodes)
	for lo < hi {
		m := (lo + hi) / 2
		if s.nodes[m].last.less(id) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// rangeFn calls fn for each live entry with an ID in [start, end], in
// order (reversed when rev), until fn returns false.
func (s *stream) rangeFn(start, end streamID, rev bool, fn func(e streamEntry) bool) {
	if start.cmp(end) > 0 {
		return
	}
	if !rev {
		for i := s.nodeFor(start); i < len(s.nodes); i++ {
			n := s.nodes[i]
			if n.master.cmp(end) > 0 {
				return
			}
			for p := 0; p < len(n.buf); {
				e := decodeEntry(n.buf, p, false)
				p = e.end
				if e.id.less(start) {
					continue
				}
				if e.id.cmp(end) > 0 {
					return
				}
				e = decodeEntry(n.buf, e.off, true)
				if !fn(e) {
					return
				}
			}
		}
		return
	}
	last := s.nodeFor(end)
	if last == len(s.nodes) {
		last--
	}
	for i := last; i >= 0; i-- {
		n := s.nodes[i]
		if n.last.less(start) {
			return
		}
		es := n.entries(true)
		for j := len(es) - 1; j >= 0; j-- {
			e := es[j]
			if e.id.cmp(end) > 0 {
				continue
			}
			if e.id.less(start) {
				return
			}
			if !fn(e) {
				return
			}
		}
	}
}

// lookup returns the live entry with id.
func (s *stream) lookup(id streamID) (streamEntry, bool) {
	var out streamEntry
	found := false
	s.rangeFn(id, id, false, func(e streamEntry) bool { out, found = e, true; return false })
	return out, found
}

// edgeID is streamGetEdgeID skipping tombstones: the first (or last) live
// ID, or the max (min) ID in an empty stream.
func (s *stream) edgeID(first bool) streamID {
	var id streamID
	found := false
	if first {
		s.rangeFn(streamIDMin, streamIDMax, false, func(e streamEntry) bool { id, found = e.id, true; return false })
		if !found {
			return streamIDMax
		}
	} else {
		s.rangeFn(streamIDMin, streamIDMax, true, func(e streamEntry) bool { id, found = e.id, true; return false })
	}
	return id
}

// append adds an entry with id (greater than lastID) at the tail, as
// streamAppendItem does, splitting nodes by maxBytes and maxEntries.
func (s *stream) append(id streamID, pairs [][]byte, maxBytes, maxEntries int64) {
	totelelen := 0
	for _, p := range pairs {
		totelelen += len(p)
	}
	numfields := len(pairs) / 2
	if maxBytes <= 0 || maxBytes > streamListpackMaxSize {
		maxBytes = streamListpackMaxSize
	}
	var tail *streamNode
	if len(s.nodes) > 0 {
		tail = s.nodes[len(s.nodes)-1]
		if int64(tail.lpBytes()+totelelen) >= maxBytes ||
			maxEntries > 0 && int64(tail.count+tail.deleted) >= maxEntries {
			tail = nil
		}
	}
	var n *streamNode
	var old int64
	sameFields := false
	if tail == nil {
		n = &streamNode{master: id, nfields: numfields}
		n.lpFixed = 7 + lpIntElemSize(int64(numfields)) + lpIntElemSize(0)
		for i := 0; i < numfields; i++ {
			f := pairs[2*i]
			n.fields = binary.AppendUvarint(n.fields, uint64(len(f)))
			n.fields = append(n.fields, f...)
			n.lpFixed += lpStrElemSize(f)
		}
		sameFields = true
		s.nodes = append(s.nodes, n)
	} else {
		c := *tail
		n = &c
		old = nodeBytes(tail)
		s.nodes[len(s.nodes)-1] = n
		if numfields == n.nfields {
			sameFields = true
			p := 0
			for i := 0; i < numfields; i++ {
				l, k := binary.Uvarint(n.fields[p:])
				p += k
				if string(n.fields[p:p+int(l)]) != string(pairs[2*i]) {
					sameFields = false
					break
				}
				p += int(l)
			}
		}
	}
	flags := int64(0)
	lpCount := int64(numfields) + 3
	if sameFields {
		flags = 2
	} else {
		lpCount += int64(numfields) + 1
	}
	size := lpIntElemSize(flags) + lpIntElemSize(int64(id.ms-n.master.ms)) + lpIntElemSize(int64(id.seq-n.master.seq))
	if !sameFields {
		size += lpIntElemSize(int64(numfields))
	}
	for i := 0; i < numfields; i++ {
		if !sameFields {
			size += lpStrElemSize(pairs[2*i])
		}
		size += lpStrElemSize(pairs[2*i+1])
	}
	size += lpIntElemSize(lpCount)
	n.lpFixed += size
	n.buf = appendEntry(n.buf, id, pairs)
	n.count++
	n.last = id
	s.nbytes += nodeBytes(n) - old
	s.length++
	s.entriesAdded++
	s.lastID = id
	if s.length == 1 {
		s.firstID = id
	}
}

// streamListpackMaxSize is STREAM_LISTPACK_MAX_SIZE.
const streamListpackMaxSize = 1 << 30

// removeAt deletes the live entry e of node i, as
// streamIteratorRemoveEntry does (a node left without live entries goes).
// It does not touch firstID or maxDeleted.
func (s *stream) removeAt(i int, e streamEntry) {
	n := s.nodes[i]
	s.length--
	s.nbytes -= nodeBytes(n)
	if n.count == 1 {
		s.nodes = append(s.nodes[:i], s.nodes[i+1:]...)
		return
	}
	c := *n
	c.buf = make([]byte, 0, len(n.buf)-(e.end-e.off))
	c.buf = append(c.buf, n.buf[:e.off]...)
	c.buf = append(c.buf, n.buf[e.end:]...)
	c.count--
	c.deleted++
	s.nodes[i] = &c
	s.nbytes += nodeBytes(&c)
}

// delete removes the entry id, reporting whether it was there (XDEL's
// streamDeleteItem, without its bookkeeping of first and max deleted).
func (s *stream) delete(id streamID) bool {
	i := s.nodeFor(id)
	if i == len(s.nodes) {
		return false
	}
	n := s.nodes[i]
	for p := 0; p < len(n.buf); {
		e := decodeEntry(n.buf, p, false)
		p = e.end
		if e.id == id {
			s.removeAt(i, e)
			return true
		}
		if id.less(e.id) {
			break
		}
	}
	return false
}

// Trim strategies.
const (
	trimNone = iota
	trimMaxLen
	trimMinID
)

// streamTrimArgs are the trimming options of XADD and XTRIM.
type streamTrimArgs struct {
	strategy int
	approx   bool
	limit    int64
	maxlen   int64
	minid    streamID
}

// trim is streamTrim: it returns the number of entries removed.
func (s *stream) trim(a *streamTrimArgs) int64 {
	if a.strategy == trimNone {
		return 0
	}
	var deleted int64
	for len(s.nodes) > 0 {
		if a.strategy == trimMaxLen && s.length <= a.maxlen {
			break
		}
		n := s.nodes[0]
		entries := int64(n.count)
		if a.limit != 0 && deleted+entries > a.limit {
			break
		}
		var remove bool
		if a.strategy == trimMaxLen {
			remove = s.length-entries >= a.maxlen
		} else {
			remove = n.last.less(a.minid)
		}
		if remove {
			s.nbytes -= nodeBytes(n)
			s.nodes = s.nodes[1:]
			s.length -= entries
			deleted += entries
			continue
		}
		if a.approx {
			break
		}
		// Delete from within the node.
		es := n.entries(false)
		k := 0
		for _, e := range es {
			var stop bool
			if a.strategy == trimMaxLen {
				stop = s.length <= a.maxlen
			} else {
				stop = e.id.cmp(a.minid) >= 0
			}
			if stop {
				break
			}
			k++
			s.length--
		}
		if k > 0 {
			c := *n
			c.buf = append([]byte(nil), n.buf[es[k-1].end:]...)
			c.count -= int32(k)
			c.deleted += int32(k)
			s.nodes[0] = &c
			s.nbytes += nodeBytes(&c) - nodeBytes(n)
			deleted += int64(k)
		}
		break
	}
	if s.length == 0 {
		s.firstID = streamID{}
	} else if deleted > 0 {
		s.firstID = s.edgeID(true)
	}
	return deleted
}

// group returns the group named name.
func (s *stream) group(name []byte) (*streamGroup, int) {
	lo, hi := 0, len(s.groups)
	for lo < hi {
		m := (lo + hi) / 2
		if s.groups[m].name < string(name) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.groups) && s.groups[lo].name == string(name) {
		return s.groups[lo], lo
	}
	return nil, lo
}

func (g *streamGroup) consumer(name []byte) (*streamConsumer, int) {
	lo, hi := 0, len(g.consumers)
	for lo < hi {
		m := (lo + hi) / 2
		if g.consumers[m].name < string(name) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(g.consumers) && g.consumers[lo].name == string(name) {
		return g.consumers[lo], lo
	}
	return nil, lo
}

// createConsumer adds a consumer (absent before) seen at now.
func (g *streamGroup) createConsumer(name []byte, now int64) *streamConsumer {
	c, i := g.consumer(name)
	if c != nil {
		return c
	}
	c = &streamConsumer{name: string(name), seen: now, pel: newCPEL()}
	g.consumers = append(g.consumers, nil)
	copy(g.consumers[i+1:], g.consumers[i:])
	g.consumers[i] = c
	return c
}

// rangeHasTombstones is streamRangeHasTombstones.
func (s *stream) rangeHasTombstones(start, end streamID) bool {
	if s.length == 0 || s.maxDeleted.isZero() {
		return false
	}
	if s.firstID.cmp(s.maxDeleted) > 0 {
		return false
	}
	return start.cmp(s.maxDeleted) <= 0 && s.maxDeleted.cmp(end) <= 0
}

// estimateDistance is streamEstimateDistanceFromFirstEverEntry; -1 for
// SCG_INVALID_ENTRIES_READ.
func (s *stream) estimateDistance(id streamID) int64 {
	if s.entriesAdded == 0 {
		return 0
	}
	if s.length == 0 && id.cmp(s.lastID) < 1 {
		return s.entriesAdded
	}
	cmpLast := id.cmp(s.lastID)
	if cmpLast == 0 {
		return s.entriesAdded
	} else if cmpLast > 0 {
		return -1
	}
	cmpFirst := id.cmp(s.firstID)
	if s.maxDeleted.isZero() || s.maxDeleted.cmp(s.firstID) < 0 {
		if cmpFirst < 0 {
			return s.entriesAdded - s.length
		} else if cmpFirst == 0 {
			return s.entriesAdded - s.length + 1
		}
	}
	return -1
}

// lag is streamReplyWithCGLag's value; ok false for a null.
func (s *stream) lag(g *streamGroup) (int64, bool) {
	if s.entriesAdded == 0 {
		return 0, true
	}
	if g.entriesRead != -1 && !s.rangeHasTombstones(g.lastID, streamIDMax) {
		return s.entriesAdded - g.entriesRead, true
	}
	if er := s.estimateDistance(g.lastID); er != -1 {
		return s.entriesAdded - er, true
	}
	return 0, false
}
