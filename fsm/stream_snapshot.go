package fsm

import (
	"encoding/binary"
	"fmt"
)

// Snapshots of streams: the stream's counters and IDs, its nodes as they
// are (so a restored stream splits and trims as the original would), and
// its consumer groups with their PELs; a consumer's own PEL is read back
// from the group's, whose entries name their consumers.

func (w *snapWriter) streamID(id streamID) {
	w.uvarint(id.ms)
	w.uvarint(id.seq)
}

func (r *snapReader) streamID() streamID {
	ms := r.uvarint()
	return streamID{ms, r.uvarint()}
}

func writeStream(w *snapWriter, it *item) {
	st := it.obj.(*stream)
	w.uvarint(uint64(st.length))
	w.uvarint(uint64(st.entriesAdded))
	w.streamID(st.lastID)
	w.streamID(st.firstID)
	w.streamID(st.maxDeleted)
	w.uvarint(uint64(len(st.nodes)))
	for _, n := range st.nodes {
		w.streamID(n.master)
		w.streamID(n.last)
		w.uvarint(uint64(n.count))
		w.uvarint(uint64(n.deleted))
		w.uvarint(uint64(n.lpFixed))
		w.uvarint(uint64(n.nfields))
		w.bytes(n.fields)
		w.bytes(n.buf)
	}
	w.uvarint(uint64(len(st.groups)))
	for _, g := range st.groups {
		w.string(g.name)
		w.streamID(g.lastID)
		w.varint(g.entriesRead)
		w.uvarint(uint64(g.pel.Len()))
		g.pel.Scan(func(n streamNack) bool {
			w.streamID(n.id)
			w.varint(n.time)
			w.varint(n.count)
			w.string(n.consumer)
			return w.ok()
		})
		w.uvarint(uint64(len(g.consumers)))
		for _, c := range g.consumers {
			w.string(c.name)
			w.varint(c.seen)
		}
	}
}

// streamMax bounds the counts a snapshot may announce.
const streamMax = 1 << 40

func readStream(r *snapReader, it *item) {
	bad := func(what string) { r.fail(fmt.Errorf("%w: stream: %s", ErrCorrupt, what)) }
	st := newStream()
	st.length = int64(r.uvarint())
	st.entriesAdded = int64(r.uvarint())
	st.lastID = r.streamID()
	st.firstID = r.streamID()
	st.maxDeleted = r.streamID()
	nn := r.uvarint()
	if r.err != nil {
		return
	}
	if nn > streamMax || st.length > streamMax || st.entriesAdded < st.length {
		bad("counts")
		return
	}
	var live int64
	prev, have := streamID{}, false
	for i := uint64(0); i < nn && r.err == nil; i++ {
		n := &streamNode{}
		n.master = r.streamID()
		n.last = r.streamID()
		n.count = int32(r.uvarint())
		n.deleted = int32(r.uvarint())
		n.lpFixed = int(r.uvarint())
		n.nfields = int(r.uvarint())
		n.fields = r.bytes(nil)
		n.buf = r.bytes(nil)
		if r.err != nil {
			return
		}
		if n.count <= 0 || n.deleted < 0 || n.last.less(n.master) || have && !prev.less(n.master) ||
			!validFields(n.fields, n.nfields) {
			bad("node")
			return
		}
		// The entries: well formed, ascending, within the node.
		k := int32(0)
		eprev, ehave := streamID{}, false
		for p := 0; p < len(n.buf); {
			id, end, ok := validEntry(n.buf, p)
			if !ok || id.less(n.master) || n.last.less(id) || ehave && !eprev.less(id) {
				bad("entry")
				return
			}
			eprev, ehave, p = id, true, end
			k++
		}
		if k != n.count {
			bad("node count")
			return
		}
		live += int64(k)
		prev, have = n.last, true
		st.nodes = append(st.nodes, n)
	}
	if live != st.length || have && st.lastID.less(prev) {
		bad("length")
		return
	}
	ng := r.uvarint()
	if ng > streamMax {
		bad("groups")
		return
	}
	for i := uint64(0); i < ng && r.err == nil; i++ {
		g := &streamGroup{pel: newPEL()}
		g.name = string(r.bytes(nil))
		g.lastID = r.streamID()
		g.entriesRead = r.varint()
		np := r.uvarint()
		if r.err != nil {
			return
		}
		if np > streamMax || i > 0 && st.groups[i-1].name >= g.name {
			bad("group")
			return
		}
		var nacks []streamNack
		for j := uint64(0); j < np && r.err == nil; j++ {
			var n streamNack
			n.id = r.streamID()
			n.time = r.varint()
			n.count = r.varint()
			n.consumer = string(r.bytes(nil))
			if j > 0 && !nacks[j-1].id.less(n.id) {
				bad("pel order")
				return
			}
			nacks = append(nacks, n)
		}
		nc := r.uvarint()
		if r.err != nil {
			return
		}
		if nc > streamMax {
			bad("consumers")
			return
		}
		for j := uint64(0); j < nc && r.err == nil; j++ {
			c := &streamConsumer{pel: newCPEL()}
			c.name = string(r.bytes(nil))
			c.seen = r.varint()
			if j > 0 && g.consumers[j-1].name >= c.name {
				bad("consumer order")
				return
			}
			g.consumers = append(g.consumers, c)
		}
		if r.err != nil {
			return
		}
		for _, n := range nacks {
			c, _ := g.consumer([]byte(n.consumer))
			if c == nil {
				bad("pel consumer")
				return
			}
			g.pel.Set(n)
			c.pel.Set(n.id)
		}
		st.groups = append(st.groups, g)
	}
	if r.err != nil {
		return
	}
	st.recount()
	it.obj = st
}

func validFields(b []byte, n int) bool {
	p := 0
	for i := 0; i < n; i++ {
		l, k := binary.Uvarint(b[p:])
		if k <= 0 || uint64(len(b)-p-k) < l {
			return false
		}
		p += k + int(l)
	}
	return p == len(b)
}

// validEntry checks the entry at p of buf and returns its ID and end.
func validEntry(buf []byte, p int) (streamID, int, bool) {
	var v [3]uint64
	for i := range v {
		x, k := binary.Uvarint(buf[p:])
		if k <= 0 {
			return streamID{}, 0, false
		}
		v[i], p = x, p+k
	}
	if v[2] > uint64(len(buf)) {
		return streamID{}, 0, false
	}
	for i := uint64(0); i < 2*v[2]; i++ {
		l, k := binary.Uvarint(buf[p:])
		if k <= 0 || uint64(len(buf)-p-k) < l {
			return streamID{}, 0, false
		}
		p += k + int(l)
	}
	return streamID{v[0], v[1]}, p, true
}
