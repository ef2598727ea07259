package fsm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tidwall/btree"
)

// Moving slots between groups: the state machine's side of a live move of
// slot ranges S from group A (the source) to group B (the target), every
// step an entry in A's or B's log, so every replica, leader change and
// replay agrees on where the move stands. The orchestration (the meta
// group's record of the move, the copier that reads from A and proposes
// to B) is outside the fsm; these are the steps it drives:
//
//	A  OpMoveOut begin    S becomes exporting: from here on A records every
//	                      key of S written or deleted (the move's dirty set)
//	A  ExportSlots        a copy-on-write view of S, read in chunks without
//	                      the lock (the bulk copy)                 -> B stage
//	A  OpMoveDrain        a chunk of the dirty keys' current state
//	                      (tombstones for those absent), taken out of the
//	                      set                                      -> B stage
//	A  OpMoveOut fence    S is fenced: A refuses writes to it; drain until
//	                      the set is empty                          -> B stage
//	B  OpMoveIn activate  B's staging of S becomes live: B owns S
//	A  OpMoveOut release  A no longer owns S; its keys are invisible at
//	                      once and OpSlotsPurge deletes them in steps
//
// OpMoveOut cancel (A: S owned again, the set dropped) and OpMoveIn abort
// (B: the staging is left to purge, never seen) undo a move before B's
// activation; after it, the move is done. The fsm checks each step
// against its own store (a release needs the fence and an empty set; a
// first stage needs S not owned and purged); the order across the two
// groups is the orchestration's to keep: B activates only after A's fence
// and a drain that left the set empty was staged, and A releases only
// after B's activation, so that S is never served by both, and only
// briefly (the hand-over) by neither.
//
// B stages in place: OpMoveIn stage stores a chunk's keys in B's keyspace,
// in slots B does not own, so nothing sees them (slots.go) until the
// activation makes S owned, which is then one change of the slot table
// whatever S holds. Keys keep their type, value and deadline; they are
// stamped with B's versions as they are staged, as any write on B is,
// which is what WATCH on B compares. A stage announces no keyspace event
// and is no change for the dirty counter; the activation signals the
// lists and sorted sets of S ready, so clients blocked on them on B wake.
//
// Why B ends with S's final state: let V be the view, taken at some entry
// p of A's log after the begin, and D the dirty set. Every key of S whose
// state at the fence differs from its state in V was written or deleted
// after p, hence after the begin, so it is in D or was drained after its
// last change (a drain takes the key's state at the drain's entry, and a
// change after that puts the key back in D). Writes stop at the fence, so
// once D has been drained empty after the fence, the last chunk B staged
// for each such key holds its final state, and V holds it for the rest,
// provided B stages the chunks in the order of the entries of A's log
// they were taken at: the drains taken before p, then V, then the drains
// taken after p. The simplest order is the copier's natural one: begin,
// take the view at once, stage all of it, then drain until after the
// fence. A FLUSHALL on A during the move empties D and makes the next
// drain begin with a flush record, which drops what B staged so far: the
// same state, reached by the same order.

// Move ops, after the ownership ops in the admin range.
const (
	// OpMoveOut: Int=what (MoveBegin's, MoveFence's, MoveRelease's,
	// MoveCancel's), Int2=the move's id (> 0); Args[0]=ranges for a
	// begin. Reply +OK, or an error that changed nothing.
	OpMoveOut Op = opBaseAdmin + 3 + iota
	// OpMoveDrain: Int=the move's id, Int2=the chunk's size to aim for
	// in bytes of keys and values (>= 1; a chunk holds at least one
	// record however large; see contentSize). Reply [bulk chunk, :1 when
	// dirty keys remain or :0] (DrainReply).
	OpMoveDrain
	// OpMoveIn: Int=what (MoveStage's, MoveActivate's, MoveAbort's),
	// Int2=the move's id (> 0); a stage has Args[0]=ranges and
	// Args[1]=a chunk. Reply +OK, or an error that changed nothing.
	OpMoveIn
)

// What an OpMoveOut or OpMoveIn does, its Int.
const (
	moveBegin = iota + 1
	moveFence
	moveRelease
	moveCancel
	moveStage
	moveActivate
	moveAbort
)

func init() {
	registerOp(OpMoveOut, opSpec{name: "MOVEOUT", write: true, args: argsAny, keys: keysNone, level: 1,
		check: checkMove(moveBegin, moveCancel), apply: applyMoveOut})
	registerOp(OpMoveDrain, opSpec{name: "MOVEDRAIN", write: true, args: 0, keys: keysNone, level: 1,
		check: func(c *Command) error {
			if c.Int < 1 || c.Int2 < 1 {
				return errorString("move id or chunk size below 1")
			}
			return nil
		}, apply: applyMoveDrain})
	registerOp(OpMoveIn, opSpec{name: "MOVEIN", write: true, args: argsAny, keys: keysNone, level: 1,
		check: checkMove(moveStage, moveAbort), apply: applyMoveIn})
}

// checkMove checks an OpMoveOut or OpMoveIn whose Int is within
// [first, last]: the id, and the arguments of a begin or a stage.
func checkMove(first, last int64) func(c *Command) error {
	return func(c *Command) error {
		want := 0
		switch {
		case c.Int < first || c.Int > last:
			return errorString("unknown move step")
		case c.Int2 < 1:
			return errorString("move id below 1")
		case c.Int == moveBegin:
			want = 1
		case c.Int == moveStage:
			want = 2
		}
		if len(c.Args) != want {
			return errorString("wrong argument count for the move step")
		}
		if want > 0 {
			return checkRangesArg(0)(c)
		}
		return nil
	}
}

// MoveBegin returns the OpMoveOut starting move id of ranges out of the
// store, which must own them all, none of them moving.
func MoveBegin(id uint64, ranges []SlotRange) Command {
	return Command{Op: OpMoveOut, Int: moveBegin, Int2: int64(id), Args: [][]byte{AppendSlotRanges(nil, ranges)}}
}

// MoveFence returns the OpMoveOut fencing move id's slots.
func MoveFence(id uint64) Command { return Command{Op: OpMoveOut, Int: moveFence, Int2: int64(id)} }

// MoveRelease returns the OpMoveOut giving move id's slots up; the move
// must be fenced and drained.
func MoveRelease(id uint64) Command { return Command{Op: OpMoveOut, Int: moveRelease, Int2: int64(id)} }

// MoveCancel returns the OpMoveOut ending move id with its slots owned.
func MoveCancel(id uint64) Command { return Command{Op: OpMoveOut, Int: moveCancel, Int2: int64(id)} }

// MoveDrain returns the OpMoveDrain taking a chunk of about maxBytes of
// move id's dirty keys.
func MoveDrain(id uint64, maxBytes int) Command {
	return Command{Op: OpMoveDrain, Int: int64(id), Int2: int64(maxBytes)}
}

// MoveStage returns the OpMoveIn staging chunk (from ExportSlots or
// OpMoveDrain) for move id of ranges into the store, which must not own
// them; the first stage of a move needs its slots empty (purged).
func MoveStage(id uint64, ranges []SlotRange, chunk []byte) Command {
	return Command{Op: OpMoveIn, Int: moveStage, Int2: int64(id), Args: [][]byte{AppendSlotRanges(nil, ranges), chunk}}
}

// MoveActivate returns the OpMoveIn making move id's staging live.
func MoveActivate(id uint64) Command {
	return Command{Op: OpMoveIn, Int: moveActivate, Int2: int64(id)}
}

// MoveAbort returns the OpMoveIn dropping move id's staging.
func MoveAbort(id uint64) Command { return Command{Op: OpMoveIn, Int: moveAbort, Int2: int64(id)} }

// DrainReply returns what an OpMoveDrain replied: the chunk and whether
// dirty keys remain, or the error it replied.
func DrainReply(r Reply) (chunk []byte, more bool, err error) {
	if r.Kind == ReplyError {
		return nil, false, errorString(r.Str)
	}
	if r.Kind != ReplyArray || len(r.Array) != 2 || r.Array[0].Kind != ReplyBulk || r.Array[1].Kind != ReplyInt {
		return nil, false, fmt.Errorf("fsm: not a drain's reply: %v", r)
	}
	return r.Array[0].Bulk, r.Array[1].Int != 0, nil
}

// moveOut is a move of slots out of the store, in flight.
type moveOut struct {
	id     uint64
	ranges []SlotRange
	fenced bool
	// flushed says a FLUSHALL emptied the slots since the last drain,
	// which then starts with a flush record.
	flushed bool
	// dirty holds the keys of the slots written or deleted since the
	// begin and not drained since, in keyspace order. Snapshots share it
	// (Copy is copy-on-write).
	dirty *btree.BTreeG[dirtyKey]
}

type dirtyKey struct {
	hash uint64
	key  string
}

func dirtyLess(a, b dirtyKey) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.key < b.key
}

func newDirtySet() *btree.BTreeG[dirtyKey] {
	return btree.NewBTreeGOptions(dirtyLess, btree.Options{NoLocks: true})
}

// moveIn is a move of slots into the store, staging.
type moveIn struct {
	id     uint64
	ranges []SlotRange
}

// moveDone is a move that finished here, and how.
type moveDone struct {
	id  uint64
	how int64 // the step that ended it: moveRelease, moveCancel, moveActivate, moveAbort
}

func covers(ranges []SlotRange, slot int) bool {
	for _, r := range ranges {
		if r.Lo <= slot && slot <= r.Hi {
			return true
		}
	}
	return false
}

func (t *slotTable) findOut(id uint64) *moveOut {
	for _, m := range t.out {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (t *slotTable) findIn(id uint64) *moveIn {
	for _, m := range t.in {
		if m.id == id {
			return m
		}
	}
	return nil
}

// finished returns how move id ended, 0 if it did not.
func (t *slotTable) finished(id uint64) int64 {
	i, ok := slices.BinarySearchFunc(t.done, id, func(d moveDone, id uint64) int {
		switch {
		case d.id < id:
			return -1
		case d.id > id:
			return 1
		}
		return 0
	})
	if !ok {
		return 0
	}
	return t.done[i].how
}

func (t *slotTable) finish(id uint64, how int64) {
	i, _ := slices.BinarySearchFunc(t.done, id, func(d moveDone, id uint64) int {
		if d.id < id {
			return -1
		}
		return 1
	})
	t.done = slices.Insert(t.done, i, moveDone{id, how})
	t.out = slices.DeleteFunc(t.out, func(m *moveOut) bool { return m.id == id })
	t.in = slices.DeleteFunc(t.in, func(m *moveIn) bool { return m.id == id })
}

// noteWrite records that the item (hash, key) was stored or deleted, in
// the dirty set of the move out its slot is in, if any. The keyspace
// calls it for every write while a move out is in flight.
func (t *slotTable) noteWrite(hash uint64, key string) {
	slot := CursorSlot(hash)
	if m := t.mode[slot]; m != slotExporting && m != slotFenced {
		return
	}
	for _, m := range t.out {
		if covers(m.ranges, slot) {
			dk := dirtyKey{hash, key}
			if _, ok := m.dirty.Get(dk); !ok {
				// A copy: the item's key shares its value's
				// allocation, which must not outlive the item.
				dk.key = strings.Clone(key)
				m.dirty.Set(dk)
			}
			return
		}
	}
}

// syncTrackLocked makes the keyspace record writes for the moves out in
// flight, and only while there are some.
func (s *Store) syncTrackLocked() {
	s.keys.track = nil
	if s.slots != nil && len(s.slots.out) > 0 {
		s.keys.track = s.slots
	}
}

// moveError is the error reply of a move step that changed nothing.
func moveError(format string, args ...any) Reply {
	return ErrorReply(fmt.Sprintf(format, args...))
}

// finishedReply answers a step for move id, which is not in flight: +OK
// when it is the step that finished it (a repeated entry), else an error.
func (t *slotTable) finishedReply(id uint64, step int64) Reply {
	switch how := t.finished(id); {
	case how == 0:
		return moveError(ErrMoveUnknown, id)
	case how == step:
		return replyOK
	}
	return moveError(ErrMoveFinished, id)
}

func applyMoveOut(s *Store, now int64, c *Command) Reply {
	s.reportDirtyLocked(0)
	id := uint64(c.Int2)
	if c.Int == moveBegin {
		return s.moveBeginLocked(id, mustRanges(c.Args[0]))
	}
	if s.slots == nil {
		return moveError(ErrMoveUnknown, id)
	}
	t := s.slots
	m := t.findOut(id)
	if m == nil {
		return t.finishedReply(id, c.Int)
	}
	switch c.Int {
	case moveFence:
		m.fenced = true
		t.setModes(t.withModes(m.ranges, slotFenced))
	case moveRelease:
		switch {
		case !m.fenced:
			return moveError(ErrMoveNotFenced, id)
		case m.dirty.Len() > 0 || m.flushed:
			return moveError(ErrMoveNotDrained, id)
		}
		t.setModes(t.withModes(m.ranges, slotNotOwned))
		t.finish(id, moveRelease)
	case moveCancel:
		t.setModes(t.withModes(m.ranges, slotOwned))
		t.finish(id, moveCancel)
	}
	s.syncTrackLocked()
	return replyOK
}

func (s *Store) moveBeginLocked(id uint64, ranges []SlotRange) Reply {
	if s.slots != nil {
		if r, bad := s.slots.idTaken(id); bad {
			return r
		}
		for _, r := range ranges {
			for slot := r.Lo; slot <= r.Hi; slot++ {
				if s.slots.mode[slot] != slotOwned {
					return moveError(ErrMoveSlotBusy, slot)
				}
			}
		}
	}
	t := s.slotsLocked()
	t.out = append(t.out, &moveOut{id: id, ranges: ranges, dirty: newDirtySet()})
	slices.SortFunc(t.out, func(a, b *moveOut) int { return cmp.Compare(a.id, b.id) })
	t.setModes(t.withModes(ranges, slotExporting))
	s.syncTrackLocked()
	return replyOK
}

// idTaken refuses a new move with the id of one in flight or finished.
func (t *slotTable) idTaken(id uint64) (Reply, bool) {
	if t.findOut(id) != nil || t.findIn(id) != nil || t.finished(id) != 0 {
		return moveError(ErrMoveExists, id), true
	}
	return Reply{}, false
}

func applyMoveDrain(s *Store, now int64, c *Command) Reply {
	s.reportDirtyLocked(0)
	id := uint64(c.Int)
	if s.slots == nil {
		return moveError(ErrMoveUnknown, id)
	}
	m := s.slots.findOut(id)
	if m == nil {
		return s.slots.finishedReply(id, 0)
	}
	w := newChunkWriter()
	var size int64
	if m.flushed {
		w.flush()
		m.flushed = false
		size++
	}
	for w.records == 0 || size < c.Int2 {
		dk, ok := m.dirty.PopMin()
		if !ok {
			break
		}
		size += int64(len(dk.key))
		if p := s.keys.peek(dk.hash, dk.key); p != nil {
			w.item(p)
			size += contentSize(p)
		} else {
			w.tombstone(dk.key)
		}
	}
	more := replyZero
	if m.dirty.Len() > 0 {
		more = replyOne
	}
	return Reply{Kind: ReplyArray, Array: []Reply{BulkReply(w.finish()), more}}
}

// contentSize is the bytes of it's value: a string's, a collection's
// elements' (a sorted set's with 8 for each score). A drain measures its
// chunk with it and not with the chunk's length, which depends on whether
// a collection is packed, which replicas may decide differently (Limits
// are a node's): the keys a drain takes out of the dirty set must be the
// same on every replica.
func contentSize(it *item) int64 {
	var n int64
	add := func(b []byte) bool { n += int64(len(b)); return true }
	switch it.kind {
	case kindString:
		n = int64(len(it.val))
	case kindHash:
		hashEach(it, func(f, v []byte) bool { return add(f) && add(v) })
	case kindList:
		listElements(it, add)
	case kindSet:
		viewOf(it).each(func(_ uint64, m []byte) bool { return add(m) })
	case kindZSet:
		zsetView(it).each(0, false, func(e zent) bool { n += 8 + int64(len(e.member)); return true })
	}
	return n
}

func applyMoveIn(s *Store, now int64, c *Command) Reply {
	s.reportDirtyLocked(0)
	id := uint64(c.Int2)
	if c.Int == moveStage {
		return s.stageLocked(id, mustRanges(c.Args[0]), c.Args[1])
	}
	if s.slots == nil {
		return moveError(ErrMoveUnknown, id)
	}
	t := s.slots
	m := t.findIn(id)
	if m == nil {
		return t.finishedReply(id, c.Int)
	}
	switch c.Int {
	case moveActivate:
		t.setModes(t.withModes(m.ranges, slotOwned))
		t.finish(id, moveActivate)
		s.signalMovedInLocked(now, m.ranges)
	case moveAbort:
		// What was staged is left to OpSlotsPurge, like the keys of
		// any slot not owned.
		t.setModes(t.withModes(m.ranges, slotNotOwned))
		t.finish(id, moveAbort)
	}
	return replyOK
}

// stageLocked applies a chunk to move id's staging, beginning the move
// in if it is the first. Everything is checked before anything changes.
func (s *Store) stageLocked(id uint64, ranges []SlotRange, chunk []byte) Reply {
	if s.slots == nil {
		return moveError(ErrMoveSlotOwned, ranges[0].Lo) // a store never told owns every slot
	}
	t := s.slots
	m := t.findIn(id)
	if m == nil {
		if r, bad := t.idTaken(id); bad {
			if t.finished(id) != 0 {
				return moveError(ErrMoveFinished, id)
			}
			return r
		}
		for _, r := range ranges {
			for slot := r.Lo; slot <= r.Hi; slot++ {
				if t.mode[slot] != slotNotOwned {
					return moveError(ErrMoveSlotOwned, slot)
				}
			}
			if n := s.keys.countRange(slotRangeBounds(r)); n > 0 {
				var first int
				s.keys.Ascend(item{hash: slotHash(r.Lo)}, func(it item) bool {
					first = CursorSlot(it.hash)
					return false
				})
				return moveError(ErrMoveNotPurged, first)
			}
		}
	} else if !slices.Equal(m.ranges, ranges) {
		return moveError(ErrMoveOtherSlots, id)
	}
	recs, err := decodeChunk(chunk, ranges, s.keys.gen)
	if err != nil {
		return moveError(ErrMoveBadChunk, err)
	}
	if m == nil {
		m = &moveIn{id: id, ranges: ranges}
		t.in = append(t.in, m)
		slices.SortFunc(t.in, func(a, b *moveIn) int { return cmp.Compare(a.id, b.id) })
		t.setModes(t.withModes(ranges, slotImporting))
	}
	for i := range recs {
		switch r := &recs[i]; r.tag {
		case chunkFlush:
			s.clearStagingLocked(ranges)
		case chunkTombstone:
			s.deleteLocked([]byte(r.it.key))
		default:
			s.putLocked(r.it)
		}
	}
	return replyOK
}

// clearStagingLocked deletes what the slots of ranges hold: a flush
// record's effect on a move's staging.
func (s *Store) clearStagingLocked(ranges []SlotRange) {
	for _, it := range s.itemsInRanges(ranges, -1) {
		if prev, ok := s.keys.Delete(it); ok {
			s.forgetLocked(prev)
		}
	}
}

// signalMovedInLocked signals the lists and sorted sets of the slots of
// ranges ready, just activated: clients blocked on them here may pop.
func (s *Store) signalMovedInLocked(now int64, ranges []SlotRange) {
	if s.readyHook == nil {
		return
	}
	for _, r := range ranges {
		lo, hi := slotRangeBounds(r)
		s.keys.Ascend(item{hash: lo}, func(it item) bool {
			if hi != 0 && it.hash >= hi {
				return false
			}
			if (it.kind == kindList || it.kind == kindZSet || it.kind == kindStream) && !it.expired(now) {
				// No key of these slots can have been signalled
				// before in this entry: they were not owned.
				s.ready = append(s.ready, it.key)
			}
			return true
		})
	}
}

// afterFlushLocked carries the slot moves over a FLUSHALL that replaced
// old by s.keys: a move out's drain will tell the target to drop what it
// staged (the flush record), and a move in's staging, which is the
// source's data and not this store's, is kept.
func (s *Store) afterFlushLocked(old *keyspace) {
	if s.slots == nil {
		return
	}
	for _, m := range s.slots.out {
		m.dirty.Clear()
		m.flushed = true
	}
	for _, m := range s.slots.in {
		for _, r := range m.ranges {
			lo, hi := slotRangeBounds(r)
			old.Ascend(item{hash: lo}, func(it item) bool {
				if hi != 0 && it.hash >= hi {
					return false
				}
				s.keys.Load(it)
				s.bytes += it.size()
				return true
			})
		}
	}
	s.syncTrackLocked()
}

// MovePhase is where a move in flight stands on this store.
type MovePhase uint8

const (
	MoveExporting MovePhase = iota + 1 // out: begun, writes recorded
	MoveFenced                         // out: writes refused
	MoveImporting                      // in: staging
)

// MoveInfo describes a move in flight (Store.Moves).
type MoveInfo struct {
	ID     uint64
	Phase  MovePhase
	Ranges []SlotRange
	Dirty  int // a move out's keys waiting for a drain
}

// Moves returns the moves in flight on this store, those out then those
// in, each ascending by id: what a new leader's orchestration resumes
// from.
func (s *Store) Moves() []MoveInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.slots == nil {
		return nil
	}
	var out []MoveInfo
	for _, m := range s.slots.out {
		ph := MoveExporting
		if m.fenced {
			ph = MoveFenced
		}
		out = append(out, MoveInfo{ID: m.id, Phase: ph, Ranges: slices.Clone(m.ranges), Dirty: m.dirty.Len()})
	}
	for _, m := range s.slots.in {
		out = append(out, MoveInfo{ID: m.id, Phase: MoveImporting, Ranges: slices.Clone(m.ranges)})
	}
	return out
}

// Chunks.
//
// A chunk carries keys of the moving slots from the source to the target,
// written by ExportSlots's view and by OpMoveDrain, read by OpMoveIn's
// stage. Its records are those of a snapshot (snapshot.go, kinds.go)
// without the version, which the target stamps as its own:
//
//	chunk  = version:byte(1) entry* end:byte(0) crc:uint32
//	entry  = kind:byte(1..15) keylen:uvarint key deadline:varint value
//	       | tombstone:byte(0x80) keylen:uvarint key   the key is absent
//	       | flush:byte(0x81)                          the slots were emptied
//
// crc is CRC-32C over every byte before it, little-endian.

const (
	chunkVersion   = 1
	chunkEnd       = 0
	chunkTombstone = 0x80
	chunkFlush     = 0x81
)

// chunkWriter builds a chunk through the snapshot's record writer.
type chunkWriter struct {
	out     bytes.Buffer
	sw      snapWriter
	records int
}

func newChunkWriter() *chunkWriter {
	w := &chunkWriter{}
	w.sw.cw = &crcWriter{w: bufio.NewWriterSize(&w.out, 4096)}
	w.sw.buf = append(make([]byte, 0, snapBufFlush), chunkVersion)
	return w
}

// size is the chunk's length so far.
func (w *chunkWriter) size() int { return int(w.sw.cw.n) + len(w.sw.buf) }

func (w *chunkWriter) item(it *item) {
	w.records++
	w.sw.buf = append(w.sw.buf, byte(it.kind))
	w.sw.string(it.key)
	w.sw.varint(it.exp)
	kindTable[it.kind].write(&w.sw, it)
}

func (w *chunkWriter) tombstone(key string) {
	w.records++
	w.sw.buf = append(w.sw.buf, chunkTombstone)
	w.sw.string(key)
}

func (w *chunkWriter) flush() {
	w.records++
	w.sw.buf = append(w.sw.buf, chunkFlush)
}

// finish ends the chunk and returns it.
func (w *chunkWriter) finish() []byte {
	w.sw.buf = append(w.sw.buf, chunkEnd)
	cw := w.sw.cw
	cw.write(w.sw.buf)
	cw.w.Write(binary.LittleEndian.AppendUint32(nil, cw.crc))
	cw.w.Flush() // into a bytes.Buffer: cannot fail
	return w.out.Bytes()
}

// EmptyChunk returns a chunk of no records: staged first under a move's
// id, it makes the move in (and so its abort) exist on the target, which
// then refuses any later chunk of that id.
func EmptyChunk() []byte { return newChunkWriter().finish() }

// chunkRecord is one decoded entry of a chunk: tag is its first byte,
// and it the item of a record (the key alone for a tombstone).
type chunkRecord struct {
	tag byte
	it  item
}

// decodeChunk reads a chunk whose keys must all be in the slots of
// ranges; collections are made in keyspace generation gen. It returns an
// error wrapping ErrCorrupt for anything else.
func decodeChunk(b []byte, ranges []SlotRange, gen uint64) ([]chunkRecord, error) {
	sr := &snapReader{r: bufio.NewReader(bytes.NewReader(b))}
	if v := sr.byte(); sr.err == nil && v != chunkVersion {
		return nil, fmt.Errorf("%w: chunk version %d, want %d", ErrCorrupt, v, chunkVersion)
	}
	var out []chunkRecord
	for sr.err == nil {
		start := sr.off
		tag := sr.byte()
		if sr.err != nil || tag == chunkEnd {
			break
		}
		rec := chunkRecord{tag: tag}
		switch {
		case tag == chunkFlush:
			out = append(out, rec)
			continue
		case tag != chunkTombstone && (int(tag) >= len(kindTable) || kindTable[tag].name == ""):
			return nil, fmt.Errorf("%w: chunk record at byte %d: unknown type %d", ErrCorrupt, start, tag)
		}
		buf := sr.bytes(nil)
		klen := len(buf)
		switch {
		case sr.err != nil:
		case tag == chunkTombstone:
			key := string(buf)
			rec.it = item{hash: keyHash(key), key: key}
		default:
			exp := sr.varint()
			if sr.err == nil && exp < 0 {
				return nil, fmt.Errorf("%w: chunk record at byte %d: negative deadline", ErrCorrupt, start)
			}
			rec.it = readChunkValue(sr, kind(tag), buf, klen, exp, gen)
		}
		if sr.err != nil {
			return nil, fmt.Errorf("%w, in the chunk record at byte %d", sr.err, start)
		}
		if slot := KeySlot(rec.it.key); !covers(ranges, slot) {
			return nil, fmt.Errorf("%w: chunk record at byte %d: key %q of slot %d, not a moving one", ErrCorrupt, start, rec.it.key, slot)
		}
		out = append(out, rec)
	}
	if sr.err != nil {
		return nil, fmt.Errorf("%w, in the chunk", sr.err)
	}
	want := sr.crc
	var tail [4]byte
	if _, err := io.ReadFull(sr.r, tail[:]); err != nil {
		return nil, fmt.Errorf("%w: chunk checksum missing", ErrCorrupt)
	}
	if got := binary.LittleEndian.Uint32(tail[:]); got != want {
		return nil, fmt.Errorf("%w: chunk checksum %#08x, computed %#08x", ErrCorrupt, got, want)
	}
	if _, err := sr.r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: bytes after the chunk's checksum", ErrCorrupt)
	}
	return out, nil
}

// readChunkValue reads a record's value, the key being buf[:klen], as
// readSnapshot does.
func readChunkValue(sr *snapReader, k kind, buf []byte, klen int, exp int64, gen uint64) item {
	if k == kindString {
		buf = sr.bytes(buf)
		if sr.err != nil {
			return item{}
		}
		return ownItem(buf, klen, exp)
	}
	key := string(buf)
	it := item{hash: keyHash(key), key: key, exp: exp, kind: k}
	kindTable[k].read(sr, &it)
	if it.obj != nil {
		*it.obj.cowGen() = gen
	}
	return it
}

// SlotExport is a point-in-time view of some slots' keys, read as chunks
// for a move's bulk copy (ExportSlots). It is meant for one goroutine.
type SlotExport struct {
	keys    *keyspace // nil after Release
	ranges  []SlotRange
	index   uint64
	r       int  // the range being read
	pos     item // where to go on from: the last key written, if started
	started bool
	sent    int // the keys Next returned so far
}

// ExportSlots returns a copy-on-write view of the keys of ranges, taken
// under the lock in microseconds like Snapshot, and read without it. Every
// slot of ranges must be in a move out begun before (exporting or
// fenced): the view and the drains after it then give the target the
// slots' final state (see the argument at the top of move.go).
func (s *Store) ExportSlots(ranges []SlotRange) (*SlotExport, error) {
	rs := normalizeRanges(ranges)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		for slot := r.Lo; slot <= r.Hi; slot++ {
			if s.slots == nil || (s.slots.mode[slot] != slotExporting && s.slots.mode[slot] != slotFenced) {
				return nil, fmt.Errorf("fsm: slot %d is not moving out", slot)
			}
		}
	}
	e := &SlotExport{keys: s.keys.Copy(), ranges: rs, index: s.applied}
	if len(rs) > 0 {
		e.pos = item{hash: slotHash(rs[0].Lo)}
	}
	return e, nil
}

// Keys returns the number of keys in the view, expired ones included.
func (e *SlotExport) Keys() int {
	n := 0
	if e.keys != nil {
		for _, r := range e.ranges {
			n += e.keys.countRange(slotRangeBounds(r))
		}
	}
	return n
}

// Sent returns the number of keys the chunks returned so far hold.
func (e *SlotExport) Sent() int { return e.sent }

// Index returns the AppliedIndex the view was taken at.
func (e *SlotExport) Index() uint64 { return e.index }

// Release drops the view.
func (e *SlotExport) Release() { e.keys = nil }

// Next returns the next chunk of the view, of about maxBytes (at least one
// record, whatever its size), and whether it was the last. After the last,
// or after Release, it returns an empty chunk and true.
func (e *SlotExport) Next(maxBytes int) (chunk []byte, done bool) {
	w := newChunkWriter()
	// The chunk's own size at once, rather than doubling up to it: a
	// move copies many chunks, each grown from nothing.
	w.out.Grow(min(maxBytes, 1<<20) + 8<<10)
	for e.keys != nil && e.r < len(e.ranges) {
		_, hi := slotRangeBounds(e.ranges[e.r])
		full := false
		e.keys.Ascend(e.pos, func(it item) bool {
			if hi != 0 && it.hash >= hi {
				return false
			}
			if e.started && it.hash == e.pos.hash && it.key == e.pos.key {
				return true // written by the call before
			}
			if w.records > 0 && w.size() >= maxBytes {
				full = true
				return false
			}
			w.item(&it)
			e.sent++
			e.pos, e.started = item{hash: it.hash, key: it.key}, true
			return true
		})
		if full {
			return w.finish(), false
		}
		e.r++
		if e.r < len(e.ranges) {
			e.pos, e.started = item{hash: slotHash(e.ranges[e.r].Lo)}, false
		}
	}
	return w.finish(), true
}
