package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvs/fsm"
	"kvs/group"
)

// moveDriver drives, on the leader of its source group, the lowest move
// of slots not finished (moves.go), step by step from its record, until
// it is finished or this node stops leading the group; a later round, on
// this node or on the group's next leader, resumes it from its record.
//
// The order across the two groups is the one fsm/move.go asks for: the
// target stages the bulk copy's view and then the drains after it, in
// the order the source took them; it activates only after the source's
// fence and a drain that left nothing, the source releases only after the
// activation, and the map names the target only after the release. Each
// step is proposed again when a leader resumes, so each is one the fsm
// takes twice alike (a repeated begin, fence, activate, release or
// cancel), except the copy: a copy resumed starts over under a new
// attempt, whose id on the target is new, written to the record before
// the attempts below it are retired there (retireThrough), so that a
// chunk a deposed leader still sends for an old attempt is refused, and
// a driver reading a stale record retires nothing.
type moveDriver struct {
	env    moveEnv
	sh     shape
	rate   *atomic.Int64 // bytes a second of the bulk copy (slot-move-rate), 0: no limit
	logger *slog.Logger
	stop   <-chan struct{}
	// retired holds, by move id, the attempts this driver has retired on
	// the target, all of 1 to that one (retireThrough). Memory only:
	// another node, or this one restarted, asks from 1 once.
	retired map[uint64]uint64
	// settle is how long drive waits for this node's replica of the meta
	// group to change a record that a step left as it was, before it
	// runs the step again; 0 is moveRound.
	settle time.Duration
}

// moveEnv is what a moveDriver works with: this node's replica of the
// meta group (which may lag behind the group), proposals to the meta group
// and to the data groups (here, or on their leaders), and this node's
// replicas of the data groups. nodeMoveEnv is a node's.
type moveEnv interface {
	// meta is name's value in this node's replica of the meta group;
	// metaAll all of them.
	meta(name string) (string, bool)
	metaAll() map[string]string
	proposeMeta(cmds []fsm.Command) ([]fsm.Reply, error)
	proposeGroup(g uint32, cmds []fsm.Command) ([]fsm.Reply, error)
	leads(g uint32) bool
	// exportSlots is a copy-on-write view of ranges in this node's
	// replica of group g, once it has applied every entry the group
	// committed; errStopped when the node holds no replica of it.
	exportSlots(g uint32, ranges []fsm.SlotRange) (*fsm.SlotExport, error)
}

// nodeMoveEnv is a node's moveEnv.
type nodeMoveEnv struct {
	gm   *groupsMeta
	node *group.Node
}

func (e nodeMoveEnv) meta(name string) (string, bool) { return e.gm.meta.store.Meta(name) }
func (e nodeMoveEnv) metaAll() map[string]string      { return e.gm.meta.store.MetaAll() }

func (e nodeMoveEnv) proposeMeta(cmds []fsm.Command) ([]fsm.Reply, error) {
	return e.gm.meta.keeper.propose(e.gm.srv, cmds)
}

func (e nodeMoveEnv) proposeGroup(g uint32, cmds []fsm.Command) ([]fsm.Reply, error) {
	return e.gm.srv.ProposeGroup(int(g), cmds)
}

func (e nodeMoveEnv) leads(id uint32) bool {
	g := e.node.Group(id)
	return g != nil && g.Node().IsLeader()
}

func (e nodeMoveEnv) exportSlots(id uint32, ranges []fsm.SlotRange) (*fsm.SlotExport, error) {
	g := e.node.Group(id)
	if g == nil {
		return nil, errStopped
	}
	// Every entry the group committed is applied here before the view:
	// a drain a deposed leader took is in it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := group.RaftErr(g.Node().ReadIndex(ctx))
	cancel()
	if err != nil {
		return nil, err
	}
	return g.Store().ExportSlots(ranges)
}

// slotMap is the stored slot map as this node's replica of the meta group
// has it.
func (d *moveDriver) slotMap() (group.SlotMap, error) {
	v, ok := d.env.meta(group.SlotMapMeta)
	if !ok {
		return group.SlotMap{}, errMove("the cluster has no stored slot map yet")
	}
	set, _, err := groupSetFrom(d.env.meta, d.sh.groups)
	if err != nil {
		return group.SlotMap{}, err
	}
	return group.ParseSlotMapIn(v, set)
}

// moveRound is how often the driver looks at the records.
const moveRound = 250 * time.Millisecond

// run drives moves until stop closes.
func (d *moveDriver) run() {
	t := time.NewTicker(moveRound)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		r, ok := d.next()
		if !ok || !d.leads(r.source) {
			continue
		}
		if err := d.drive(r.id); err != nil && !errors.Is(err, errStopped) {
			if e := err.Error(); e != lastErr {
				d.logger.Warn("slot move: a step failed; retrying", "move", r.id, "err", err)
				lastErr = e
			}
		} else {
			lastErr = ""
		}
	}
}

// next is the lowest move not finished.
func (d *moveDriver) next() (moveRecord, bool) {
	recs, err := moveRecords(d.env.metaAll())
	if err != nil {
		d.logger.Error("slot move records", "err", err)
	}
	for _, r := range recs {
		if !r.finished() {
			return r, true
		}
	}
	return moveRecord{}, false
}

// leads reports whether this node leads group id.
func (d *moveDriver) leads(id uint32) bool { return d.env.leads(id) }

// errStopped: the node stops, or leads the source group no more.
var errStopped = errors.New("slot move: stopped")

func (d *moveDriver) check(r moveRecord) error {
	select {
	case <-d.stop:
		return errStopped
	default:
	}
	if !d.leads(r.source) {
		return errStopped
	}
	return nil
}

// record is move id's record as this node's replica holds it.
func (d *moveDriver) record(id uint64) (moveRecord, error) {
	v, ok := d.env.meta(moveMeta(id))
	if !ok {
		return moveRecord{}, fmt.Errorf("slot move %d has no record", id)
	}
	return parseMoveRecord(id, v)
}

// advance writes next over r's record; false when the record was no
// longer r (a cancel, another leader's step), which the caller reads
// again.
func (d *moveDriver) advance(r, next moveRecord) (bool, error) {
	return d.advanceWhile(r, next, nil)
}

// advanceWhile is advance that writes only while each name of also
// (name, value expected, ...) holds its value too, in one transaction
// (fsm.MetaTxn, of the cluster's level txnLevel).
func (d *moveDriver) advanceWhile(r, next moveRecord, also []string) (bool, error) {
	cmd := metaCAS(moveMeta(r.id), r.String(), next.String())
	if len(also) > 0 {
		cmd = fsm.MetaTxn(append([]string{moveMeta(r.id), r.String()}, also...), []string{moveMeta(r.id), next.String()})
	}
	rs, err := d.env.proposeMeta([]fsm.Command{cmd})
	if err != nil {
		return false, err
	}
	ok := casDone(rs[0])
	if ok && (next.phase != r.phase || next.attempt != r.attempt) {
		d.logger.Info("slot move", "move", r.id, "phase", next.phase, "attempt", next.attempt,
			"slots", formatRanges(r.ranges), "from", r.source, "to", r.target)
	}
	return ok, nil
}

// drive takes move id through its phases until it is finished. Each
// phase's step ends by writing the next phase over the record it read;
// when the record changed meanwhile (a cancel), the next round reads it
// again.
func (d *moveDriver) drive(id uint64) error {
	last := ""
	for {
		r, err := d.record(id)
		if err != nil {
			return err
		}
		// A step that ends without error has written the next record,
		// unless its compare-and-set found another: a cancel, or a
		// record newer than this node's replica of the meta group has
		// applied yet (it lags behind the group). Proposing the same
		// step again at once would load the meta group's leader with
		// proposals bound to fail until the replica catches up: wait for
		// it to, a while.
		if s := r.String(); s == last {
			if r, err = d.awaitChange(r); err != nil {
				return err
			}
		}
		last = r.String()
		if r.finished() {
			d.logger.Info("slot move finished", "move", id, "phase", r.phase, "slots", formatRanges(r.ranges),
				"from", r.source, "to", r.target, "keys", r.keys, "bytes", r.bytes, "note", r.note)
			return nil
		}
		if err := d.check(r); err != nil {
			return err
		}
		d.logger.Debug("slot move step", "move", id, "phase", r.phase, "attempt", r.attempt)
		switch r.phase {
		case phaseBegun:
			err = d.begin(r)
		case phaseCopying, phaseFenced:
			err = d.copy(r)
		case phaseActivated:
			err = d.handOver(r)
		case phaseReleased:
			err = d.flip(r)
		case phaseFlipped:
			if err = d.purge(r, r.source); err == nil {
				err = d.advanceTo(r, phaseDone)
			}
		case phaseCancelling:
			err = d.cancel(r)
		default:
			return fmt.Errorf("slot move %d: unknown phase %q", id, r.phase)
		}
		if err != nil {
			return err
		}
	}
}

// awaitChange waits until this node's replica of the meta group holds
// another record of r's move than r, or settle has passed, and returns
// the record then; errStopped if the node stops meanwhile.
func (d *moveDriver) awaitChange(r moveRecord) (moveRecord, error) {
	settle := d.settle
	if settle <= 0 {
		settle = moveRound
	}
	deadline := time.Now().Add(settle)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-d.stop:
			return r, errStopped
		case <-t.C:
		}
		cur, err := d.record(r.id)
		if err != nil {
			return r, err
		}
		if cur.String() != r.String() {
			return cur, nil
		}
	}
	return r, nil
}

// advanceTo writes r's record at phase.
func (d *moveDriver) advanceTo(r moveRecord, phase string) error {
	next := r
	next.phase = phase
	_, err := d.advance(r, next)
	return err
}

// step proposes cmd to group g (here or on its leader) and returns its
// reply, an error for an error reply.
func (d *moveDriver) step(g uint32, cmd fsm.Command) (fsm.Reply, error) {
	rs, err := d.env.proposeGroup(g, []fsm.Command{cmd})
	if err != nil {
		return fsm.Reply{}, fmt.Errorf("group %d: %w", g, err)
	}
	if rs[0].Kind == fsm.ReplyError {
		return rs[0], fmt.Errorf("group %d: %w", g, stepError(rs[0].Str))
	}
	return rs[0], nil
}

// steps proposes cmds to group g in one entry and returns their replies,
// an error for the first error reply.
func (d *moveDriver) steps(g uint32, cmds ...fsm.Command) ([]fsm.Reply, error) {
	rs, err := d.env.proposeGroup(g, cmds)
	if err != nil {
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	for _, r := range rs {
		if r.Kind == fsm.ReplyError {
			return rs, fmt.Errorf("group %d: %w", g, stepError(r.Str))
		}
	}
	return rs, nil
}

// stepError is a step's error reply.
type stepError string

func (e stepError) Error() string { return string(e) }

// isReply reports whether err is a step's error reply of format (one of
// fsm/reply.go's): what a step repeated by a resuming leader may get.
func isReply(err error, format string) bool {
	var se stepError
	if !errors.As(err, &se) {
		return false
	}
	prefix, _, _ := strings.Cut(format, "%")
	_, suffix, _ := strings.Cut(format, "%d")
	return strings.HasPrefix(string(se), prefix) && strings.HasSuffix(string(se), suffix)
}

// begin tells both groups their slots, by the stored map (a store never
// told owns every slot, and a target must not own the slots it stages),
// and begins the move out on the source. A move whose slots the source no
// longer holds, by the map, is cancelled with a note.
func (d *moveDriver) begin(r moveRecord) error {
	m, err := d.slotMap()
	if err != nil {
		return err
	}
	// A group made while the cluster runs takes slots once its leader
	// has copied the functions and scripts in (seedGroups).
	set, setText, err := groupSetFrom(d.env.meta, d.sh.groups)
	if err != nil {
		return err
	} else if !set.Has(r.target) || !set.Has(r.source) {
		// Removed as the move was recorded: only by a cluster of a level
		// without fsm.OpMetaTxn (moveEntry), or by a restore. Rolled
		// back (cancel), not just ended: a round that read the list
		// before the removal may have begun the move at the source.
		next := r
		next.phase, next.note = phaseCancelling, "a group of the move was removed"
		_, err := d.advance(r, next)
		return err
	} else if !seededIn(d.env.meta, set, r.target) {
		return fmt.Errorf("group %d: waiting for its leader to copy the functions and scripts in", r.target)
	}
	for _, rg := range r.ranges {
		for s := rg.Lo; s <= rg.Hi; s++ {
			if m.Owner(s) != r.source {
				next := r
				next.phase, next.note = phaseCancelled, fmt.Sprintf("slot %d is group %d's, not the source's", s, m.Owner(s))
				_, err := d.advance(r, next)
				return err
			}
		}
	}
	// Only this move is in flight, and every move before it finished
	// with the map flipped and the source purged: a store already told
	// holds exactly what the map gives it, and telling it again changes
	// nothing. Unless r and m are stale: this node's replica of the meta
	// group may lag behind the group it leads (it leads the source again
	// after another node drove the move on), and then m gives the slots
	// to the source still. A store that has taken part in this move, or
	// a later one, refuses the assignment; the record read again later
	// says where the move is.
	for _, g := range []uint32{r.source, r.target} {
		if _, err := d.step(g, fsm.SlotsAssignFor(groupRanges(m, g), sourceMoveID(r.id))); err != nil && !isReply(err, fsm.ErrMovesInFlight) {
			return err
		}
	}
	if _, err := d.step(r.source, fsm.MoveBegin(sourceMoveID(r.id), r.ranges)); err != nil && !isReply(err, fsm.ErrMoveExists) {
		return err
	}
	// The record goes on only while the list of groups is the one read
	// here: a driver whose replica of the meta group has not seen a
	// group's removal does not take a move of it on, whatever recorded
	// it (the next round reads again, and cancels it).
	next := r
	next.phase = phaseCopying
	var also []string
	if levels := (group.Levels{Meta: d.env.meta}); levels.Cluster() >= txnLevel {
		also = []string{group.GroupSetMeta, setText}
	}
	_, err = d.advanceWhile(r, next, also)
	return err
}

// groupRanges is the slots map m gives group g.
func groupRanges(m group.SlotMap, g uint32) []fsm.SlotRange {
	var out []fsm.SlotRange
	for s := 0; s < fsm.ClusterSlots; s++ {
		if m.Owner(s) != g {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Hi == s-1 {
			out[n-1].Hi = s
		} else {
			out = append(out, fsm.SlotRange{Lo: s, Hi: s})
		}
	}
	return out
}

// pace is the bulk copy's rate in bytes a second, 0 for no limit (and
// for a driver given no rate).
func (d *moveDriver) pace() int64 {
	if d.rate == nil {
		return 0
	}
	return d.rate.Load()
}

// chunkBytes is the size of the chunks the copy stages: about an eighth
// of a second at the pace set, within 4 KiB and 256 KiB.
func (d *moveDriver) chunkBytes() int {
	rate := d.pace()
	if rate <= 0 {
		return 256 << 10
	}
	return int(min(max(rate/8, 4<<10), 256<<10))
}

// maxDrainRounds bounds the drains before the fence: under writes faster
// than the drains the set never empties, and the fence stops them.
const maxDrainRounds = 8

// copy runs one attempt of the copy: it writes the new attempt to the
// record and retires the attempts before it, then (under the new
// attempt's id on the target) stages the source's view of
// the slots, then the drains, fences the source once a drain left nothing (or
// after maxDrainRounds), drains until nothing is left, and writes the
// record at activated. A cancel meanwhile ends it with the record changed.
func (d *moveDriver) copy(r moveRecord) error {
	if r.attempt+1 >= 1<<attemptBits {
		next := r
		next.phase, next.note = phaseCancelling, "too many attempts at the copy"
		_, err := d.advance(r, next)
		return err
	}
	// saved is the record as last written: each write is a
	// compare-and-set from it, which a cancel makes fail.
	saved := r
	save := func(next moveRecord) (bool, error) {
		if next.String() == saved.String() {
			return true, nil
		}
		ok, err := d.advance(saved, next)
		if ok {
			saved = next
		}
		return ok, err
	}
	// The new attempt is written first, by compare-and-set from the
	// record as read, and only then the attempts before it retired on the
	// target. The record may be stale: this node's replica of the meta
	// group lags behind the group it leads (it leads the source again
	// before its replica has seen another leader's last writes, or its
	// replica is cut off and its own writes went through the meta group's
	// leader), and the move may be activated by now, its attempt's copy
	// on the target due to go live, which a retired attempt refuses for
	// good. A stale record fails the compare-and-set, and nothing is
	// retired. Every attempt below the one written is retired, however
	// many times a copy failed between the write and the retire.
	before := r.attempt
	r.attempt, r.keys, r.bytes, r.total = r.attempt+1, 0, 0, 0
	if ok, err := save(r); err != nil || !ok {
		return err // read again
	}
	if err := d.retireThrough(r, before); err != nil {
		return err
	}
	view, err := d.env.exportSlots(r.source, r.ranges)
	if err != nil {
		return err
	}
	defer view.Release()
	r.total = int64(view.Keys())
	tid := targetMoveID(r.id, r.attempt)
	stage := func(chunk []byte) error {
		if _, err := d.step(r.target, fsm.MoveStage(tid, r.ranges, chunk)); err != nil {
			return err
		}
		r.bytes += int64(len(chunk))
		return nil
	}
	p := pacer{rate: d.pace, start: time.Now()}
	lastSaved := time.Now()
	for first := true; ; first = false {
		if err := d.check(r); err != nil {
			return err
		}
		// The size read each chunk: a pace changed mid-copy (CONFIG SET
		// slot-move-rate) changes the chunks' size with it.
		chunk, done := view.Next(d.chunkBytes())
		if first || view.Sent() > int(r.keys) {
			if err := stage(chunk); err != nil {
				return err
			}
			p.wait(r.bytes, d.stop)
		}
		r.keys = int64(view.Sent())
		if done || time.Since(lastSaved) >= time.Second {
			// The progress, and a cancel found.
			if ok, err := save(r); err != nil || !ok {
				return err
			}
			lastSaved = time.Now()
		}
		if done {
			break
		}
	}
	// The fence goes in one entry with the drain after it: the writes
	// are refused from that entry on, and the hand-over's wait is a Raft
	// round shorter than with the fence in an entry of its own.
	fenced := r.phase == phaseFenced
	fenceNext := fenced
	for rounds := 1; ; rounds++ {
		if err := d.check(r); err != nil {
			return err
		}
		drain := fsm.MoveDrain(sourceMoveID(r.id), d.chunkBytes())
		var rep fsm.Reply
		if fenceNext {
			rs, err := d.steps(r.source, fsm.MoveFence(sourceMoveID(r.id)), drain)
			if err != nil {
				return err
			}
			rep, fenceNext = rs[1], false
		} else if rep, err = d.step(r.source, drain); err != nil {
			return err
		}
		chunk, more, err := fsm.DrainReply(rep)
		if err != nil {
			return err
		}
		if err := stage(chunk); err != nil {
			return err
		}
		switch {
		case fenced && !more:
			r.phase = phaseActivated
			_, err := save(r)
			return err
		case !fenced && (!more || rounds >= maxDrainRounds):
			// Fenced in the record first: a cancel from here on finds
			// the record changed, and the cancel unfences the source.
			r.phase = phaseFenced
			if ok, err := save(r); err != nil || !ok {
				return err
			}
			fenced, fenceNext = true, true
		}
	}
}

// retireThrough makes the staging of attempts 1 to a on the target gone
// for good, then purges the slots of what they staged. Each is aborted;
// one that never began there is then begun with an empty chunk and
// aborted, so that its id is finished and any chunk of it still on its
// way (from a deposed leader) is refused. That begin needs the slots free
// of any other staging, so it comes once every attempt in flight is
// aborted. The attempts this driver has retired all of before
// (d.retired) are not asked again.
func (d *moveDriver) retireThrough(r moveRecord, a uint64) error {
	from := d.retired[r.id] + 1
	if a < from {
		return nil
	}
	var unknown []uint64
	for i := from; i <= a; i++ {
		_, err := d.step(r.target, fsm.MoveAbort(targetMoveID(r.id, i)))
		switch {
		case err == nil || isReply(err, fsm.ErrMoveFinished):
		case isReply(err, fsm.ErrMoveUnknown):
			unknown = append(unknown, i)
		default:
			return err
		}
	}
	for _, i := range unknown {
		tid := targetMoveID(r.id, i)
		if err := d.purge(r, r.target); err != nil {
			return err
		}
		if _, err := d.step(r.target, fsm.MoveStage(tid, r.ranges, fsm.EmptyChunk())); err != nil && !isReply(err, fsm.ErrMoveFinished) {
			return err
		}
		if _, err := d.step(r.target, fsm.MoveAbort(tid)); err != nil && !isReply(err, fsm.ErrMoveFinished) {
			return err
		}
	}
	if err := d.purge(r, r.target); err != nil {
		return err
	}
	if d.retired == nil {
		d.retired = map[uint64]uint64{}
	}
	d.retired[r.id] = a
	return nil
}

// purgeStep is the keys one OpSlotsPurge deletes.
const purgeStep = 1000

// purge deletes the keys group g holds in the move's slots, which it does
// not own, in steps.
func (d *moveDriver) purge(r moveRecord, g uint32) error {
	for {
		if err := d.check(r); err != nil {
			return err
		}
		rep, err := d.step(g, fsm.SlotsPurge(r.ranges, purgeStep))
		if err != nil {
			return err
		}
		if rep.Kind != fsm.ReplyInt {
			return fmt.Errorf("group %d: a purge answered %v", g, rep)
		}
		if rep.Int == 0 {
			return nil
		}
	}
}

// handOver makes the target's staging live, then has the source give
// the slots up, before the map names the target: from the release on the
// source refuses every command on them, which the router sends on once
// the map moves (server/reroute.go), so no client reads there what the
// target has overwritten since. Each is a step the fsm takes twice alike.
func (d *moveDriver) handOver(r moveRecord) error {
	// The activation and the release are steps of two groups, taken at
	// once: no client reaches the target before the stored map names it,
	// which waits for both, and the source has refused writes to the
	// slots since the fence, so neither order between them shows anyone
	// anything. Both are idempotent, for a driver that resumes here.
	var wg sync.WaitGroup
	var activateErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, activateErr = d.step(r.target, fsm.MoveActivate(targetMoveID(r.id, r.attempt)))
	}()
	_, releaseErr := d.step(r.source, fsm.MoveRelease(sourceMoveID(r.id)))
	wg.Wait()
	if err := errors.Join(activateErr, releaseErr); err != nil {
		return err
	}
	// The record at released and the map's flip in one meta entry: the
	// clients' wait ends one round sooner. Should the map's
	// compare-and-set fail (the map changed meanwhile), flip does it
	// again from the released record.
	next := r
	next.phase = phaseReleased
	cmds := []fsm.Command{metaCAS(moveMeta(r.id), r.String(), next.String())}
	m, err := d.slotMap()
	if err != nil {
		return err
	}
	var flipped group.SlotMap
	if !ownsAll(m, r.ranges, r.target) {
		if flipped, err = m.Flip(mapRanges(r.ranges), r.target); err != nil {
			return err
		}
		cmds = append(cmds, metaCAS(group.SlotMapMeta, m.String(), flipped.String()))
	}
	rs, err := d.env.proposeMeta(cmds)
	if err != nil {
		return err
	}
	if casDone(rs[0]) {
		d.logger.Info("slot move", "move", r.id, "phase", next.phase, "attempt", next.attempt,
			"slots", formatRanges(r.ranges), "from", r.source, "to", r.target)
	}
	if len(rs) > 1 && casDone(rs[1]) {
		d.logger.Info("slot map flipped for a slot move", "move", r.id, "version", flipped.Version())
	}
	return nil
}

// mapRanges is ranges as the slot map takes them.
func mapRanges(ranges []fsm.SlotRange) []group.SlotRange {
	gr := make([]group.SlotRange, len(ranges))
	for i, x := range ranges {
		gr[i] = group.SlotRange{First: x.Lo, Last: x.Hi}
	}
	return gr
}

func (d *moveDriver) flip(r moveRecord) error {
	for {
		if err := d.check(r); err != nil {
			return err
		}
		m, err := d.slotMap()
		if err != nil {
			return err
		}
		if ownsAll(m, r.ranges, r.target) {
			return d.advanceTo(r, phaseFlipped)
		}
		next, err := m.Flip(mapRanges(r.ranges), r.target)
		if err != nil {
			return err
		}
		if _, err := d.env.proposeMeta([]fsm.Command{metaCAS(group.SlotMapMeta, m.String(), next.String())}); err != nil {
			return err
		}
		d.logger.Info("slot map flipped for a slot move", "move", r.id, "version", next.Version())
	}
}

func ownsAll(m group.SlotMap, ranges []fsm.SlotRange, g uint32) bool {
	for _, r := range ranges {
		for s := r.Lo; s <= r.Hi; s++ {
			if m.Owner(s) != g {
				return false
			}
		}
	}
	return true
}

// cancel rolls the move back: the source owns the slots again (its fence
// lifted first, so writes go on), and the target's staging is retired.
func (d *moveDriver) cancel(r moveRecord) error {
	if _, err := d.step(r.source, fsm.MoveCancel(sourceMoveID(r.id))); err != nil && !isReply(err, fsm.ErrMoveUnknown) {
		return err
	}
	if err := d.retireThrough(r, r.attempt); err != nil {
		return err
	}
	return d.advanceTo(r, phaseCancelled)
}

// pacer holds a copy to rate bytes a second.
type pacer struct {
	rate func() int64 // bytes a second, read at each wait; <= 0: no limit
	// start and base: the pace is counted from start, when base bytes
	// were sent; a change of rate starts the count again from there.
	start time.Time
	base  int64
	last  int64 // the rate of the last wait
}

// due returns when the sent bytes are due at the pace, and false when
// there is no limit. A rate changed since the last call counts from now,
// with what was sent so far, so a copy slowed or sped up mid-way takes
// the new pace at once, owing nothing and owed nothing.
func (p *pacer) due(sent int64, now time.Time) (time.Time, bool) {
	rate := p.rate()
	if rate != p.last {
		p.start, p.base, p.last = now, sent, rate
	}
	if rate <= 0 {
		return time.Time{}, false
	}
	return p.start.Add(time.Duration(float64(sent-p.base) / float64(rate) * float64(time.Second))), true
}

func (p *pacer) wait(sent int64, stop <-chan struct{}) {
	due, ok := p.due(sent, time.Now())
	if !ok {
		return
	}
	// Waits are bounded, so a rate raised while the copy waits is taken
	// within the second.
	for {
		d := min(time.Until(due), time.Second)
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return
		}
		if due, ok = p.due(sent, time.Now()); !ok {
			return
		}
	}
}

func startMoves(wg *sync.WaitGroup, d *moveDriver) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.run()
	}()
}
