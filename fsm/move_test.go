package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// group is one replication group in a test: replicas that apply the same
// entries, whose replies must agree, byte for byte.
type group struct {
	t   *testing.T
	s   []*Store
	idx uint64
}

func newGroup(t *testing.T, replicas int) *group {
	g := &group{t: t}
	for range replicas {
		g.s = append(g.s, NewStore())
	}
	return g
}

// apply applies one entry on every replica and returns the first's replies.
func (g *group) apply(now int64, cmds ...Command) []Reply {
	g.t.Helper()
	g.idx++
	var first []Reply
	for i, s := range g.s {
		r := s.Apply(g.idx, now, cmds)
		if i == 0 {
			first = r
			continue
		}
		if a, b := replyStrings(first), replyStrings(r); a != b {
			g.t.Fatalf("entry %d: replica %d replied %s, replica 0 %s", g.idx, i, b, a)
		}
	}
	return first
}

// one applies a single command and returns its reply.
func (g *group) one(now int64, cmd Command) Reply {
	g.t.Helper()
	return g.apply(now, cmd)[0]
}

// must applies cmd and fails unless it replies want.
func (g *group) must(now int64, cmd Command, want Reply) {
	g.t.Helper()
	if r := g.one(now, cmd); r.String() != want.String() {
		g.t.Fatalf("%v: got %v, want %v", cmd.Op, r, want)
	}
}

// sameReplicas fails unless g's replicas have identical snapshots.
func (g *group) sameReplicas() {
	g.t.Helper()
	first := snapshotBytes(g.t, g.s[0])
	for i, s := range g.s[1:] {
		if !bytes.Equal(first, snapshotBytes(g.t, s)) {
			g.t.Fatalf("replica %d's snapshot differs from replica 0's", i+1)
		}
	}
}

// slotDump returns every key of ranges in s, seen or not, expired or not,
// as its chunk record: type, deadline and value.
func slotDump(s *Store, ranges []SlotRange) map[string]string {
	out := map[string]string{}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range ranges {
		lo, hi := slotRangeBounds(r)
		s.keys.Ascend(item{hash: lo}, func(it item) bool {
			if hi != 0 && it.hash >= hi {
				return false
			}
			w := newChunkWriter()
			w.item(&it)
			out[it.key] = string(w.finish())
			return true
		})
	}
	return out
}

func sameDump(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: key %q differs (present: %v)", what, k, got[k] != "")
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: key %q should not be there", what, k)
		}
	}
}

// The slots moved: two single slots and a range around a third, most of
// it empty. Keys of tags "a" and "b" move, those of "c" stay.
var moveRanges = []SlotRange{{slotB, slotB}, {slotA - 3, slotA + 3}, {KeySlot("m"), KeySlot("m")}}

func complement(rs []SlotRange) []SlotRange {
	var slots []int
	for _, r := range rs {
		for s := r.Lo; s <= r.Hi; s++ {
			slots = append(slots, s)
		}
	}
	return allBut(slots...)
}

// workload writes keys of every type, with and without deadlines (some
// already due), to the tags a and b (moving) and c (staying).
type workload struct {
	rng *rand.Rand
	now int64
}

func (w *workload) key() string {
	tags := []string{"{a}", "{b}", "{c}", "{m}"}
	return tags[w.rng.IntN(len(tags))] + itoa(w.rng.IntN(12))
}

// sameTag returns a key of key's tag.
func (w *workload) sameTag(key string) string {
	return key[:3] + itoa(w.rng.IntN(12))
}

func (w *workload) next() Command {
	w.now += int64(w.rng.IntN(4))
	k := w.key()
	n := 1 + w.rng.IntN(4)
	if w.rng.IntN(8) == 0 {
		n = 100 + w.rng.IntN(200) // past the packed forms
	}
	elems := func(prefix string, pairs bool) []string {
		var out []string
		for range n {
			e := prefix + itoa(w.rng.IntN(400))
			if pairs {
				out = append(out, e, "v"+itoa(w.rng.IntN(9)))
			} else {
				out = append(out, e)
			}
		}
		return out
	}
	switch w.rng.IntN(27) {
	case 0:
		return c(OpSet, k, "v"+itoa(w.rng.IntN(1000)))
	case 1:
		return c(OpSet, k, "ttl").i(w.now + int64(w.rng.IntN(60)))
	case 2:
		return c(OpDel, k, w.sameTag(k))
	case 3:
		return c(OpAppend, k, "+")
	case 4:
		return c(OpIncrBy, k).i(3)
	case 5:
		return c(OpExpireAt, k).i(w.now + int64(w.rng.IntN(80)) - 10)
	case 6:
		return c(OpPersist, k)
	case 7:
		return c(OpRPush, append([]string{k}, elems("e", false)...)...)
	case 8:
		return c(OpLPop, k).i(int64(w.rng.IntN(50))).fl(FlagListCount)
	case 9:
		return c(OpHSet, append([]string{k}, elems("f", true)...)...)
	case 10:
		return c(OpHDel, append([]string{k}, elems("f", false)...)...)
	case 11:
		ints := w.rng.IntN(2) == 0
		prefix := "m"
		if ints {
			prefix = ""
		}
		return c(OpSAdd, append([]string{k}, elems(prefix, false)...)...)
	case 12:
		return c(OpSRem, append([]string{k}, elems("", false)...)...)
	case 13:
		cmd := c(OpZAdd, k)
		for range n {
			cmd.Args = append(cmd.Args, []byte(sc(float64(w.rng.IntN(50)))), []byte("z"+itoa(w.rng.IntN(400))))
		}
		return cmd
	case 14:
		return c(OpZRem, append([]string{k}, elems("z", false)...)...)
	case 15:
		return c(OpLRem, k, "e"+itoa(w.rng.IntN(400))).i(int64(w.rng.IntN(5) - 2))
	case 16:
		return c(OpLTrim, k).i(int64(w.rng.IntN(5) - 1)).i2(int64(w.rng.IntN(400) - 3))
	case 17:
		return c(OpLSet, k, "set").i(int64(w.rng.IntN(7) - 3))
	case 18:
		return c(OpLInsert, k, "e"+itoa(w.rng.IntN(400)), "ins")
	case 19:
		return c(OpSPop, k).fl(FlagSetCount).i(int64(w.rng.IntN(4))).i2(int64(w.rng.Uint64() >> 1))
	case 20:
		return c(OpSMove, k, w.sameTag(k), "m"+itoa(w.rng.IntN(400)))
	case 21:
		return c(OpZPop, k).fl(FlagZCount).i(int64(w.rng.IntN(4)))
	case 22:
		return c(OpZRemRange, k).fl(FlagZByScore).f(float64(w.rng.IntN(50))).f2(float64(w.rng.IntN(50)))
	case 23:
		return c(OpZRemRange, k).i(int64(w.rng.IntN(3))).i2(int64(w.rng.IntN(3)))
	case 24:
		return c(OpHSetNX, k, "f"+itoa(w.rng.IntN(400)), "nx")
	case 25:
		flags := []Flags{0, FlagZXX, FlagZNX, FlagZGT, FlagZLT, FlagZCH, FlagZXX | FlagZCH}
		return c(OpZAdd, k, sc(float64(w.rng.IntN(50))), "z"+itoa(w.rng.IntN(400))).fl(flags[w.rng.IntN(len(flags))])
	default:
		return c(OpRename, k, w.sameTag(k))
	}
}

// write applies n workload commands to src and to control, which sees
// the same writes and no move: what src must hold while it owns the slots.
func (w *workload) write(t *testing.T, n int, src *group, control *Store) {
	t.Helper()
	for range n {
		cmd := w.next()
		r := src.one(w.now, cmd)
		want := control.Apply(0, w.now, []Command{cmd})[0]
		if _, moving := SlotMoving(r); moving {
			continue // refused whole: control must not have it either
		}
		if r.String() != want.String() {
			t.Fatalf("%v %q: source replied %v, control %v", cmd.Op, cmd.Args, r, want)
		}
		if w.rng.IntN(10) == 0 {
			if keys := src.s[0].ExpiredKeys(w.now, 5); len(keys) > 0 {
				del := Command{Op: OpDelExpired, Args: keys}
				src.one(w.now, del)
				control.Apply(0, w.now, []Command{del})
			}
		}
	}
}

// writeRefusing is write while the moving slots are fenced: what src
// refuses, control must not apply either.
func (w *workload) writeRefusing(t *testing.T, n int, src *group, control *Store) {
	t.Helper()
	for range n {
		cmd := w.next()
		r := src.one(w.now, cmd)
		if _, moving := SlotMoving(r); moving {
			if keys, _ := cmd.Keys(); !covers(moveRanges, KeySlot(keys[0])) {
				t.Fatalf("%v %q refused outside the moving slots", cmd.Op, cmd.Args)
			}
			continue
		}
		control.Apply(0, w.now, []Command{cmd})
	}
}

// mover drives a move of moveRanges from a to b as the orchestration
// would, with the writes of w going on.
type mover struct {
	t       *testing.T
	a, b    *group
	control *Store
	w       *workload
	id      uint64
}

func newMover(t *testing.T, seed uint64) *mover {
	m := &mover{t: t, a: newGroup(t, 2), b: newGroup(t, 2), control: NewStore(), id: 7,
		w: &workload{rng: rand.New(rand.NewPCG(seed, 1)), now: t0}}
	m.b.must(t0, SlotsAssign(complement(moveRanges)), ok)
	m.w.write(t, 400, m.a, m.control)
	return m
}

func (m *mover) begin() {
	m.a.must(m.w.now, MoveBegin(m.id, moveRanges), ok)
	m.w.write(m.t, 30, m.a, m.control)
}

// copyView takes the view on each replica (they must give the same
// chunks) and stages it, writes going on between chunks.
func (m *mover) copyView() {
	var views []*SlotExport
	for _, s := range m.a.s {
		v, err := s.ExportSlots(moveRanges)
		if err != nil {
			m.t.Fatal(err)
		}
		defer v.Release()
		views = append(views, v)
	}
	for done := false; !done; {
		size := 1 + m.w.rng.IntN(3000)
		var chunk []byte
		chunk, done = views[0].Next(size)
		for _, v := range views[1:] {
			if other, _ := v.Next(size); !bytes.Equal(other, chunk) {
				m.t.Fatal("the replicas' views gave different chunks")
			}
		}
		m.b.must(m.w.now, MoveStage(m.id, moveRanges, chunk), ok)
		m.w.write(m.t, 3, m.a, m.control)
	}
}

// drain moves one drained chunk to b and reports whether more remain.
func (m *mover) drain(size int) bool {
	chunk, more, err := DrainReply(m.a.one(m.w.now, MoveDrain(m.id, size)))
	if err != nil {
		m.t.Fatal(err)
	}
	m.b.must(m.w.now, MoveStage(m.id, moveRanges, chunk), ok)
	return more
}

func (m *mover) drains(rounds int) {
	for range rounds {
		m.w.write(m.t, 10, m.a, m.control)
		m.drain(1 + m.w.rng.IntN(800))
	}
}

func (m *mover) fence() {
	m.a.must(m.w.now, MoveFence(m.id), ok)
	m.w.writeRefusing(m.t, 40, m.a, m.control)
	for m.drain(1 + m.w.rng.IntN(800)) {
	}
}

// finish activates b, releases a and purges it, and checks the outcome.
func (m *mover) finish() {
	t := m.t
	want := slotDump(m.control, moveRanges)
	sameDump(t, "source before the hand-over", slotDump(m.a.s[0], moveRanges), want)
	m.b.must(m.w.now, MoveActivate(m.id), ok)
	m.a.must(m.w.now, MoveRelease(m.id), ok)
	for {
		r := m.a.one(m.w.now, SlotsPurge(moveRanges, 1+m.w.rng.IntN(20)))
		if r.Int == 0 {
			break
		}
	}
	sameDump(t, "target after the move", slotDump(m.b.s[0], moveRanges), want)
	if left := slotDump(m.a.s[0], moveRanges); len(left) != 0 {
		t.Errorf("source still holds %d keys of the moved slots", len(left))
	}
	// The slots are the target's now: writes go there, not to the source.
	k := "{a}new"
	m.b.must(m.w.now, c(OpSet, k, "1"), ok)
	m.a.must(m.w.now, c(OpSet, k, "1"), notOwned(slotA))
	if r := m.a.s[0].Read(m.w.now, c(OpGet, "{b}1")); r.String() != notOwned(slotB).String() {
		t.Errorf("source GET after the move: %v", r)
	}
	// The keys that stayed are the source's, as the control has them.
	sameDump(t, "keys that stayed", slotDump(m.a.s[0], []SlotRange{{KeySlot("c"), KeySlot("c")}}),
		slotDump(m.control, []SlotRange{{KeySlot("c"), KeySlot("c")}}))
	m.a.sameReplicas()
	m.b.sameReplicas()
}

func TestMoveSlots(t *testing.T) {
	for seed := range uint64(6) {
		m := newMover(t, seed)
		m.begin()
		if seed%2 == 1 {
			// Drains before the view is taken: their chunks are staged
			// before the view's, as their entries come before it in the
			// source's log.
			m.drains(3)
		}
		m.copyView()
		m.drains(15)
		m.fence()
		m.finish()
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// TestMoveCancel cancels the move at each phase: the source must hold
// what it would have held without the move, and serve the slots again;
// the target nothing, once purged. A new move of the same slots then
// goes through.
func TestMoveCancel(t *testing.T) {
	phases := []func(m *mover){
		func(m *mover) { m.begin() },
		func(m *mover) { m.copyView() },
		func(m *mover) { m.drains(5) },
		func(m *mover) { m.fence() },
	}
	all := []SlotRange{{0, ClusterSlots - 1}}
	for stop := range phases {
		m := newMover(t, uint64(10+stop))
		for _, ph := range phases[:stop+1] {
			ph(m)
		}
		m.a.must(m.w.now, MoveCancel(m.id), ok)
		m.a.must(m.w.now, MoveCancel(m.id), ok) // a repeated entry
		if stop > 0 {
			m.b.must(m.w.now, MoveAbort(m.id), ok)
		} else {
			m.b.must(m.w.now, MoveAbort(m.id), errr("ERR no slot move 7 in flight"))
		}
		for m.b.one(m.w.now, SlotsPurge(moveRanges, 5)).Int > 0 {
		}
		sameDump(t, "source after the cancel", slotDump(m.a.s[0], all), slotDump(m.control, all))
		m.w.write(t, 50, m.a, m.control)
		sameDump(t, "source writing after the cancel", slotDump(m.a.s[0], all), slotDump(m.control, all))
		if left := slotDump(m.b.s[0], moveRanges); len(left) != 0 {
			t.Errorf("phase %d: the target holds %d keys of the slots", stop, len(left))
		}
		if r := m.b.s[0].Read(m.w.now, c(OpGet, "{a}1")); r.String() != notOwned(slotA).String() {
			t.Errorf("target GET after the abort: %v", r)
		}
		if got := m.a.s[0].Moves(); len(got) != 0 {
			t.Errorf("phase %d: moves in flight after the cancel: %v", stop, got)
		}
		m.a.sameReplicas()
		m.b.sameReplicas()

		m.id++
		m.begin()
		m.copyView()
		m.drains(3)
		m.fence()
		m.finish()
		if t.Failed() {
			t.Fatalf("cancelled after phase %d", stop)
		}
	}
}

// TestMoveFlushAll: a FLUSHALL on the source during the move reaches the
// target through the next drain; one on the target keeps the staging,
// which is the source's data.
func TestMoveFlushAll(t *testing.T) {
	m := newMover(t, 20)
	m.begin()
	m.copyView()
	m.drains(3)
	m.a.must(m.w.now, c(OpFlushAll), ok)
	m.control.Apply(0, m.w.now, []Command{c(OpFlushAll)})
	m.drains(4)
	m.b.must(m.w.now, c(OpFlushAll), ok)
	m.drains(4)
	m.fence()
	m.a.must(m.w.now, c(OpFlushAll), moving(moveRanges[0].Lo))
	m.finish()

	// A flush that no drain has passed on yet holds the release back.
	m = newMover(t, 21)
	m.begin()
	m.a.must(m.w.now, MoveFence(m.id), ok)
	m.a.must(m.w.now, c(OpFlushAll), moving(moveRanges[0].Lo))
	m.a.must(m.w.now, MoveCancel(m.id), ok)
	m.id++
	m.begin()
	m.a.must(m.w.now, c(OpFlushAll), ok)
	m.a.must(m.w.now, MoveFence(m.id), ok)
	m.a.must(m.w.now, MoveRelease(m.id), errr("ERR slot move 8 has writes not drained"))
}

// TestMoveSteps checks each step's refusals, which change nothing.
func TestMoveSteps(t *testing.T) {
	a, b := newGroup(t, 2), newGroup(t, 2)
	for _, s := range a.s {
		s.SetCommandParser(testParser)
	}
	S := []SlotRange{{slotA, slotA}}
	a.must(t0, c(OpSet, "{a}1", "x"), ok)
	a.must(t0, c(OpSet, "{a}2", "y").i(t0+5), ok)
	a.must(t0, c(OpSet, "{b}1", "z"), ok)
	b.must(t0, MoveStage(1, S, newChunkWriter().finish()), errr("ERR slot 15495 is not free to move in"))
	b.must(t0, c(OpSet, "{a}1", "old"), ok)
	b.must(t0, SlotsAssign(allBut(slotA)), ok)
	b.must(t0, MoveStage(1, S, newChunkWriter().finish()), errr("ERR slot 15495 holds keys left to purge"))
	b.must(t0, SlotsPurge(S, 10), in(0))

	// The source.
	if _, err := a.s[0].ExportSlots(S); err == nil {
		t.Error("ExportSlots of a slot not moving")
	}
	a.must(t0, MoveDrain(1, 100), errr("ERR no slot move 1 in flight"))
	a.must(t0, MoveFence(1), errr("ERR no slot move 1 in flight"))
	a.must(t0, MoveBegin(1, S), ok)
	a.must(t0, MoveBegin(1, []SlotRange{{0, 0}}), errr("ERR slot move 1 exists already"))
	a.must(t0, MoveBegin(2, []SlotRange{{slotA - 1, slotA}}), errr("ERR slot 15495 is not owned, or is moving already"))
	a.must(t0, SlotsAssign(allBut()), errr(ErrMovesInFlight))
	a.must(t0, MoveRelease(1), errr("ERR slot move 1 is not fenced"))
	a.must(t0, c(OpSet, "{a}1", "x2"), ok)
	a.must(t0, c(OpDel, "{a}9"), in(0)) // deletes nothing: records nothing
	if got := a.s[0].Moves(); len(got) != 1 || got[0].Phase != MoveExporting || got[0].Dirty != 1 {
		t.Errorf("Moves: %+v", got)
	}
	view, err := a.s[0].ExportSlots(S)
	if err != nil {
		t.Fatal(err)
	}
	a.must(t0, MoveFence(1), ok)
	a.must(t0, MoveFence(1), ok)
	a.must(t0, c(OpSet, "{a}1", "x3"), moving(slotA))
	a.must(t0, c(OpMSet, "{b}1", "z2", "{a}1", "x3"), moving(slotA))
	a.must(t0, ExecCommand(nil, nil, []Command{c(OpSet, "{b}1", "z3"), c(OpDel, "{a}1")}), moving(slotA))
	a.must(t0+10, c(OpDelExpired, "{a}2"), in(0))
	a.must(t0, c(OpSet, "{b}1", "z4"), ok)
	if r := a.s[0].Read(t0, c(OpGet, "{a}1")); r.String() != bulk("x2").String() {
		t.Errorf("GET of a fenced slot: %v", r)
	}
	if slot, ok := SlotMoving(a.one(t0, c(OpAppend, "{a}1", "!"))); !ok || slot != slotA {
		t.Errorf("SlotMoving: %d, %v", slot, ok)
	}
	if keys := a.s[0].ExpiredKeys(t0+10, 10); len(keys) != 0 {
		t.Errorf("ExpiredKeys of a fenced slot: %q", keys)
	}
	a.must(t0, eval("return redis.call('get', KEYS[1])", 1, 0, "{a}1").i(1).fl(FlagScriptNoWrites), bulk("x2"))
	a.must(t0, MoveRelease(1), errr("ERR slot move 1 has writes not drained"))
	if got := a.s[0].Moves(); len(got) != 1 || got[0].Phase != MoveFenced {
		t.Errorf("Moves: %+v", got)
	}

	// The target.
	full, _ := view.Next(1 << 20)
	view.Release()
	drained, more, err := DrainReply(a.one(t0, MoveDrain(1, 1<<20)))
	if err != nil || more {
		t.Fatalf("drain: %v, more %v", err, more)
	}
	bad := slices.Clone(full)
	bad[len(bad)/2] ^= 0x10
	wrongSlot := newChunkWriter()
	wrongSlot.tombstone("{b}1")
	for _, ch := range [][]byte{bad, wrongSlot.finish(), full[:len(full)-1], append(slices.Clone(full), 0), {}} {
		r := b.one(t0, MoveStage(1, S, ch))
		if !strings.HasPrefix(r.Str, "ERR bad slot move chunk: ") {
			t.Errorf("stage of a bad chunk: %v", r)
		}
	}
	if got := b.s[0].Moves(); len(got) != 0 {
		t.Errorf("a refused stage began a move: %+v", got)
	}
	var events []Event
	var ready []string
	b.s[0].SetNotifyHook(func(ev []Event) { events = append(events, ev...) })
	b.s[0].SetNotifyClasses(NotifyAll | NotifyKeyspace | NotifyKeyevent | NotifyNew)
	b.s[0].SetReadyHook(func(keys []string) { ready = append(ready, keys...) })
	b.must(t0, MoveStage(1, S, full), ok)
	b.must(t0, MoveStage(1, []SlotRange{{slotA, slotA + 1}}, full), errr("ERR slot move 1 stages other slots"))
	b.must(t0, MoveStage(1, S, drained), ok)
	// Staged keys are nobody's yet.
	if r := b.s[0].Read(t0, c(OpGet, "{a}1")); r.String() != notOwned(slotA).String() {
		t.Errorf("GET of a staged key: %v", r)
	}
	if r := b.s[0].Read(t0, c(OpDBSize)); r.Int != 0 {
		t.Errorf("DBSIZE sees the staging: %v", r)
	}
	if keys := b.s[0].ExpiredKeys(t0+10, 10); len(keys) != 0 {
		t.Errorf("ExpiredKeys sees the staging: %q", keys)
	}
	if got := b.s[0].Moves(); len(got) != 1 || got[0].Phase != MoveImporting {
		t.Errorf("Moves: %+v", got)
	}
	b.must(t0, MoveActivate(2), errr("ERR no slot move 2 in flight"))
	b.must(t0, MoveActivate(1), ok)
	b.must(t0, MoveActivate(1), ok)
	b.must(t0, MoveAbort(1), errr("ERR slot move 1 is finished"))
	b.must(t0, MoveStage(1, S, drained), errr("ERR slot move 1 is finished"))
	if r := b.s[0].Read(t0, c(OpGet, "{a}1")); r.String() != bulk("x2").String() {
		t.Errorf("GET after the move: %v", r)
	}
	if r := b.s[0].Read(t0, c(OpPTTL, "{a}2")); r.Int != 5 {
		t.Errorf("PTTL after the move: %v", r)
	}
	if len(events) != 0 || len(ready) != 0 {
		t.Errorf("the move announced %v and signalled %q", events, ready)
	}
	a.must(t0, MoveRelease(1), ok)
	a.must(t0, MoveRelease(1), ok)
	a.must(t0, MoveCancel(1), errr("ERR slot move 1 is finished"))
	a.must(t0, MoveDrain(1, 10), errr("ERR slot move 1 is finished"))
	a.must(t0, MoveBegin(1, S), errr("ERR slot move 1 exists already"))
	if r := a.s[0].Read(t0, c(OpGet, "{a}1")); r.String() != notOwned(slotA).String() {
		t.Errorf("source GET after the move: %v", r)
	}
	a.must(t0, SlotsPurge(S, 1), in(1))
	a.must(t0, SlotsPurge(S, 1), in(0))
	a.sameReplicas()
	b.sameReplicas()
}

// TestMoveSignalsReady: the activation wakes clients blocked on the
// lists and sorted sets moved in, and announces nothing.
func TestMoveSignalsReady(t *testing.T) {
	a, b := newGroup(t, 1), newGroup(t, 1)
	S := []SlotRange{{slotA, slotA}}
	a.must(t0, c(OpRPush, "{a}list", "x"), in(1))
	a.must(t0, zadd("{a}zset", 1, "m"), in(1))
	a.must(t0, c(OpSet, "{a}str", "v"), ok)
	a.must(t0, c(OpRPush, "{a}gone", "x"), in(1))
	a.must(t0, c(OpExpireAt, "{a}gone").i(t0+1), in(1))
	a.must(t0, MoveBegin(3, S), ok)
	view, _ := a.s[0].ExportSlots(S)
	chunk, done := view.Next(10)
	b.must(t0, MoveStage(3, S, chunk), errr("ERR slot 15495 is not free to move in"))
	b.must(t0, SlotsAssign(allBut(slotA)), ok)
	var ready []string
	var events []Event
	b.s[0].SetReadyHook(func(keys []string) { ready = append(ready, keys...) })
	b.s[0].SetNotifyHook(func(ev []Event) { events = append(events, ev...) })
	b.s[0].SetNotifyClasses(NotifyAll | NotifyKeyevent | NotifyNew)
	for {
		b.must(t0, MoveStage(3, S, chunk), ok)
		if done {
			break
		}
		chunk, done = view.Next(10)
	}
	b.must(t0+5, MoveActivate(3), ok)
	slices.Sort(ready)
	if !slices.Equal(ready, []string{"{a}list", "{a}zset"}) || len(events) != 0 {
		t.Errorf("signalled %q, announced %v", ready, events)
	}
}

func init() {
	// A snapshot of each side in the middle of a move: a table, a move
	// out with dirty keys, a staging, finished moves.
	restoreSeeds = append(restoreSeeds, func(t testing.TB) []byte {
		a, _ := midMove(t)
		return snapshotBytes(t, a)
	}, func(t testing.TB) []byte {
		_, b := midMove(t)
		return snapshotBytes(t, b)
	})
}

// midMove returns a source with a move out fenced and keys not drained,
// and a target staging it, each with a finished move behind it.
func midMove(t testing.TB) (a, b *Store) {
	a, b = NewStore(), NewStore()
	S := []SlotRange{{slotA, slotA}}
	noErrors := func(rs []Reply) {
		for i, r := range rs {
			if r.Kind == ReplyError {
				t.Fatalf("command %d: %v", i, r)
			}
		}
	}
	noErrors(a.Apply(1, t0, []Command{c(OpSet, "{a}1", "x"), zadd("{a}z", 1, "m"), c(OpSet, "{b}1", "y").i(t0 + 9),
		MoveBegin(1, []SlotRange{{0, 9}}), MoveCancel(1), MoveBegin(2, S)}))
	view, _ := a.ExportSlots(S)
	chunk, _ := view.Next(1 << 20)
	noErrors(a.Apply(2, t0, []Command{c(OpSet, "{a}2", "x"), c(OpDel, "{a}1"), MoveFence(2)}))
	noErrors(b.Apply(1, t0, []Command{SlotsAssign(allBut(slotA, slotB)),
		MoveStage(5, []SlotRange{{slotB, slotB}}, newChunkWriter().finish()), MoveAbort(5), MoveStage(2, S, chunk)}))
	return a, b
}

// restart replaces replica 0 of g by a store restored from its snapshot,
// which must write back out as the same bytes.
func (g *group) restart() {
	g.t.Helper()
	b := snapshotBytes(g.t, g.s[0])
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(b)); err != nil {
		g.t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(g.t, r), b) {
		g.t.Fatal("a restored snapshot writes back out differently")
	}
	g.s[0] = r
	g.sameReplicas()
}

// TestMoveSnapshots restarts a replica of each group from a snapshot at
// every phase of the move, then finishes the move: the restarted replicas
// must reply as the others do, and end the same.
func TestMoveSnapshots(t *testing.T) {
	phases := []func(m *mover){
		func(m *mover) { m.begin() },
		func(m *mover) { m.copyView() },
		func(m *mover) { m.drains(5) },
		func(m *mover) { m.fence() },
	}
	for at := range phases {
		m := newMover(t, uint64(30+at))
		for i, ph := range phases {
			ph(m)
			if i == at {
				m.a.restart()
				m.b.restart()
			}
		}
		m.finish()
		if t.Failed() {
			t.Fatalf("restarted after phase %d", at)
		}
	}
	// Between the activation and the release, and during the purge.
	m := newMover(t, 40)
	m.begin()
	m.copyView()
	m.fence()
	m.b.must(m.w.now, MoveActivate(m.id), ok)
	m.a.restart()
	m.b.restart()
	m.a.must(m.w.now, MoveRelease(m.id), ok)
	m.a.restart()
	m.a.one(m.w.now, SlotsPurge(moveRanges, 3))
	m.a.restart()
	for m.a.one(m.w.now, SlotsPurge(moveRanges, 3)).Int > 0 {
	}
	if left := slotDump(m.a.s[0], moveRanges); len(left) != 0 {
		t.Errorf("%d keys left after the purge", len(left))
	}
	// Cancel and abort after a restart.
	m = newMover(t, 41)
	m.begin()
	m.copyView()
	m.a.restart()
	m.b.restart()
	m.a.must(m.w.now, MoveCancel(m.id), ok)
	m.b.must(m.w.now, MoveAbort(m.id), ok)
	all := []SlotRange{{0, ClusterSlots - 1}}
	sameDump(t, "source cancelled after a restart", slotDump(m.a.s[0], all), slotDump(m.control, all))
}

// TestSlotsSnapshotOlderVersions: a snapshot of a version before the slot
// table restores as a store that owns every slot and moves none, whatever
// the store held before.
func TestSlotsSnapshotOlderVersions(t *testing.T) {
	plain := NewStore()
	plain.Apply(1, t0, []Command{c(OpSet, "{b}1", "v")})
	// A store never told of slots writes version 5 (a replica on a kvs
	// from before slot moves can install it) ...
	v5 := snapshotBytes(t, plain)
	if v5[0] != snapshotVersionV5 {
		t.Fatalf("a store without a slot table writes version %d, want %d", v5[0], snapshotVersionV5)
	}
	// ... which is version 6 without the slot table's byte.
	vers := appendVersions(nil, &plain.keys.vers)
	v6 := append([]byte{snapshotVersion}, v5[1:5+len(vers)]...)
	v6 = append(v6, 0)
	v6 = appendCRC(append(v6, v5[5+len(vers):len(v5)-4]...))
	for name, b := range map[string][]byte{"version 5": v5, "version 6 without a slot table": v6} {
		a, _ := midMove(t)
		if _, err := a.Restore(bytes.NewReader(b)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.slots != nil || a.keys.track != nil || len(a.Moves()) != 0 {
			t.Fatalf("%s restored with a slot table", name)
		}
		if r := a.Read(t0, c(OpGet, "{b}1")); r.String() != bulk("v").String() {
			t.Errorf("GET after restoring %s: %v", name, r)
		}
		if !bytes.Equal(snapshotBytes(t, a), v5) {
			t.Errorf("%s restored to a different state", name)
		}
	}
	// A store mid-move writes version 6.
	if a, _ := midMove(t); snapshotBytes(t, a)[0] != snapshotVersion {
		t.Error("a store with a slot table does not write version 6")
	}
}

// TestSlotsSnapshotCorrupt: slot tables that cannot be are refused.
func TestSlotsSnapshotCorrupt(t *testing.T) {
	// An empty store's snapshot around a slot section.
	build := func(section ...byte) []byte {
		b := append([]byte{snapshotVersion, 0, 0, 0, 0, 0, 0, 0}, section...)
		return appendCRC(append(b, 0))
	}
	r := func(ranges ...SlotRange) []byte { return AppendSlotRanges(nil, ranges) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	good := cat([]byte{1}, r(SlotRange{5, 5}), []byte{1, 3, 0, 0}, r(SlotRange{1, 2}), []byte{0},
		[]byte{1, 4}, r(SlotRange{5, 5}), []byte{1, 1, moveRelease})
	if _, err := NewStore().Restore(bytes.NewReader(build(good...))); err != nil {
		t.Fatalf("a good slot table: %v", err)
	}
	for name, section := range map[string][]byte{
		"presence 2":            {2},
		"move id 0":             cat([]byte{1}, r(), []byte{1, 0, 0, 0}, r(SlotRange{1, 2}), []byte{0, 0, 0}),
		"move out not owned":    cat([]byte{1}, r(SlotRange{1, 1}), []byte{1, 3, 0, 0}, r(SlotRange{1, 2}), []byte{0, 0, 0}),
		"move in owned":         cat([]byte{1}, r(), []byte{0, 1, 4}, r(SlotRange{5, 5}), []byte{0}),
		"moves share a slot":    cat([]byte{1}, r(), []byte{2, 3, 0, 0}, r(SlotRange{1, 2}), []byte{0, 4, 0, 0}, r(SlotRange{2, 3}), []byte{0, 0, 0}),
		"moves out of order":    cat([]byte{1}, r(), []byte{2, 4, 0, 0}, r(SlotRange{1, 1}), []byte{0, 3, 0, 0}, r(SlotRange{2, 2}), []byte{0, 0, 0}),
		"bad flag":              cat([]byte{1}, r(), []byte{1, 3, 2, 0}, r(SlotRange{1, 2}), []byte{0, 0, 0}),
		"no slots":              cat([]byte{1}, r(), []byte{1, 3, 0, 0}, r(), []byte{0, 0, 0}),
		"finished by a stage":   cat([]byte{1}, r(), []byte{0, 0, 1, 1, moveStage}),
		"finished in flight":    cat([]byte{1}, r(), []byte{1, 3, 0, 0}, r(SlotRange{1, 2}), []byte{0, 0, 1, 3, moveCancel}),
		"dirty key elsewhere":   cat([]byte{1}, r(), []byte{1, 3, 0, 0}, r(SlotRange{1, 2}), []byte{1, 1, 'x', 0, 0}),
		"bad ranges":            cat([]byte{1}, []byte{1, 5, 4}),
		"truncated":             {1, 0, 1, 3},
		"finished out of order": cat([]byte{1}, r(), []byte{0, 0, 2, 2, moveAbort, 1, moveAbort}),
	} {
		if _, err := NewStore().Restore(bytes.NewReader(build(section...))); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}

// TestMoveViewsArePointInTime: the export view and a snapshot's dirty
// set are those of the moment they were taken, whatever is written or
// drained after.
func TestMoveViewsArePointInTime(t *testing.T) {
	s := NewStore()
	S := []SlotRange{{slotA, slotA}}
	s.Apply(1, t0, []Command{c(OpSet, "{a}1", "old"), c(OpRPush, "{a}l", "x"), MoveBegin(1, S), c(OpSet, "{a}2", "v")})
	view, err := s.ExportSlots(S)
	if err != nil {
		t.Fatal(err)
	}
	if view.Index() != 1 {
		t.Errorf("view index %d", view.Index())
	}
	sn := s.Snapshot()
	s.Apply(2, t0, []Command{c(OpSet, "{a}1", "new"), c(OpDel, "{a}l"), c(OpSet, "{a}3", "v"), MoveDrain(1, 1<<20)})
	if got := s.Moves(); got[0].Dirty != 0 {
		t.Fatalf("dirty after the drain: %+v", got)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	r := NewStore()
	if _, err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got := r.Moves(); len(got) != 1 || got[0].Dirty != 1 {
		t.Errorf("restored moves %+v, want the one key dirty when the snapshot was taken", got)
	}
	chunk, done := view.Next(1 << 20)
	recs, err := decodeChunk(chunk, S, 0)
	if err != nil || !done {
		t.Fatalf("view: %v, done %v", err, done)
	}
	var keys []string
	for _, rec := range recs {
		k := rec.it.key + "=" + rec.it.kind.typeName()
		if rec.it.kind == kindString {
			k += ":" + string(rec.it.val)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"{a}1=string:old", "{a}2=string:v", "{a}l=list"}; !slices.Equal(keys, want) {
		t.Errorf("the view holds %q, want %q", keys, want)
	}
	if chunk, done := view.Next(10); !done || len(chunk) != 6 {
		t.Errorf("after the last chunk: % x, %v", chunk, done)
	}
}

// TestMoveDrainAnyEncoding: replicas whose encoding thresholds differ
// (they are a node's) hold collections in different forms, so their
// chunks differ in bytes; their writes must still record the same keys
// (and stamp the same versions), and their drains take the same keys out
// of the dirty set, or a new leader would never send some.
func TestMoveDrainAnyEncoding(t *testing.T) {
	a1, a2 := NewStore(), NewStore()
	a2.SetLimits(Limits{HashMaxListpackEntries: 1, HashMaxListpackValue: 1, SetMaxIntsetEntries: 1,
		SetMaxListpackEntries: 1, SetMaxListpackValue: 1, ZSetMaxListpackEntries: 1, ZSetMaxListpackValue: 1,
		ListMaxListpackSize: 1})
	w := &workload{rng: rand.New(rand.NewPCG(50, 1)), now: t0}
	var idx uint64
	both := func(cmds ...Command) (r1, r2 []Reply) {
		idx++
		return a1.Apply(idx, w.now, cmds), a2.Apply(idx, w.now, cmds)
	}
	both(MoveBegin(1, moveRanges))
	differ := false
	for round := 0; ; round++ {
		if round < 300 {
			for range 20 {
				cmd := w.next()
				both(cmd)
				if d1, d2 := dirtyKeys(a1), dirtyKeys(a2); !slices.Equal(d1, d2) {
					t.Fatalf("%v %q recorded %q on one replica, %q on the other", cmd.Op, cmd.Args, d1, d2)
				}
				key := cmd.Args[0]
				if v1, v2 := a1.WatchKey(w.now, key), a2.WatchKey(w.now, key); v1 != v2 {
					t.Fatalf("%v %q: versions %+v and %+v", cmd.Op, cmd.Args, v1, v2)
				}
			}
		}
		r1, r2 := both(MoveDrain(1, 1+int(w.rng.IntN(300))))
		c1, m1, err1 := DrainReply(r1[0])
		c2, m2, err2 := DrainReply(r2[0])
		if err1 != nil || err2 != nil || m1 != m2 {
			t.Fatalf("drains: %v, %v; more %v, %v", err1, err2, m1, m2)
		}
		differ = differ || !bytes.Equal(c1, c2)
		k1, k2 := chunkKeys(t, c1), chunkKeys(t, c2)
		if !slices.Equal(k1, k2) {
			t.Fatalf("the replicas drained %q and %q", k1, k2)
		}
		if round >= 300 && !m1 {
			break
		}
	}
	if !differ {
		t.Error("no chunk differed: the encodings were not told apart")
	}
}

// chunkKeys lists a chunk's keys, tombstones marked.
func chunkKeys(t *testing.T, chunk []byte) []string {
	t.Helper()
	recs, err := decodeChunk(chunk, moveRanges, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.tag == chunkTombstone {
			out = append(out, "-"+r.it.key)
		} else {
			out = append(out, r.it.key)
		}
	}
	return out
}

// dirtyKeys lists the dirty keys of s's first move out.
func dirtyKeys(s *Store) []string {
	var out []string
	s.slots.out[0].dirty.Scan(func(d dirtyKey) bool { out = append(out, d.key); return true })
	return out
}

// chunkSample is a chunk with a record of every type, in both forms, and a
// tombstone and a flush record, for the fuzz targets' seeds.
func chunkSample(t testing.TB) []byte {
	s := NewStore()
	S := []SlotRange{{slotA, slotA}}
	cmds := []Command{c(OpSet, "{a}s", "v").i(t0 + 5), c(OpRPush, "{a}l", "x", "y"),
		c(OpHSet, "{a}h", "f", "v"), c(OpSAdd, "{a}i", "1", "2"), c(OpSAdd, "{a}m", "x"), zadd("{a}z", 1, "m")}
	big := c(OpRPush, "{a}L")
	bigH, bigS, bigZ := c(OpHSet, "{a}H"), c(OpSAdd, "{a}S"), c(OpZAdd, "{a}Z")
	for i := range 600 {
		big.Args = append(big.Args, []byte(itoa(i)))
		bigH.Args = append(bigH.Args, []byte("f"+itoa(i)), []byte("v"))
		bigS.Args = append(bigS.Args, []byte("m"+itoa(i)))
		bigZ.Args = append(bigZ.Args, []byte(sc(float64(i))), []byte("m"+itoa(i)))
	}
	cmds = append(cmds, big, bigH, bigS, bigZ, MoveBegin(1, S), c(OpDel, "{a}gone"), c(OpSet, "{a}gone", "x"),
		c(OpDel, "{a}gone"), c(OpFlushAll))
	s.Apply(1, t0, cmds)
	for _, cmd := range cmds[:10] {
		s.Apply(0, t0, []Command{cmd})
	}
	s.Apply(0, t0, []Command{c(OpDel, "{a}s")})
	chunk, _, err := DrainReply(s.Apply(0, t0, []Command{MoveDrain(1, 1<<30)})[0])
	if err != nil {
		t.Fatal(err)
	}
	return chunk
}

func init() {
	entrySeeds = append(entrySeeds, []Command{
		SlotsAssign(allBut(slotA)), MoveStage(1, []SlotRange{{slotA, slotA}}, chunkSample(&testing.T{})),
		MoveActivate(1), MoveBegin(2, []SlotRange{{slotA, slotA}}), c(OpSet, "{a}x", "v"), MoveDrain(2, 10),
		MoveFence(2), MoveRelease(2), SlotsPurge([]SlotRange{{slotA, slotA}}, 3), MoveBegin(3, []SlotRange{{0, 5}}),
		MoveCancel(3), MoveAbort(4),
	})
}

// FuzzDecodeChunk: any bytes decode as a chunk or give an error wrapping
// ErrCorrupt; a chunk that decodes stages without panicking.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(chunkSample(f))
	f.Add(newChunkWriter().finish())
	f.Add([]byte{chunkVersion, chunkTombstone, 1, 'k', 0, 0, 0, 0, 0})
	f.Add([]byte{chunkVersion, chunkFlush, chunkEnd})
	all := []SlotRange{{0, ClusterSlots - 1}}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeChunk(b, all, 0); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		s := NewStore()
		s.Apply(1, t0, []Command{SlotsAssign(nil)})
		if r := s.Apply(2, t0, []Command{MoveStage(1, all, b)})[0]; r.Kind == ReplyError {
			t.Fatalf("a chunk that decodes did not stage: %v", r)
		}
		s.Apply(3, t0, []Command{MoveActivate(1)})
		snapshotBytes(t, s)
	})
}

func TestSlotExportCounts(t *testing.T) {
	s := NewStore()
	var keys []string
	for i := 0; len(keys) < 50; i++ {
		if k := fmt.Sprintf("k%d", i); KeySlot([]byte(k)) < 8192 {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		mustOK(t, s, Command{Op: OpSet, Args: [][]byte{[]byte(k), []byte("v")}})
	}
	mustOK(t, s, MoveBegin(1, []SlotRange{{0, 8191}}))
	e, err := s.ExportSlots([]SlotRange{{0, 8191}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Keys() != len(keys) {
		t.Fatalf("Keys() = %d, want %d", e.Keys(), len(keys))
	}
	for done := false; !done; {
		_, done = e.Next(64)
	}
	if e.Sent() != len(keys) {
		t.Fatalf("Sent() = %d, want %d", e.Sent(), len(keys))
	}
	// An empty chunk makes a move in exist on a store that does not own
	// the slots, so a later chunk of a retired id is refused.
	tgt := NewStore()
	mustOK(t, tgt, SlotsAssign([]SlotRange{{8192, 16383}}))
	mustOK(t, tgt, MoveStage(7, []SlotRange{{0, 8191}}, EmptyChunk()))
	mustOK(t, tgt, MoveAbort(7))
	if r := applyOne(tgt, 1, MoveStage(7, []SlotRange{{0, 8191}}, EmptyChunk())); r.Kind != ReplyError {
		t.Fatalf("a stage after the abort: %v, want an error", r)
	}
}

func mustOK(t *testing.T, s *Store, c Command) {
	t.Helper()
	if r := applyOne(s, 1, c); r.Kind == ReplyError {
		t.Fatalf("%s: %s", c.Op.spec().name, r.Str)
	}
}

// TestSlotsAssignForMove: the assignments a move's begin makes, by the
// slot map from before the move, are refused by a store that has taken
// part in that move or a later one. A driver resuming a move from a stale
// record (its replica of the meta group behind the group it leads) would
// otherwise give the moved slots back to the source, empty, and take them
// from the target, hiding every key the move brought. An assignment for a
// later move is taken, and one for no move is not checked.
func TestSlotsAssignForMove(t *testing.T) {
	m := newMover(t, 1)
	m.a.must(t0, SlotsAssignFor(allBut(), m.id), ok)
	m.b.must(t0, SlotsAssignFor(complement(moveRanges), m.id), ok)
	m.begin()
	m.a.must(t0, SlotsAssignFor(allBut(), m.id), errr(ErrMovesInFlight))
	m.copyView()
	m.drains(2)
	m.fence()
	m.finish()

	want := slotDump(m.b.s[0], moveRanges)
	m.a.must(t0, SlotsAssignFor(allBut(), m.id), errr(fmt.Sprintf(ErrMoveSuperseded, m.id, m.id)))
	m.b.must(t0, SlotsAssignFor(complement(moveRanges), m.id), errr(fmt.Sprintf(ErrMoveSuperseded, m.id, m.id)))
	m.b.must(t0, SlotsAssignFor(complement(moveRanges), m.id-1), errr(fmt.Sprintf(ErrMoveSuperseded, m.id-1, m.id)))
	sameDump(t, "target after the stale assignments", slotDump(m.b.s[0], moveRanges), want)
	m.b.must(m.w.now, c(OpSet, "{a}after", "1"), ok)
	m.a.must(m.w.now, c(OpSet, "{a}after", "1"), notOwned(slotA))

	m.b.must(t0, SlotsAssignFor(allBut(), m.id+1), ok)
	m.a.must(t0, SlotsAssign(complement(moveRanges)), ok)
	m.a.sameReplicas()
	m.b.sameReplicas()
}
