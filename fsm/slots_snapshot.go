package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The slot table in snapshots (version 6; snapshot.go draws where):
//
//	slots    = 0                          the store owns every slot, moves none
//	         | 1 notowned:ranges nout:uvarint out*nout nin:uvarint in*nin
//	           ndone:uvarint (id:uvarint how:byte)*ndone
//	out      = id:uvarint fenced:byte flushed:byte ranges
//	           ndirty:uvarint (keylen:uvarint key)*ndirty
//	in       = id:uvarint ranges
//	ranges   = as AppendSlotRanges
//
// notowned are the slots the store does not own, those of moves in
// included; a move out's slots must be owned and a move in's not, and no
// two moves of one direction share a slot. The moves are ascending by id,
// the dirty keys in keyspace order, the finished moves ascending by id;
// how is the step that ended each (moveRelease ... moveAbort). The keys of
// slots not owned, staging included, are records like any other.

// frozen returns a copy of t that t's later changes leave alone, for a
// snapshot: the modes are never modified in place, and the dirty sets are
// copied on write.
func (t *slotTable) frozen() *slotTable {
	if t == nil {
		return nil
	}
	f := &slotTable{mode: t.mode, hidden: t.hidden, in: slices.Clone(t.in), done: slices.Clone(t.done)}
	for _, m := range t.out {
		cp := *m
		cp.dirty = m.dirty.Copy()
		f.out = append(f.out, &cp)
	}
	return f
}

// appendSlots appends t's snapshot section to b, flushing b into cw
// whenever it is long (a dirty set may be).
func appendSlots(b []byte, t *slotTable, cw *crcWriter) []byte {
	if t == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	var notOwned []SlotRange
	for slot, m := range t.mode {
		if m >= slotNotOwned {
			notOwned = appendSlot(notOwned, slot)
		}
	}
	b = AppendSlotRanges(b, notOwned)
	b = binary.AppendUvarint(b, uint64(len(t.out)))
	for _, m := range t.out {
		b = binary.AppendUvarint(b, m.id)
		b = append(b, boolByte(m.fenced), boolByte(m.flushed))
		b = AppendSlotRanges(b, m.ranges)
		b = binary.AppendUvarint(b, uint64(m.dirty.Len()))
		m.dirty.Scan(func(dk dirtyKey) bool {
			b = appendString(b, dk.key)
			if len(b) >= snapBufFlush {
				cw.write(b)
				b = b[:0]
			}
			return true
		})
	}
	b = binary.AppendUvarint(b, uint64(len(t.in)))
	for _, m := range t.in {
		b = binary.AppendUvarint(b, m.id)
		b = AppendSlotRanges(b, m.ranges)
	}
	b = binary.AppendUvarint(b, uint64(len(t.done)))
	for _, d := range t.done {
		b = binary.AppendUvarint(b, d.id)
		b = append(b, byte(d.how))
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// slots reads the snapshot's slot section (appendSlots), validating it.
func (s *snapReader) slots() *slotTable {
	switch s.byte() {
	case 0:
		return nil
	case 1:
	default:
		s.fail(fmt.Errorf("%w: snapshot slot table: bad presence byte", ErrCorrupt))
		return nil
	}
	t := newSlotTable()
	m := new([ClusterSlots]slotMode)
	for _, r := range s.ranges() {
		for slot := r.Lo; slot <= r.Hi; slot++ {
			m[slot] = slotNotOwned
		}
	}
	base := *m
	nout := s.uvarint()
	var prev uint64
	for i := uint64(0); i < nout && s.err == nil; i++ {
		mo := &moveOut{id: s.uvarint(), dirty: newDirtySet()}
		fenced, flushed := s.byte(), s.byte()
		mo.fenced, mo.flushed = fenced == 1, flushed == 1
		mo.ranges = s.ranges()
		mode := slotExporting
		if mo.fenced {
			mode = slotFenced
		}
		switch {
		case s.err != nil:
		case mo.id == 0 || (i > 0 && mo.id <= prev) || fenced > 1 || flushed > 1 || len(mo.ranges) == 0:
			s.fail(fmt.Errorf("%w: snapshot slot move out %d: bad id, flags or slots", ErrCorrupt, mo.id))
		case !setMoveModes(m, &base, mo.ranges, slotOwned, mode):
			s.fail(fmt.Errorf("%w: snapshot slot move out %d: a slot not owned, or moving twice", ErrCorrupt, mo.id))
		}
		s.dirtyKeys(mo)
		prev = mo.id
		t.out = append(t.out, mo)
	}
	nin := s.uvarint()
	for i := uint64(0); i < nin && s.err == nil; i++ {
		mi := &moveIn{id: s.uvarint(), ranges: s.ranges()}
		switch {
		case s.err != nil:
		case mi.id == 0 || (i > 0 && mi.id <= prev) || len(mi.ranges) == 0:
			s.fail(fmt.Errorf("%w: snapshot slot move in %d: bad id or slots", ErrCorrupt, mi.id))
		case !setMoveModes(m, &base, mi.ranges, slotNotOwned, slotImporting):
			s.fail(fmt.Errorf("%w: snapshot slot move in %d: a slot owned, or moving twice", ErrCorrupt, mi.id))
		}
		prev = mi.id
		t.in = append(t.in, mi)
	}
	ndone := s.uvarint()
	for i := uint64(0); i < ndone && s.err == nil; i++ {
		d := moveDone{id: s.uvarint(), how: int64(s.byte())}
		switch {
		case s.err != nil:
		case d.id == 0 || (i > 0 && d.id <= t.done[i-1].id) || d.how < moveRelease || d.how > moveAbort || d.how == moveStage:
			s.fail(fmt.Errorf("%w: snapshot finished slot move %d", ErrCorrupt, d.id))
		}
		t.done = append(t.done, d)
	}
	for _, mo := range t.out {
		if t.findIn(mo.id) != nil || t.finished(mo.id) != 0 {
			s.fail(fmt.Errorf("%w: snapshot slot move %d listed twice", ErrCorrupt, mo.id))
		}
	}
	for _, mi := range t.in {
		if t.finished(mi.id) != 0 {
			s.fail(fmt.Errorf("%w: snapshot slot move %d listed twice", ErrCorrupt, mi.id))
		}
	}
	t.setModes(m)
	return t
}

// setMoveModes gives the slots of ranges mode in m, if each is base in
// base and not yet given another mode by a move.
func setMoveModes(m, base *[ClusterSlots]slotMode, ranges []SlotRange, want, mode slotMode) bool {
	for _, r := range ranges {
		for slot := r.Lo; slot <= r.Hi; slot++ {
			if base[slot] != want || m[slot] != want {
				return false
			}
			m[slot] = mode
		}
	}
	return true
}

// dirtyKeys reads a move out's dirty keys, which must be of its slots
// and in keyspace order.
func (s *snapReader) dirtyKeys(mo *moveOut) {
	n := s.uvarint()
	var prev dirtyKey
	for i := uint64(0); i < n && s.err == nil; i++ {
		key := string(s.bytes(nil))
		dk := dirtyKey{keyHash(key), key}
		switch {
		case s.err != nil:
		case !covers(mo.ranges, CursorSlot(dk.hash)):
			s.fail(fmt.Errorf("%w: snapshot slot move out %d: dirty key %q of another slot", ErrCorrupt, mo.id, key))
		case i > 0 && !dirtyLess(prev, dk):
			s.fail(fmt.Errorf("%w: snapshot slot move out %d: dirty key %q out of order", ErrCorrupt, mo.id, key))
		default:
			mo.dirty.Set(dk)
			prev = dk
		}
	}
}

// ranges reads AppendSlotRanges's encoding.
func (s *snapReader) ranges() []SlotRange {
	n := s.uvarint()
	var out []SlotRange
	for i := uint64(0); i < n && s.err == nil; i++ {
		lo, hi := s.uvarint(), s.uvarint()
		switch {
		case s.err != nil:
		case hi >= ClusterSlots || lo > hi || (i > 0 && int(lo) <= out[i-1].Hi+1):
			s.fail(fmt.Errorf("%w: snapshot slot ranges: bad range %d-%d", ErrCorrupt, lo, hi))
		default:
			out = append(out, SlotRange{int(lo), int(hi)})
		}
	}
	return out
}
