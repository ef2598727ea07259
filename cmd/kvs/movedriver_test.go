package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvs/fsm"
	"kvs/group"
)

// fakeGroups is a meta group and data groups as one store each, every
// proposal applied at once, for driving moves of slots in a test.
type fakeGroups struct {
	mu     sync.Mutex
	meta   *fsm.Store
	log    [][]fsm.Command // the meta group's entries
	groups map[uint32]*fsm.Store
	idx    map[uint32]uint64
}

const fakeNow = 1_700_000_000_000

func newFakeGroups(n int) *fakeGroups {
	c := &fakeGroups{meta: fsm.NewStore(), groups: map[uint32]*fsm.Store{}, idx: map[uint32]uint64{}}
	for g := 1; g <= n; g++ {
		c.groups[uint32(g)] = fsm.NewStore()
	}
	return c
}

// applyMeta appends an entry to the meta group's log and applies it.
func (c *fakeGroups) applyMeta(cmds ...fsm.Command) []fsm.Reply {
	c.log = append(c.log, cmds)
	return c.meta.Apply(uint64(len(c.log)), fakeNow, cmds)
}

func (c *fakeGroups) apply(g uint32, cmds ...fsm.Command) []fsm.Reply {
	c.idx[g]++
	return c.groups[g].Apply(c.idx[g], fakeNow, cmds)
}

// fakeEnv is one node's moveEnv over fakeGroups: its replica of the meta
// group applies the group's entries as they come, up to upTo of them when
// upTo >= 0 (a replica cut off, or slow).
type fakeEnv struct {
	c       *fakeGroups
	replica *fsm.Store
	applied int
	upTo    int
	lead    func(g uint32) bool
	// proposed counts the meta proposals; after each, onMeta if set.
	proposed int
	onMeta   func(n int)
	// reads counts the reads of the replica; after each, onRead if set.
	reads  int
	onRead func(n int)
	// onGroup, if set, sees each proposal to a data group first.
	onGroup func(g uint32, cmds []fsm.Command)
}

func newFakeEnv(c *fakeGroups, lead func(uint32) bool) *fakeEnv {
	return &fakeEnv{c: c, replica: fsm.NewStore(), upTo: -1, lead: lead}
}

func (e *fakeEnv) syncLocked() {
	for e.applied < len(e.c.log) && (e.upTo < 0 || e.applied < e.upTo) {
		e.applied++
		e.replica.Apply(uint64(e.applied), fakeNow, e.c.log[e.applied-1])
	}
}

func (e *fakeEnv) meta(name string) (string, bool) {
	e.c.mu.Lock()
	e.syncLocked()
	v, ok := e.replica.Meta(name)
	e.reads++
	n, on := e.reads, e.onRead
	e.c.mu.Unlock()
	if on != nil {
		on(n)
	}
	return v, ok
}

func (e *fakeEnv) metaAll() map[string]string {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	e.syncLocked()
	return e.replica.MetaAll()
}

func (e *fakeEnv) proposeMeta(cmds []fsm.Command) ([]fsm.Reply, error) {
	e.c.mu.Lock()
	rs := e.c.applyMeta(cmds...)
	e.syncLocked()
	e.proposed++
	n, on := e.proposed, e.onMeta
	e.c.mu.Unlock()
	if on != nil {
		on(n)
	}
	return rs, nil
}

func (e *fakeEnv) proposeGroup(g uint32, cmds []fsm.Command) ([]fsm.Reply, error) {
	if e.onGroup != nil {
		e.onGroup(g, cmds)
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if e.c.groups[g] == nil {
		return nil, fmt.Errorf("no group %d", g)
	}
	return e.c.apply(g, cmds...), nil
}

func (e *fakeEnv) leads(g uint32) bool { return e.lead(g) }

func (e *fakeEnv) exportSlots(g uint32, ranges []fsm.SlotRange) (*fsm.SlotExport, error) {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	return e.c.groups[g].ExportSlots(ranges)
}

// phaseIn returns move id's phase and attempt in store s.
func phaseIn(s *fsm.Store, id uint64) (string, uint64) {
	v, ok := s.Meta(moveMeta(id))
	if !ok {
		return "", 0
	}
	r, err := parseMoveRecord(id, v)
	if err != nil {
		return "", 0
	}
	return r.phase, r.attempt
}

// TestMoveDriverStaleRecord: node y drives move 1 (slots 0-99, from group 1
// to group 2) until its record says activated, and loses group 1's
// leadership before it activates the target's copy. Node x leads group 1
// next, while its replica of the meta group still says the move is
// copying, attempt 1: the copy x resumes must not retire attempt 1 on the
// target (its record has decided to activate it, which a retired attempt
// refuses), and once x's replica catches up it takes the move to done,
// every key on the target. It did not: x retired attempt 1 before writing
// attempt 2 to the record, whose compare-and-set then failed, and the move
// stayed at activated for good, its slots fenced at the source.
func TestMoveDriverStaleRecord(t *testing.T) {
	c, keys, upTo := activatedMove(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	xEnv := newFakeEnv(c, func(g uint32) bool { return g == 1 })
	xEnv.upTo = upTo
	stop := make(chan struct{})
	var once sync.Once
	xEnv.onMeta = func(n int) {
		if n >= 5 {
			once.Do(func() { close(stop) })
		}
	}
	x := &moveDriver{env: xEnv, sh: shape{groups: 2}, logger: logger, stop: stop, settle: time.Millisecond}
	if p, a := phaseIn(xEnv.replica, 1); p != "" {
		t.Fatalf("x's replica is not fresh: %s %d", p, a)
	}
	if err := x.drive(1); err != nil && err != errStopped {
		t.Logf("x's drive on the stale record: %v", err)
	}
	if p, a := phaseIn(c.meta, 1); p != phaseActivated || a != 1 {
		t.Fatalf("after x's stale drive move 1 is %s, attempt %d; want activated, attempt 1", p, a)
	}

	// x's replica catches up.
	xEnv.upTo = -1
	xEnv.onMeta = nil
	x.stop = make(chan struct{})
	if err := x.drive(1); err != nil {
		t.Fatalf("x's drive once its replica caught up: %v", err)
	}
	checkMovedToTarget(t, c, keys)
}

// TestMoveDriverStaleWaits: a driver whose replica of the meta group lags
// behind a record its step fails to replace (move 1 activated, the
// replica at copying) proposes the step once and then waits for its
// replica to catch up, reading it, instead of proposing the same failing
// step again and again to the meta group's leader; once the replica has
// caught up it takes the move to done.
func TestMoveDriverStaleWaits(t *testing.T) {
	c, keys, upTo := activatedMove(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := newFakeEnv(c, func(g uint32) bool { return g == 1 })
	env.upTo = upTo
	stale := -1 // the proposals made while the replica lagged
	env.onRead = func(n int) {
		// Many reads after the first proposal: the replica catches up.
		if env.proposed > 0 && stale < 0 && n > 50 {
			stale = env.proposed
			env.c.mu.Lock()
			env.upTo = -1
			env.c.mu.Unlock()
		}
	}
	d := &moveDriver{env: env, sh: shape{groups: 2}, logger: logger, stop: make(chan struct{}), settle: time.Hour}
	if err := d.drive(1); err != nil {
		t.Fatalf("drive: %v", err)
	}
	if stale != 1 {
		t.Errorf("%d meta proposals while the replica lagged, want 1", stale)
	}
	checkMovedToTarget(t, c, keys)
}

// activatedMove makes move 1 (slots 0-99, 40 keys, from group 1 to group
// 2), driven by a node y until its record says activated, and returns the
// groups, the keys, and the count of meta entries up to the one that
// first made the record copying, attempt 1: a replica stopped there has
// a stale record.
func activatedMove(t *testing.T) (*fakeGroups, map[string]string, int) {
	t.Helper()
	c := newFakeGroups(2)
	m, err := group.InitialSlotMap(2)
	if err != nil {
		t.Fatal(err)
	}
	c.applyMeta(metaCAS(group.SlotMapMeta, "", m.String()))
	keys := map[string]string{}
	for i := 0; len(keys) < 40; i++ {
		k := "k" + strconv.Itoa(i)
		if s := fsm.KeySlot(k); s <= 99 {
			keys[k] = "v" + strconv.Itoa(i)
			c.apply(1, fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte(k), []byte(keys[k])}})
		}
	}
	rec := moveRecord{id: 1, source: 1, target: 2, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun}
	c.applyMeta(metaCAS(moveNextMeta, "", "1"), metaCAS(moveMeta(1), "", rec.String()))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	// y leads group 1 until the record says activated.
	yEnv := newFakeEnv(c, func(g uint32) bool {
		p, _ := phaseIn(c.meta, 1)
		return g == 1 && p != phaseActivated
	})
	y := &moveDriver{env: yEnv, sh: shape{groups: 2}, logger: logger, stop: make(chan struct{})}
	if err := y.drive(1); err != errStopped {
		t.Fatalf("y's drive: %v, want it stopped at the activation", err)
	}
	if p, a := phaseIn(c.meta, 1); p != phaseActivated || a != 1 {
		t.Fatalf("move 1 is %s, attempt %d; want activated, attempt 1", p, a)
	}
	// The entry that first made the record copying, attempt 1: x's replica
	// of the meta group stops there.
	scratch, upTo := fsm.NewStore(), -1
	for i, e := range c.log {
		scratch.Apply(uint64(i+1), fakeNow, e)
		if p, a := phaseIn(scratch, 1); p == phaseCopying && a == 1 {
			upTo = i + 1
			break
		}
	}
	if upTo < 0 {
		t.Fatal("the record never said copying, attempt 1")
	}
	return c, keys, upTo
}

// checkMovedToTarget checks that move 1 is done with keys on group 2,
// none readable on group 1.
func checkMovedToTarget(t *testing.T, c *fakeGroups, keys map[string]string) {
	t.Helper()
	if p, _ := phaseIn(c.meta, 1); p != phaseDone {
		t.Fatalf("move 1 is %s, want done", p)
	}
	for k, v := range keys {
		r := c.groups[2].Read(fakeNow, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(k)}})
		if r.Kind != fsm.ReplyBulk || string(r.Bulk) != v {
			t.Errorf("GET %s on the target: %v, want %q", k, r, v)
		}
		if r := c.groups[1].Read(fakeNow, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(k)}}); r.Kind != fsm.ReplyError {
			t.Errorf("GET %s on the source: %v, want a refusal", k, r)
		}
	}
}

// TestMoveDriverRetiresEveryAttempt: a copy resumed from a record at
// attempt 2, whose attempt 1 is still staging on the target and whose
// attempt 2 never began there (its driver lost its leadership between
// writing it and retiring attempt 1), retires both before it stages
// attempt 3: attempt 1 aborted first, since attempt 2 can only be begun
// and aborted (so that a chunk of it still on its way is refused) on
// slots no other staging holds. The move then ends done.
func TestMoveDriverRetiresEveryAttempt(t *testing.T) {
	c := newFakeGroups(2)
	m, err := group.InitialSlotMap(2)
	if err != nil {
		t.Fatal(err)
	}
	c.applyMeta(metaCAS(group.SlotMapMeta, "", m.String()))
	key := ""
	for i := 0; key == ""; i++ {
		if k := "k" + strconv.Itoa(i); fsm.KeySlot(k) <= 99 {
			key = k
		}
	}
	c.apply(1, fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte(key), []byte("1")}})
	ranges := []fsm.SlotRange{{Lo: 0, Hi: 99}}
	rec := moveRecord{id: 1, source: 1, target: 2, ranges: ranges, phase: phaseBegun}
	c.applyMeta(metaCAS(moveNextMeta, "", "1"), metaCAS(moveMeta(1), "", rec.String()))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The begin, by a driver that stops once the record says copying.
	y := &moveDriver{env: newFakeEnv(c, func(uint32) bool {
		p, _ := phaseIn(c.meta, 1)
		return p == phaseBegun
	}), sh: shape{groups: 2}, logger: logger, stop: make(chan struct{})}
	if err := y.drive(1); err != errStopped {
		t.Fatalf("y's drive: %v", err)
	}
	// Attempt 1 staging on the target; the record at attempt 2.
	if r := c.apply(2, fsm.MoveStage(targetMoveID(1, 1), ranges, fsm.EmptyChunk())); r[0].Kind == fsm.ReplyError {
		t.Fatalf("staging attempt 1: %v", r[0])
	}
	v, _ := c.meta.Meta(moveMeta(1))
	cur, err := parseMoveRecord(1, v)
	if err != nil {
		t.Fatal(err)
	}
	next := cur
	next.attempt = 2
	c.applyMeta(metaCAS(moveMeta(1), cur.String(), next.String()))

	x := &moveDriver{env: newFakeEnv(c, func(g uint32) bool { return g == 1 }), sh: shape{groups: 2}, logger: logger, stop: make(chan struct{})}
	if err := x.drive(1); err != nil {
		t.Fatalf("x's drive: %v", err)
	}
	if p, a := phaseIn(c.meta, 1); p != phaseDone || a != 3 {
		t.Fatalf("move 1 is %s, attempt %d; want done, attempt 3", p, a)
	}
	if r := c.groups[2].Read(fakeNow, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(key)}}); r.Kind != fsm.ReplyBulk || string(r.Bulk) != "1" {
		t.Errorf("GET %s on the target: %v", key, r)
	}
}

// TestMoveDriverRemovedGroup: move 1 (slots 0-99, from group 1 to group
// 3) is recorded as group 3 is removed, which only a cluster below the
// transaction's level lets happen (or a restore), and the driver's
// replica of the meta group has not seen the removal yet. It must not
// take the move on into a group no node serves: its begin writes the
// record on only while the list of groups is the one it read, and once
// its replica catches up it rolls the move back, the source left with no
// move in flight (the next move out of it goes through).
func TestMoveDriverRemovedGroup(t *testing.T) {
	c := newFakeGroups(3)
	m, err := group.InitialSlotMap(2) // group 3 holds no slot yet
	if err != nil {
		t.Fatal(err)
	}
	set := group.DefaultGroupSet(3)
	set.Version = 1 // as stored once a group was added
	c.applyMeta(metaCAS(group.SlotMapMeta, "", m.String()), metaCAS(group.GroupSetMeta, "", set.Encode()),
		metaSet(group.ClusterLevelMeta, strconv.Itoa(txnLevel)))
	key := ""
	for i := 0; key == ""; i++ {
		if k := "k" + strconv.Itoa(i); fsm.KeySlot(k) <= 99 {
			key = k
		}
	}
	c.apply(1, fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte(key), []byte("1")}})
	rec := moveRecord{id: 1, source: 1, target: 3, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun}
	c.applyMeta(moveEntry(txnLevel-1, set.Encode(), "", rec)...)
	upTo := len(c.log)
	next, err := set.Remove(3)
	if err != nil {
		t.Fatal(err)
	}
	c.applyMeta(metaCAS(group.GroupSetMeta, set.Encode(), next.Encode()))

	env := newFakeEnv(c, func(g uint32) bool { return g == 1 })
	env.upTo = upTo
	env.onMeta = func(int) { env.upTo = -1 }
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &moveDriver{env: env, sh: shape{groups: 3}, logger: logger, stop: make(chan struct{})}
	if err := d.drive(1); err != nil {
		t.Fatalf("drive: %v", err)
	}
	v, _ := c.meta.Meta(moveMeta(1))
	got, err := parseMoveRecord(1, v)
	if err != nil {
		t.Fatal(err)
	}
	if got.phase != phaseCancelled || got.note != "a group of the move was removed" {
		t.Fatalf("move 1 is %s (%q), want cancelled as its group was removed", got.phase, got.note)
	}
	// Group 1 keeps its key and takes writes to the slots.
	if r := c.apply(1, fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte(key), []byte("2")}}); r[0].Kind == fsm.ReplyError {
		t.Fatalf("SET %s on the source after the cancel: %v", key, r[0])
	}
	// And moves out again.
	rec2 := moveRecord{id: 2, source: 1, target: 2, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun}
	if rs := c.applyMeta(moveEntry(txnLevel, next.Encode(), "1", rec2)...); !entryDone(rs) {
		t.Fatal("recording move 2 failed")
	}
	if err := d.drive(2); err != nil {
		t.Fatalf("drive of move 2: %v", err)
	}
	if p, _ := phaseIn(c.meta, 2); p != phaseDone {
		t.Fatalf("move 2 is %s, want done", p)
	}
	if r := c.groups[2].Read(fakeNow, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(key)}}); r.Kind != fsm.ReplyBulk || string(r.Bulk) != "2" {
		t.Errorf("GET %s on group 2: %v", key, r)
	}
}

// TestMoveDriverChunkFollowsPace: a copy whose pace is raised while it
// runs (CONFIG SET slot-move-rate) stages its next chunks at the size the
// new pace gives (chunkBytes), not at the size of the pace it began with:
// 100 KB begun at 32 KiB a second (chunks of 4 KiB) and then let go
// without limit (256 KiB) is staged in a few chunks, not in 25.
func TestMoveDriverChunkFollowsPace(t *testing.T) {
	c := newFakeGroups(2)
	m, err := group.InitialSlotMap(2)
	if err != nil {
		t.Fatal(err)
	}
	c.applyMeta(metaCAS(group.SlotMapMeta, "", m.String()))
	value := strings.Repeat("v", 1000)
	n := 0
	for i := 0; n < 100; i++ {
		if k := "k" + strconv.Itoa(i); fsm.KeySlot(k) <= 99 {
			c.apply(1, fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte(k), []byte(value)}})
			n++
		}
	}
	rec := moveRecord{id: 1, source: 1, target: 2, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun}
	c.applyMeta(metaCAS(moveNextMeta, "", "1"), metaCAS(moveMeta(1), "", rec.String()))
	var rate atomic.Int64
	rate.Store(32 << 10)
	var chunks []int
	env := newFakeEnv(c, func(g uint32) bool { return g == 1 })
	env.onGroup = func(g uint32, cmds []fsm.Command) {
		for _, cmd := range cmds {
			if cmd.Op == fsm.OpMoveIn && len(cmd.Args) == 2 && len(cmd.Args[1]) > 0 {
				chunks = append(chunks, len(cmd.Args[1]))
				rate.Store(0) // after the first chunk: no limit
			}
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &moveDriver{env: env, sh: shape{groups: 2}, rate: &rate, logger: logger, stop: make(chan struct{})}
	if err := d.drive(1); err != nil {
		t.Fatalf("drive: %v", err)
	}
	if p, _ := phaseIn(c.meta, 1); p != phaseDone {
		t.Fatalf("move 1 is %s, want done", p)
	}
	if len(chunks) < 2 || chunks[0] > 8<<10 || len(chunks) > 4 {
		t.Fatalf("chunks staged %v: want the first of about 4 KiB, then the rest in one or two", chunks)
	}
}

// TestMoveDriverFencesWithDrain: the source's fence goes in one entry with
// the drain after it, so that the hand-over waits one Raft round less,
// and no write lands between the fence and that drain.
func TestMoveDriverFencesWithDrain(t *testing.T) {
	c := newFakeGroups(2)
	m, err := group.InitialSlotMap(2)
	if err != nil {
		t.Fatal(err)
	}
	c.applyMeta(metaCAS(group.SlotMapMeta, "", m.String()))
	rec := moveRecord{id: 1, source: 1, target: 2, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun}
	c.applyMeta(metaCAS(moveNextMeta, "", "1"), metaCAS(moveMeta(1), "", rec.String()))
	fence := fsm.MoveFence(sourceMoveID(1))
	isFence := func(cmd fsm.Command) bool {
		return cmd.Op == fence.Op && cmd.Int == fence.Int && cmd.Int2 == fence.Int2
	}
	drain := fsm.MoveDrain(sourceMoveID(1), 1)
	var fences [][]fsm.Command
	env := newFakeEnv(c, func(g uint32) bool { return g == 1 })
	env.onGroup = func(g uint32, cmds []fsm.Command) {
		if g == 1 && slices.ContainsFunc(cmds, isFence) {
			fences = append(fences, cmds)
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &moveDriver{env: env, sh: shape{groups: 2}, logger: logger, stop: make(chan struct{})}
	if err := d.drive(1); err != nil {
		t.Fatalf("drive: %v", err)
	}
	if p, _ := phaseIn(c.meta, 1); p != phaseDone {
		t.Fatalf("move 1 is %s, want done", p)
	}
	if len(fences) != 1 || len(fences[0]) != 2 || !isFence(fences[0][0]) ||
		fences[0][1].Op != drain.Op || fences[0][1].Int != drain.Int {
		t.Fatalf("the fence went in %v; want one entry of the fence and a drain", fences)
	}
}
