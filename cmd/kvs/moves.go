package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// Moves of slots between data groups (docs/cluster.md, "Moving slots").
// Each move is a record in the meta group's metadata, under move/<id>:
//
//	<source> <target> <ranges> <phase> <attempt> <keys> <bytes> <total> [note]
//
// ranges as "first-last,first-last", the copy's progress (keys and bytes
// staged on the target, keys in the bulk copy's view) and why a move was
// cancelled by kvs rather than asked to be. Ids come from move/next, the
// last id given. Records are created and changed only by compare-and-set
// (fsm.OpMetaCAS), so whoever writes from a stale view changes nothing.
// The phases:
//
//	begun      recorded; the groups are told their slots, the source begins
//	copying    the bulk copy and the drains of the writes since
//	fenced     the source refuses writes to the slots; the last drains
//	activated  the target's staging is to become live, and the source is
//	           to give the slots up (both at once): no going back
//	released   both done; the stored slot map names the target (the same
//	           meta entry writes both), or is to
//	flipped    it does; the source purges the slots' keys
//	done
//	cancelling asked to roll back (before activated), being undone
//	cancelled
//
// The leader of the source group drives the lowest move not finished
// (moveDriver), one move at a time, from its record: a new leader resumes
// it from the phase the record holds.

// Move phases, as records hold them.
const (
	phaseBegun      = "begun"
	phaseCopying    = "copying"
	phaseFenced     = "fenced"
	phaseActivated  = "activated"
	phaseFlipped    = "flipped"
	phaseReleased   = "released"
	phaseDone       = "done"
	phaseCancelling = "cancelling"
	phaseCancelled  = "cancelled"
)

// moveNextMeta holds the last move id given.
const moveNextMeta = "move/next"

func moveMeta(id uint64) string { return "move/" + strconv.FormatUint(id, 10) }

// moveRecord is a move's record.
type moveRecord struct {
	id             uint64
	source, target uint32
	ranges         []fsm.SlotRange
	phase          string
	// attempt counts the copies begun: each copies from a new view under
	// its own id on the target (targetMoveID), the attempts before
	// retired there first, so that nothing a deposed leader still sends
	// for an old one is staged.
	attempt            uint64
	keys, bytes, total int64
	note               string
}

// finished reports whether the move is over, either way.
func (r moveRecord) finished() bool { return r.phase == phaseDone || r.phase == phaseCancelled }

// cancellable reports whether the move may still be rolled back.
func (r moveRecord) cancellable() bool {
	return r.phase == phaseBegun || r.phase == phaseCopying || r.phase == phaseFenced
}

func (r moveRecord) String() string {
	s := fmt.Sprintf("%d %d %s %s %d %d %d %d", r.source, r.target, formatRanges(r.ranges), r.phase,
		r.attempt, r.keys, r.bytes, r.total)
	if r.note != "" {
		s += " " + r.note
	}
	return s
}

// The fsm ids of a move's steps: the source's is the move's id shifted,
// each attempt's on the target that plus the attempt, so that a store that
// is the source of one move and the target of another never sees one id
// twice.
const attemptBits = 20

func sourceMoveID(id uint64) uint64 { return id << attemptBits }

func targetMoveID(id, attempt uint64) uint64 { return id<<attemptBits | attempt }

var errBadMoveRecord = errors.New("malformed slot move record")

func parseMoveRecord(id uint64, v string) (moveRecord, error) {
	f := strings.SplitN(v, " ", 9)
	if len(f) < 8 {
		return moveRecord{}, fmt.Errorf("%w %d: %q", errBadMoveRecord, id, v)
	}
	r := moveRecord{id: id, phase: f[3]}
	src, err1 := strconv.ParseUint(f[0], 10, 32)
	dst, err2 := strconv.ParseUint(f[1], 10, 32)
	ranges, err3 := parseRanges(f[2])
	var err4, err5, err6, err7 error
	r.attempt, err4 = strconv.ParseUint(f[4], 10, 64)
	r.keys, err5 = strconv.ParseInt(f[5], 10, 64)
	r.bytes, err6 = strconv.ParseInt(f[6], 10, 64)
	r.total, err7 = strconv.ParseInt(f[7], 10, 64)
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return moveRecord{}, fmt.Errorf("%w %d: %q: %v", errBadMoveRecord, id, v, err)
	}
	r.source, r.target, r.ranges = uint32(src), uint32(dst), ranges
	if len(f) == 9 {
		r.note = f[8]
	}
	return r, nil
}

func formatRanges(rs []fsm.SlotRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.Itoa(r.Lo) + "-" + strconv.Itoa(r.Hi)
	}
	return strings.Join(parts, ",")
}

func parseRanges(s string) ([]fsm.SlotRange, error) {
	var out []fsm.SlotRange
	for part := range strings.SplitSeq(s, ",") {
		a, b, ok := strings.Cut(part, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || lo < 0 || lo > hi || hi >= fsm.ClusterSlots {
			return nil, fmt.Errorf("bad slot range %q", part)
		}
		out = append(out, fsm.SlotRange{Lo: lo, Hi: hi})
	}
	return out, nil
}

// moveRecords returns the moves the metadata m holds, by id.
func moveRecords(m map[string]string) ([]moveRecord, error) {
	var out []moveRecord
	var errs []error
	for name, v := range m {
		rest, ok := strings.CutPrefix(name, "move/")
		if !ok || rest == "next" {
			continue
		}
		id, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			continue
		}
		r, err := parseMoveRecord(id, v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b moveRecord) int { return cmp.Compare(a.id, b.id) })
	return out, errors.Join(errs...)
}

// slotMoves is server.SlotMover over the meta group: KVS.SLOTS on any
// node writes the records through the meta group's leader.
type slotMoves struct {
	gm   *groupsMeta
	sh   shape
	rate *atomic.Int64 // slot-move-rate, for the time left
}

// errMove is a refusal of KVS.SLOTS, told to the client after "ERR ".
type errMove string

func (e errMove) Error() string { return string(e) }

// storedSlotMap is the meta group's slot map as this node's replica has
// it, its owners (and a flip's target) checked against the live data
// groups.
func storedSlotMap(gm *groupsMeta, sh shape) (group.SlotMap, error) {
	v, ok := gm.meta.store.Meta(group.SlotMapMeta)
	if !ok {
		return group.SlotMap{}, errMove("the cluster has no stored slot map yet")
	}
	set, _, err := readGroupSet(gm, sh.groups)
	if err != nil {
		return group.SlotMap{}, err
	}
	return group.ParseSlotMapIn(v, set)
}

// Move records a move of first..last to target: all of them of one other
// group by the stored map. The id and the record are written in one
// entry (moveEntry), by compare-and-set on the last id given, so two
// concurrent moves get two ids, and on the list of groups read, so that a
// group removed meanwhile (groupAdmin.Remove) takes no move.
func (sm *slotMoves) Move(first, last, target int) (uint64, error) {
	switch {
	case first < 0 || last >= fsm.ClusterSlots || first > last:
		return 0, errMove(fmt.Sprintf("invalid slot range %d-%d: want first <= last within 0-%d", first, last, fsm.ClusterSlots-1))
	}
	for try := 0; ; try++ {
		set, setText, err := readGroupSet(sm.gm, sm.sh.groups)
		if err != nil {
			return 0, err
		}
		if target < 1 || target > group.MaxGroupID || !set.Has(uint32(target)) {
			return 0, errMove(fmt.Sprintf("no data group %d: the cluster's are %s", target, idsText(set.Live)))
		}
		m, err := storedSlotMap(sm.gm, sm.sh)
		if err != nil {
			return 0, err
		}
		src := m.Owner(first)
		for s := first; s <= last; s++ {
			if m.Owner(s) != src {
				return 0, errMove(fmt.Sprintf("slots %d-%d are of more than one group (%d of group %d, %d of group %d): move each group's apart",
					first, last, first, src, s, m.Owner(s)))
			}
		}
		if src == uint32(target) {
			return 0, errMove(fmt.Sprintf("slots %d-%d are group %d's already", first, last, target))
		}
		cur, _ := sm.gm.meta.store.Meta(moveNextMeta)
		n, _ := strconv.ParseUint(cur, 10, 64)
		id := n + 1
		rec := moveRecord{id: id, source: src, target: uint32(target), ranges: []fsm.SlotRange{{Lo: first, Hi: last}}, phase: phaseBegun}
		entry := moveEntry(sm.gm.meta.keeper.levels.Cluster(), setText, cur, rec)
		rs, err := sm.gm.meta.keeper.propose(sm.gm.srv, entry)
		if err != nil {
			return 0, err
		}
		if entryDone(rs) {
			return id, nil
		}
		if try == 10 {
			return 0, errMove("the move ids kept changing: try again")
		}
	}
}

func casDone(r fsm.Reply) bool { return r.Kind == fsm.ReplyInt && r.Int == 1 }

// entryDone reports whether every compare-and-set (or transaction) of an
// entry set.
func entryDone(rs []fsm.Reply) bool {
	for _, r := range rs {
		if !casDone(r) {
			return false
		}
	}
	return len(rs) > 0
}

// txnLevel is the cluster's level from which the meta group takes
// fsm.OpMetaTxn.
const txnLevel = 2

// moveEntry is the meta group's entry that records rec, the move after
// the last id given, cur, while the list of groups is setText (the text
// read, "" for none stored): a transaction on both (fsm.MetaTxn) at a
// cluster level that has it. A cluster of a lower level records by two
// compare-and-sets, which the list may change between; no group is
// removed there (removeEntry needs the transaction), and the driver
// cancels a move whose group is gone at its begin.
func moveEntry(level int, setText, cur string, rec moveRecord) []fsm.Command {
	id := strconv.FormatUint(rec.id, 10)
	if level < txnLevel {
		return []fsm.Command{metaCAS(moveNextMeta, cur, id), metaCAS(moveMeta(rec.id), "", rec.String())}
	}
	return []fsm.Command{fsm.MetaTxn(
		[]string{group.GroupSetMeta, setText, moveNextMeta, cur, moveMeta(rec.id), ""},
		[]string{moveNextMeta, id, moveMeta(rec.id), rec.String()})}
}

// Moves lists the moves not finished and the last ten finished.
func (sm *slotMoves) Moves() ([]server.SlotMove, error) {
	recs, err := moveRecords(sm.gm.meta.store.MetaAll())
	if err != nil {
		return nil, err
	}
	var out []server.SlotMove
	finished := 0
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.finished() {
			if finished++; finished > 10 {
				continue
			}
		}
		out = append(out, server.SlotMove{
			ID: r.id, Source: int(r.source), Target: int(r.target), Slots: formatRanges(r.ranges),
			Phase: r.phase, Attempts: int64(r.attempt), Keys: r.keys, Bytes: r.bytes, TotalKeys: r.total, Left: timeLeft(r, sm.rate.Load()), Note: r.note,
		})
	}
	slices.Reverse(out)
	return out, nil
}

// timeLeft is the bulk copy's expected time left: the keys not copied at
// the bytes per key so far, at rate bytes a second; -1 when unknown.
func timeLeft(r moveRecord, rate int64) time.Duration {
	if r.phase != phaseCopying || r.total == 0 || r.keys == 0 || rate <= 0 {
		return -1
	}
	left := max(r.total-r.keys, 0) * (r.bytes / r.keys)
	return time.Duration(float64(left) / float64(rate) * float64(time.Second))
}

// Cancel asks move id to roll back: its record goes to cancelling, from
// which the source's leader undoes it, while it is before activated.
func (sm *slotMoves) Cancel(id uint64) error {
	for try := 0; ; try++ {
		v, ok := sm.gm.meta.store.Meta(moveMeta(id))
		if !ok {
			return errMove(fmt.Sprintf("no slot move %d", id))
		}
		r, err := parseMoveRecord(id, v)
		if err != nil {
			return err
		}
		switch {
		case r.phase == phaseCancelling || r.phase == phaseCancelled:
			return nil
		case !r.cancellable():
			return errMove(fmt.Sprintf("slot move %d is %s: past its hand-over, it cannot be cancelled", id, r.phase))
		}
		next := r
		next.phase = phaseCancelling
		rs, err := sm.gm.meta.keeper.propose(sm.gm.srv, []fsm.Command{metaCAS(moveMeta(id), v, next.String())})
		if err != nil {
			return err
		}
		if casDone(rs[0]) {
			return nil
		}
		if try == 20 {
			return errMove(fmt.Sprintf("slot move %d kept changing: try again", id))
		}
	}
}
