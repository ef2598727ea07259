package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Slot ownership: which of the 16384 hash slots this store serves. A
// store that was never told owns them all (memory and durable mode, a
// single-group cluster, every data dir written before ownership
// existed) and keeps no table: Store.slots is nil and every command
// pays one nil check. OpSlotsAssign sets the owned set; a move (move.go)
// changes it slot range by slot range. Each slot is in one mode:
//
//	owned      served
//	exporting  served; every key written or deleted is recorded for a move out
//	fenced     reads served, writes refused: a move out is handing the slot over
//	not owned  nothing served; keys left here are invisible and purged
//	importing  nothing served; keys here are a move in's staging
//
// Refusal is per command, before it runs (applyLocked, readHeld): a write
// with a key in a slot not owned or fenced, or a read with a key in a slot
// not owned, gets an error reply and changes nothing, however many keys it
// has (MSET, EXEC's commands, a script's declared keys). A script's
// undeclared key is refused when its command runs, which fails the script
// there, as Redis Cluster fails a script that reaches a key of another
// node. Active expiry and eviction pass over keys they may not delete
// instead (opSpec.slotSkips). Keys of slots not owned stay in the
// keyspace until OpSlotsPurge deletes them, and nothing sees them
// meanwhile: SCAN, KEYS, RANDOMKEY, DBSIZE, Stats, ExpiredKeys, eviction
// and the slot commands skip them, SORT's BY and GET lookups miss them.
// A snapshot keeps them, with the table, so a restored replica purges
// the same keys.

// SlotRange is the slots Lo to Hi, both included (CLUSTER ADDSLOTSRANGE's
// form).
type SlotRange struct{ Lo, Hi int }

// slotMode is one slot's mode; the order matters: a write needs at most
// slotExporting, a read at most slotFenced.
type slotMode uint8

const (
	slotOwned slotMode = iota
	slotExporting
	slotFenced
	slotNotOwned
	slotImporting
)

// slotTable is Store.slots: the modes and the moves in flight (move.go).
type slotTable struct {
	// mode is replaced, never modified once set, so a snapshot shares
	// it; hidden lists its runs of slots not served (not owned,
	// importing), ascending, computed when it is set.
	mode   *[ClusterSlots]slotMode
	hidden []SlotRange
	// out and in are the moves in flight (move.go), ascending by id;
	// done the moves finished here, ascending by id, so that an entry
	// repeated for a finished move is not taken for a new one.
	out  []*moveOut
	in   []*moveIn
	done []moveDone
}

// newSlotTable returns a table owning every slot.
func newSlotTable() *slotTable {
	return &slotTable{mode: new([ClusterSlots]slotMode)}
}

// setModes makes m the modes; m must not be modified afterwards.
func (t *slotTable) setModes(m *[ClusterSlots]slotMode) {
	t.mode = m
	t.hidden = t.hidden[:0:0]
	for slot := 0; slot < ClusterSlots; slot++ {
		if m[slot] >= slotNotOwned {
			t.hidden = appendSlot(t.hidden, slot)
		}
	}
}

// withModes returns a copy of the modes with the slots of ranges set to
// mode, for setModes.
func (t *slotTable) withModes(ranges []SlotRange, mode slotMode) *[ClusterSlots]slotMode {
	m := *t.mode
	for _, r := range ranges {
		for slot := r.Lo; slot <= r.Hi; slot++ {
			m[slot] = mode
		}
	}
	return &m
}

// visible reports whether the keys of slot are served.
func (t *slotTable) visible(slot int) bool { return t.mode[slot] < slotNotOwned }

// nextVisible returns the first slot from slot on whose keys are served,
// or ClusterSlots.
func (t *slotTable) nextVisible(slot int) int {
	for slot < ClusterSlots && !t.visible(slot) {
		slot++
	}
	return slot
}

// hiddenLocked reports whether the item with hash is in a slot the store
// does not serve.
func (s *Store) hiddenLocked(hash uint64) bool {
	return s.slots != nil && !s.slots.visible(CursorSlot(hash))
}

// Ownership ops, in the admin range after OpACLSet.
const (
	// OpSlotsAssign: Args[0]=ranges (SlotRanges); Int=the id of the move
	// whose begin assigns them (0: none). The store owns exactly those
	// slots from here on: a new group's first entry. Refused while a
	// move is in flight; when the store has taken part in move Int or a
	// later one (a move's id is above every earlier move's), since the
	// ranges then come from a slot map older than what that move made of
	// the store's slots; and when a slot it gives back to the store holds
	// keys left to purge. Reply +OK.
	OpSlotsAssign Op = opBaseAdmin + 1 + iota
	// OpSlotsPurge: Args[0]=ranges, Int=max (>= 1). Deletes up to max of
	// the keys left in the slots of ranges that are not owned (and not
	// being imported), in keyspace order. Reply :the keys left to purge
	// in those slots (0: done).
	OpSlotsPurge
)

func init() {
	registerOp(OpSlotsAssign, opSpec{name: "SLOTSASSIGN", write: true, args: 1, keys: keysNone, level: 1,
		check: checkRangesArg(0), apply: applySlotsAssign})
	registerOp(OpSlotsPurge, opSpec{name: "SLOTSPURGE", write: true, args: 1, keys: keysNone, level: 1,
		check: func(c *Command) error {
			if c.Int < 1 {
				return errorString("purge count below 1")
			}
			return checkRangesArg(0)(c)
		}, apply: applySlotsPurge})
}

// SlotsAssign returns the OpSlotsAssign making the store own ranges.
func SlotsAssign(ranges []SlotRange) Command {
	return Command{Op: OpSlotsAssign, Args: [][]byte{AppendSlotRanges(nil, ranges)}}
}

// SlotsAssignFor returns the OpSlotsAssign making the store own ranges
// as move id begins, by the slot map before it: refused by a store that
// has taken part in move id or a later one, whose slots that map no
// longer describes.
func SlotsAssignFor(ranges []SlotRange, id uint64) Command {
	c := SlotsAssign(ranges)
	c.Int = int64(id)
	return c
}

// SlotsPurge returns the OpSlotsPurge deleting up to max keys of ranges.
func SlotsPurge(ranges []SlotRange, max int) Command {
	return Command{Op: OpSlotsPurge, Int: int64(max), Args: [][]byte{AppendSlotRanges(nil, ranges)}}
}

// AppendSlotRanges appends the encoding of ranges, sorted and with
// overlapping or adjacent ranges merged, to dst:
//
//	ranges = count:uvarint (lo:uvarint hi:uvarint)*count
//
// ranges ascending, disjoint and not adjacent, lo <= hi < 16384. Slots
// outside 0..16383 are a bug of the caller and panic.
func AppendSlotRanges(dst []byte, ranges []SlotRange) []byte {
	rs := normalizeRanges(ranges)
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = binary.AppendUvarint(dst, uint64(r.Lo))
		dst = binary.AppendUvarint(dst, uint64(r.Hi))
	}
	return dst
}

// normalizeRanges returns ranges sorted, merged where they overlap or
// touch.
func normalizeRanges(ranges []SlotRange) []SlotRange {
	rs := slices.Clone(ranges)
	for _, r := range rs {
		if r.Lo < 0 || r.Hi >= ClusterSlots || r.Lo > r.Hi {
			panic(fmt.Sprintf("fsm: slot range %d-%d", r.Lo, r.Hi))
		}
	}
	slices.SortFunc(rs, func(a, b SlotRange) int { return a.Lo - b.Lo })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo <= out[n-1].Hi+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// decodeSlotRanges reads AppendSlotRanges's encoding, rejecting any other.
func decodeSlotRanges(b []byte) ([]SlotRange, error) {
	d := decoder{b: b}
	n := d.count(2)
	var out []SlotRange
	for i := 0; i < n && d.err == nil; i++ {
		lo, hi := d.uvarint(), d.uvarint()
		switch {
		case d.err != nil:
		case hi >= ClusterSlots || lo > hi:
			d.fail("slot range out of bounds")
		case i > 0 && int(lo) <= out[i-1].Hi+1:
			d.fail("slot ranges not ascending and apart")
		default:
			out = append(out, SlotRange{int(lo), int(hi)})
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes after the slot ranges")
	}
	return out, d.err
}

// checkRangesArg is an opSpec.check for ranges in Args[i].
func checkRangesArg(i int) func(c *Command) error {
	return func(c *Command) error {
		_, err := decodeSlotRanges(c.Args[i])
		return err
	}
}

// mustRanges decodes ranges that Validate has checked.
func mustRanges(b []byte) []SlotRange {
	rs, err := decodeSlotRanges(b)
	if err != nil {
		panic(err)
	}
	return rs
}

func applySlotsAssign(s *Store, now int64, c *Command) Reply {
	s.reportDirtyLocked(0)
	t := s.slotsLocked()
	if len(t.out) > 0 || len(t.in) > 0 {
		return ErrorReply(ErrMovesInFlight)
	}
	if n := len(t.done); c.Int > 0 && n > 0 && t.done[n-1].id >= uint64(c.Int) {
		return moveError(ErrMoveSuperseded, c.Int, t.done[n-1].id)
	}
	m := new([ClusterSlots]slotMode)
	for i := range m {
		m[i] = slotNotOwned
	}
	for _, r := range mustRanges(c.Args[0]) {
		for slot := r.Lo; slot <= r.Hi; slot++ {
			m[slot] = slotOwned
		}
	}
	// A slot given back must be empty: keys left in it since it was
	// given up are stale, and must not come back.
	for _, run := range t.hidden {
		if s.keys.countRange(slotRangeBounds(run)) == 0 {
			continue
		}
		for slot := run.Lo; slot <= run.Hi; slot++ {
			if m[slot] == slotOwned && s.keys.countRange(slotBounds(slot)) > 0 {
				return moveError(ErrMoveNotPurged, slot)
			}
		}
	}
	t.setModes(m)
	return replyOK
}

// slotsLocked returns the slot table, made (owning every slot) if the
// store had none.
func (s *Store) slotsLocked() *slotTable {
	if s.slots == nil {
		s.slots = newSlotTable()
	}
	return s.slots
}

// itemsInRanges returns the keys the slots of ranges hold, in order, at
// most limit of them (limit < 0: all of them).
func (s *Store) itemsInRanges(ranges []SlotRange, limit int) []item {
	var out []item
	for _, r := range ranges {
		lo, hi := slotRangeBounds(r)
		s.keys.Ascend(item{hash: lo}, func(it item) bool {
			if hi != 0 && it.hash >= hi || len(out) == limit {
				return false
			}
			out = append(out, it)
			return true
		})
	}
	return out
}

func applySlotsPurge(s *Store, now int64, c *Command) Reply {
	s.reportDirtyLocked(0)
	ranges := mustRanges(c.Args[0])
	if s.slots == nil {
		return replyZero // every slot owned: nothing to purge
	}
	doomed := s.itemsInRanges(s.purgeableRuns(ranges), int(c.Int))
	for _, it := range doomed {
		if prev, ok := s.keys.purge(it); ok {
			s.forgetLocked(prev)
		}
	}
	var left int
	for _, run := range s.purgeableRuns(ranges) {
		left += s.keys.countRange(slotRangeBounds(run))
	}
	return IntReply(int64(left))
}

// purgeableRuns returns the runs of slots within ranges that are not
// owned and not being imported: where OpSlotsPurge deletes.
func (s *Store) purgeableRuns(ranges []SlotRange) []SlotRange {
	var out []SlotRange
	for _, r := range ranges {
		for slot := r.Lo; slot <= r.Hi; slot++ {
			if s.slots.mode[slot] == slotNotOwned {
				out = appendSlot(out, slot)
			}
		}
	}
	return out
}

// slotRangeBounds returns the keyspace range of the slots of r: hashes
// from lo up to (not including) hi, hi 0 when r ends at the last slot.
func slotRangeBounds(r SlotRange) (lo, hi uint64) {
	lo = slotHash(r.Lo)
	if r.Hi+1 < ClusterSlots {
		hi = slotHash(r.Hi + 1)
	}
	return lo, hi
}

// Refusal.

// refusedLocked returns the error reply refusing c, and true, when c has
// a key in a slot the store may not run it for (see above). Only called
// with a slot table.
func (s *Store) refusedLocked(c *Command) (Reply, bool) {
	sp := c.Op.spec()
	switch {
	case sp.slotSkips:
		return Reply{}, false
	case c.Op == OpExec:
		return s.execRefusedLocked(c)
	case c.Op == OpFlushAll:
		if slot, ok := s.slots.firstFenced(); ok {
			return slotMovingReply(slot), true
		}
		return Reply{}, false
	}
	var keys [][]byte
	switch {
	case sp.keys != nil:
		keys = sp.keys(c)
	case len(c.Args) > 0:
		keys = c.Args[:1]
	}
	// A no-writes script is in the log only to load it; it reads.
	write := sp.write && (c.Op != OpEval || c.Flags&FlagScriptNoWrites == 0)
	for _, k := range keys {
		if r, refused := s.keyRefusedLocked(k, write); refused {
			return r, true
		}
	}
	return Reply{}, false
}

// keyRefusedLocked is refusedLocked for one key of a write or a read.
func (s *Store) keyRefusedLocked(key []byte, write bool) (Reply, bool) {
	slot := KeySlot(key)
	switch m := s.slots.mode[slot]; {
	case m >= slotNotOwned:
		return slotNotOwnedReply(slot), true
	case write && m == slotFenced:
		return slotMovingReply(slot), true
	}
	return Reply{}, false
}

// execRefusedLocked refuses a transaction as a whole when one of its
// commands, read or write, would be refused, or one of its watched keys
// is of a slot the store does not own: its state, which decides whether
// the transaction runs, is another group's.
func (s *Store) execRefusedLocked(c *Command) (Reply, bool) {
	var sc execScratch // not pooled: the commands may be long
	if decodeExec(c, &sc) != nil {
		return Reply{}, false // applyExec panics on it
	}
	for _, k := range sc.keys {
		if r, refused := s.keyRefusedLocked(k, false); refused {
			return r, true
		}
	}
	for i := range sc.cmds {
		if r, refused := s.refusedLocked(&sc.cmds[i]); refused {
			return r, true
		}
	}
	return Reply{}, false
}

// firstFenced returns the lowest fenced slot.
func (t *slotTable) firstFenced() (int, bool) {
	for slot, m := range t.mode {
		if m == slotFenced {
			return slot, true
		}
	}
	return 0, false
}

func slotMovingReply(slot int) Reply {
	return ErrorReply(ErrSlotMovingPrefix + strconv.Itoa(slot) + ErrSlotMovingSuffix)
}

func slotNotOwnedReply(slot int) Reply {
	return ErrorReply(ErrSlotNotOwnedPrefix + strconv.Itoa(slot) + ErrSlotNotOwnedSuffix)
}

// SlotMoving reports whether r is the refusal of a write to a fenced slot
// (a move is handing the slot over: retry in a moment, on the same or the
// new owner), and which slot.
func SlotMoving(r Reply) (slot int, ok bool) {
	return slotOfError(r, ErrSlotMovingPrefix, ErrSlotMovingSuffix)
}

// SlotNotOwned reports whether r is the refusal of a command with a key in
// a slot the store does not own (the server redirects it: MOVED, or
// forwarding to the owner), and which slot.
func SlotNotOwned(r Reply) (slot int, ok bool) {
	return slotOfError(r, ErrSlotNotOwnedPrefix, ErrSlotNotOwnedSuffix)
}

func slotOfError(r Reply, prefix, suffix string) (int, bool) {
	if r.Kind != ReplyError || !strings.HasPrefix(r.Str, prefix) || !strings.HasSuffix(r.Str, suffix) {
		return 0, false
	}
	n, err := strconv.Atoi(r.Str[len(prefix) : len(r.Str)-len(suffix)])
	if err != nil || n < 0 || n >= ClusterSlots {
		return 0, false
	}
	return n, true
}

// Visibility.

// ascendVisibleLocked is keyspace.Ascend over the slots the store
// serves: runs of slots it does not are jumped over, not walked.
func (s *Store) ascendVisibleLocked(pivot item, fn func(item) bool) {
	if s.slots == nil {
		s.keys.Ascend(pivot, fn)
		return
	}
	for {
		jump, stopped := -1, false
		s.keys.Ascend(pivot, func(it item) bool {
			if slot := CursorSlot(it.hash); !s.slots.visible(slot) {
				jump = slot
				return false
			}
			stopped = !fn(it)
			return !stopped
		})
		if stopped || jump < 0 {
			return
		}
		next := s.slots.nextVisible(jump)
		if next == ClusterSlots {
			return
		}
		pivot = item{hash: slotHash(next)}
	}
}

// hiddenLenLocked is the number of keys, expired or not, in slots the
// store does not serve: two ranks per run of them.
func (s *Store) hiddenLenLocked() int {
	if s.slots == nil {
		return 0
	}
	n := 0
	for _, run := range s.slots.hidden {
		n += s.keys.countRange(slotRangeBounds(run))
	}
	return n
}

// hiddenTTLsLocked is the number of keys with a deadline in slots the
// store does not serve. It visits them: a move's staging or what is left
// to purge.
func (s *Store) hiddenTTLsLocked() int {
	if s.slots == nil {
		return 0
	}
	n := 0
	for _, run := range s.slots.hidden {
		lo, hi := slotRangeBounds(run)
		s.keys.Ascend(item{hash: lo}, func(it item) bool {
			if hi != 0 && it.hash >= hi {
				return false
			}
			if it.exp != 0 {
				n++
			}
			return true
		})
	}
	return n
}

// slotWritableLocked reports whether a write may change key: active
// expiry and eviction (slotSkips) leave the others alone.
func (s *Store) slotWritableLocked(key []byte) bool {
	return s.slots == nil || s.slots.mode[KeySlot(key)] <= slotExporting
}

// SlotsOwned returns the ranges of slots the store owns (owned,
// exporting or fenced), ascending.
func (s *Store) SlotsOwned() []SlotRange {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.slots == nil {
		return []SlotRange{{0, ClusterSlots - 1}}
	}
	var out []SlotRange
	for slot := 0; slot < ClusterSlots; slot++ {
		if s.slots.mode[slot] < slotNotOwned {
			out = appendSlot(out, slot)
		}
	}
	return out
}

// appendSlot adds slot to runs, in ascending order: it extends the last
// run when it follows it.
func appendSlot(runs []SlotRange, slot int) []SlotRange {
	if n := len(runs); n > 0 && runs[n-1].Hi == slot-1 {
		runs[n-1].Hi = slot
		return runs
	}
	return append(runs, SlotRange{slot, slot})
}
