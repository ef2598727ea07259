package fsm

import (
	"encoding/binary"
	"strconv"
)

// DUMP and RESTORE of streams: RDB_TYPE_STREAM_LISTPACKS_2, as Redis
// 7.0's rdbSaveObject writes a stream: each node as its radix tree key
// (the master ID, 128 bits big-endian) and its listpack, the stream's
// length and IDs, then its consumer groups with their PELs and
// consumers. A node's listpack is built from the entries kvs keeps: the
// entries a node holds deleted in Redis are not written (its deleted
// count is 0), so the bytes are redis-server's for a stream none of whose
// nodes holds deleted entries. RESTORE reads type 19 and Redis 6.2's
// type 15.

func appendStreamKey(b []byte, id streamID) []byte {
	b = binary.BigEndian.AppendUint64(b, id.ms)
	return binary.BigEndian.AppendUint64(b, id.seq)
}

// streamNodeListpack is Redis's listpack of node n's live entries.
func streamNodeListpack(n *streamNode) []byte {
	lp := newLPBuilder()
	lp.addInt(int64(n.count))
	lp.addInt(0)
	lp.addInt(int64(n.nfields))
	var master [][]byte
	for p := 0; p < len(n.fields); {
		l, k := binary.Uvarint(n.fields[p:])
		p += k
		master = append(master, n.fields[p:p+int(l)])
		p += int(l)
	}
	for _, f := range master {
		lp.add(f)
	}
	lp.addInt(0)
	for _, e := range n.entries(true) {
		nf := len(e.pairs) / 2
		same := nf == len(master)
		for i := 0; same && i < nf; i++ {
			same = string(e.pairs[2*i]) == string(master[i])
		}
		flags := int64(0)
		if same {
			flags = 2
		}
		lp.addInt(flags)
		lp.addInt(int64(e.id.ms - n.master.ms))
		lp.addInt(int64(e.id.seq - n.master.seq))
		count := int64(nf) + 3
		if !same {
			lp.addInt(int64(nf))
			count += int64(nf) + 1
		}
		for i := 0; i < nf; i++ {
			if !same {
				lp.add(e.pairs[2*i])
			}
			lp.add(e.pairs[2*i+1])
		}
		lp.addInt(count)
	}
	return lp.finish()
}

func appendDumpStream(b []byte, it *item) []byte {
	st := it.obj.(*stream)
	b = append(b, rdbTypeStreamListpack2)
	b = appendRDBLen(b, uint64(len(st.nodes)))
	for _, n := range st.nodes {
		b = appendRDBString(b, appendStreamKey(nil, n.master))
		b = appendRDBString(b, streamNodeListpack(n))
	}
	for _, v := range []uint64{uint64(st.length), st.lastID.ms, st.lastID.seq, st.firstID.ms, st.firstID.seq,
		st.maxDeleted.ms, st.maxDeleted.seq, uint64(st.entriesAdded)} {
		b = appendRDBLen(b, v)
	}
	b = appendRDBLen(b, uint64(len(st.groups)))
	for _, g := range st.groups {
		b = appendRDBString(b, []byte(g.name))
		b = appendRDBLen(b, g.lastID.ms)
		b = appendRDBLen(b, g.lastID.seq)
		b = appendRDBLen(b, uint64(g.entriesRead))
		b = appendRDBLen(b, uint64(g.pel.Len()))
		g.pel.Scan(func(n streamNack) bool {
			b = appendStreamKey(b, n.id)
			b = binary.LittleEndian.AppendUint64(b, uint64(n.time))
			b = appendRDBLen(b, uint64(n.count))
			return true
		})
		b = appendRDBLen(b, uint64(len(g.consumers)))
		for _, c := range g.consumers {
			b = appendRDBString(b, []byte(c.name))
			b = binary.LittleEndian.AppendUint64(b, uint64(c.seen))
			b = appendRDBLen(b, uint64(c.pel.Len()))
			c.pel.Scan(func(id streamID) bool {
				b = appendStreamKey(b, id)
				return true
			})
		}
	}
	return b
}

func (r *rdbReader) readPlainLen() (uint64, bool) {
	n, enc, ok := r.readLen()
	return n, ok && !enc
}

func (r *rdbReader) readStreamID() (streamID, bool) {
	p, ok := r.read(16)
	if !ok {
		return streamID{}, false
	}
	return streamID{binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])}, true
}

// lpInt reads a listpack entry (as lpEntries gives it) as an integer.
func lpInt(b []byte) (int64, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

// readStreamNode rebuilds a node from its key and listpack, validating
// it as Redis's deep sanitization does.
func readStreamNode(master streamID, lp []byte) (*streamNode, bool) {
	ents, ok := lpEntries(lp)
	if !ok || len(ents) < 4 {
		return nil, false
	}
	i := 0
	next := func() ([]byte, bool) {
		if i >= len(ents) {
			return nil, false
		}
		i++
		return ents[i-1], true
	}
	nextInt := func() (int64, bool) {
		e, ok := next()
		if !ok {
			return 0, false
		}
		return lpInt(e)
	}
	count, ok1 := nextInt()
	deleted, ok2 := nextInt()
	nf, ok3 := nextInt()
	if !ok1 || !ok2 || !ok3 || count < 0 || deleted < 0 || nf < 0 || nf > int64(len(ents)) {
		return nil, false
	}
	n := &streamNode{master: master, nfields: int(nf)}
	var masterFields [][]byte
	for range nf {
		f, ok := next()
		if !ok {
			return nil, false
		}
		masterFields = append(masterFields, f)
		n.fields = binary.AppendUvarint(n.fields, uint64(len(f)))
		n.fields = append(n.fields, f...)
	}
	if z, ok := nextInt(); !ok || z != 0 {
		return nil, false
	}
	var live, dead int64
	prev, have := streamID{}, false
	for i < len(ents) {
		flags, ok1 := nextInt()
		msd, ok2 := nextInt()
		seqd, ok3 := nextInt()
		if !ok1 || !ok2 || !ok3 || flags&^3 != 0 {
			return nil, false
		}
		id := streamID{master.ms + uint64(msd), master.seq + uint64(seqd)}
		if have && !prev.less(id) || id.less(master) {
			return nil, false
		}
		prev, have = id, true
		fields := masterFields
		k := int64(len(masterFields))
		if flags&2 == 0 {
			var ok bool
			if k, ok = nextInt(); !ok || k < 0 || k > int64(len(ents)) {
				return nil, false
			}
			fields = nil
		}
		var pairs [][]byte
		for j := int64(0); j < k; j++ {
			f := []byte(nil)
			if flags&2 != 0 {
				f = fields[j]
			} else {
				var ok bool
				if f, ok = next(); !ok {
					return nil, false
				}
			}
			v, ok := next()
			if !ok {
				return nil, false
			}
			pairs = append(pairs, f, v)
		}
		want := k + 3
		if flags&2 == 0 {
			want += k + 1
		}
		if c, ok := nextInt(); !ok || c != want {
			return nil, false
		}
		n.last = id
		if flags&1 != 0 {
			dead++
			continue
		}
		live++
		n.buf = appendEntry(n.buf, id, pairs)
	}
	if live != count || dead != deleted || live == 0 {
		return nil, false
	}
	n.count, n.deleted = int32(live), int32(dead)
	n.lpFixed = len(lp) - lpIntElemSize(count) - lpIntElemSize(deleted)
	return n, true
}

// readDumpStream reads a stream of RDB type t (19, or 15 of Redis 6.2).
func readDumpStream(r *rdbReader, t byte) (*stream, bool) {
	st := newStream()
	nn, ok := r.readPlainLen()
	if !ok || nn > uint64(len(r.b)) {
		return nil, false
	}
	var prev streamID
	for i := uint64(0); i < nn; i++ {
		key, ok := r.readString()
		if !ok || len(key) != 16 {
			return nil, false
		}
		lp, ok := r.readBlob()
		if !ok {
			return nil, false
		}
		master := streamID{binary.BigEndian.Uint64(key), binary.BigEndian.Uint64(key[8:])}
		n, ok := readStreamNode(master, lp)
		if !ok || i > 0 && !prev.less(master) {
			return nil, false
		}
		prev = n.last
		st.nodes = append(st.nodes, n)
		st.length += int64(n.count)
	}
	var v [8]uint64
	nv := 3
	if t == rdbTypeStreamListpack2 {
		nv = 8
	}
	for i := 0; i < nv; i++ {
		if v[i], ok = r.readPlainLen(); !ok {
			return nil, false
		}
	}
	if int64(v[0]) != st.length {
		return nil, false
	}
	st.lastID = streamID{v[1], v[2]}
	if len(st.nodes) > 0 && st.lastID.less(st.nodes[len(st.nodes)-1].last) {
		return nil, false
	}
	if t == rdbTypeStreamListpack2 {
		st.firstID = streamID{v[3], v[4]}
		st.maxDeleted = streamID{v[5], v[6]}
		st.entriesAdded = int64(v[7])
	} else {
		st.entriesAdded = st.length
		if st.length > 0 {
			st.firstID = st.edgeID(true)
		}
	}
	ng, ok := r.readPlainLen()
	if !ok || ng > uint64(len(r.b)) {
		return nil, false
	}
	for i := uint64(0); i < ng; i++ {
		name, ok := r.readString()
		if !ok {
			return nil, false
		}
		g := &streamGroup{name: string(name), pel: newPEL()}
		ms, ok1 := r.readPlainLen()
		seq, ok2 := r.readPlainLen()
		if !ok1 || !ok2 {
			return nil, false
		}
		g.lastID = streamID{ms, seq}
		if t == rdbTypeStreamListpack2 {
			er, ok := r.readPlainLen()
			if !ok {
				return nil, false
			}
			g.entriesRead = int64(er)
		} else {
			g.entriesRead = st.estimateDistance(g.lastID)
		}
		np, ok := r.readPlainLen()
		if !ok || np > uint64(len(r.b)) {
			return nil, false
		}
		for j := uint64(0); j < np; j++ {
			id, ok := r.readStreamID()
			tm, ok2 := r.read(8)
			cnt, ok3 := r.readPlainLen()
			if !ok || !ok2 || !ok3 {
				return nil, false
			}
			if _, dup := g.pel.Get(streamNack{id: id}); dup {
				return nil, false
			}
			g.pel.Set(streamNack{id: id, time: int64(binary.LittleEndian.Uint64(tm)), count: int64(cnt)})
		}
		nc, ok := r.readPlainLen()
		if !ok || nc > uint64(len(r.b)) {
			return nil, false
		}
		for j := uint64(0); j < nc; j++ {
			cname, ok := r.readString()
			seen, ok2 := r.read(8)
			cp, ok3 := r.readPlainLen()
			if !ok || !ok2 || !ok3 || cp > uint64(len(r.b)) {
				return nil, false
			}
			if c, _ := g.consumer(cname); c != nil {
				return nil, false
			}
			c := g.createConsumer(cname, int64(binary.LittleEndian.Uint64(seen)))
			for range cp {
				id, ok := r.readStreamID()
				if !ok {
					return nil, false
				}
				n, found := g.pel.Get(streamNack{id: id})
				if !found || n.consumer != "" {
					return nil, false
				}
				n.consumer = c.name
				g.pel.Set(n)
				c.pel.Set(id)
			}
		}
		// Every PEL entry has its consumer, as Redis's deep check asks.
		orphan := false
		g.pel.Scan(func(n streamNack) bool { orphan = n.consumer == ""; return !orphan })
		if orphan {
			return nil, false
		}
		if og, at := st.group(name); og != nil {
			return nil, false
		} else {
			st.groups = append(st.groups, nil)
			copy(st.groups[at+1:], st.groups[at:])
			st.groups[at] = g
		}
	}
	st.recount()
	return st, true
}
