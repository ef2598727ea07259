package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Data groups added and removed as chaos faults (TestChaosGroups). Next to
// the kills, pauses, partitions and moves, the schedule of a cluster of
// several groups draws two faults that change the set of data groups
// while the workers, the list workers and the other faults go on:
//
//   - add-group sends KVS.GROUPS ADD through a random member, then a move
//     into the new group of a range around a worker key's slot, taken
//     from whichever group owns it: a split of that group. The new group
//     must get its replicas and a leader whatever faults follow (every
//     settle waits until every member lists the same groups, each with a
//     leader that all of them name).
//   - remove-group sends KVS.GROUPS EMPTY for a data group drawn at
//     random, and returns: its slots move out in the background, hit by
//     the faults drawn next (a cancel among them, which stops a move of
//     the emptying). After each fault's settle the removal is tended:
//     EMPTY again, which names the moves out still in flight or starts
//     those of the slots the group still (or again) owns, and once it
//     names none, KVS.GROUPS REMOVE, again on a refusal. A removal begun
//     late in an epoch ends in its drain, with the faults over. Moves run
//     one at a time, and the emptying carries a third of the filler
//     keys: while it goes on, slot-move-rate is chaosRemoveRate.
//
// The cluster keeps between chaosMinGroups and chaosMaxGroups data groups,
// one removal at a time; a fault that would cross a bound moves slots
// instead. The moves drawn elsewhere never target a group being removed.
// At the end of the run no slot belongs to a removed group, every member
// lists the same live groups, each with a leader, and no member lists a
// removed group or keeps its state in its data directory; the keys, the
// lists and the histories are checked as before, over the groups there
// are at the end.

var chaosGroupFaults = []chaosFault{
	// members 3: the set of groups changes while every node is a member
	// (not inside remove-rejoin), so that a new group is placed on them
	// all.
	{name: "add-group", members: 3, weight: 2, inject: (*chaos).addGroup},
	{name: "remove-group", members: 3, weight: 2, inject: (*chaos).removeGroup},
}

const (
	chaosMinGroups = 2
	chaosMaxGroups = 5
	// chaosRemoveRate is slot-move-rate while a group is emptied: moves
	// run one at a time, and the emptying carries a third of the filler
	// keys, which at chaosMoveRate would hold every other move back for
	// a minute. At this rate it takes seconds, still hit by the faults.
	chaosRemoveRate = "96kb"
)

// chaosRegroup is what the group faults did, and the data groups as the
// run knows them.
type chaosRegroup struct {
	// live are the data groups, by id, as this run made them: those the
	// cluster started with, with those it added (an ADD of unknown
	// outcome counts once the members list its group) and without
	// those it removed.
	live     []int
	seen     map[int]bool // every data group ever listed or added
	removed  []int        // removed by this run
	removing int          // being removed; 0 for none
	splits   []chaosSplit // groups added whose first move in is not recorded yet

	added, addFailed       int
	removeAsked, emptyRuns int // removals begun; EMPTYs that named moves
	refusals               int // REMOVEs refused (moves in flight, slots owned)
	splitMoves             int // moves into a new group recorded
	lastNote               string
	// rate is the slot-move-rate the members should have: a node
	// restarted by a fault starts with chaosMoveRate again.
	rate string
}

// note logs what tending a removal met, once until it changes: the drain
// tends it every few hundred milliseconds.
func (c *chaos) note(format string, args ...any) {
	if s := fmt.Sprintf(format, args...); s != c.regroup.lastNote {
		c.regroup.lastNote = s
		c.logf("%s", s)
	}
}

// chaosSplit is the range drawn to move into a new group.
type chaosSplit struct{ id, first, last int }

func newChaosRegroup(groups int) *chaosRegroup {
	r := &chaosRegroup{seen: map[int]bool{}, rate: chaosMoveRate}
	for g := 1; g <= groups; g++ {
		r.live = append(r.live, g)
		r.seen[g] = true
	}
	return r
}

// groupsCommand sends KVS.GROUPS args to the first running member that
// answers (no draw from c.rng: it is retried a number of times that
// depends on timing).
func (c *chaos) groupsCommand(args ...string) (Value, *Node, error) {
	var lastErr error
	for _, n := range c.members() {
		if n.isExited() {
			continue
		}
		v, err := oneCommand(n.Addr, ioTimeout, append([]string{"KVS.GROUPS"}, args...)...)
		if err != nil {
			lastErr = err
			continue
		}
		return v, n, nil
	}
	return Value{}, nil, fmt.Errorf("no member answered KVS.GROUPS %s: %v", strings.Join(args, " "), lastErr)
}

// addGroup adds a data group through a random member and moves a range
// around a worker key into it.
func (c *chaos) addGroup() {
	r := c.regroup
	if len(r.live) >= chaosMaxGroups {
		c.logf("add group: %d data groups already (at most %d): move slots instead", len(r.live), chaosMaxGroups)
		c.moveSlots()
		return
	}
	_, n := c.pick()
	v, err := oneCommand(n.Addr, ioTimeout, "KVS.GROUPS", "ADD", "1")
	if err != nil || v.Kind != '*' || len(v.Elems) != 1 {
		// Refused, or of unknown outcome: a group added all the same is
		// learnt from the members' listing at the next settle.
		r.addFailed++
		c.logf("add group via %s: %s %v", n.Name, v, err)
		return
	}
	id, err := strconv.Atoi(v.Elems[0].Str)
	if err != nil {
		c.t.Fatalf("KVS.GROUPS ADD via %s: %s", n.Name, v)
	}
	r.added++
	r.seen[id] = true
	if !slices.Contains(r.live, id) {
		r.live = append(r.live, id)
		slices.Sort(r.live)
	}
	first, last, _, ok := c.pickRange()
	c.logf("added group %d via %s; groups now %v", id, n.Name, r.live)
	if !ok {
		return
	}
	r.splits = append(r.splits, chaosSplit{id, first, last})
	c.tendSplits()
}

// tendSplits records the move into each new group not yet given one: the
// range drawn, cut to the run of the stored slot map its first slot is in
// now (other moves may have moved part of it).
func (c *chaos) tendSplits() {
	r := c.regroup
	r.splits = slices.DeleteFunc(r.splits, func(sp chaosSplit) bool {
		if !slices.Contains(r.live, sp.id) {
			return true
		}
		_, runs, err := c.slotMapNow()
		if err != nil {
			c.logf("split into group %d: %v", sp.id, err)
			return false
		}
		first, last := sp.first, sp.last
		for _, run := range runs {
			if run.first <= first && first <= run.last {
				if run.group == sp.id {
					c.logf("split into group %d: slot %d is its own already", sp.id, first)
					return true
				}
				last = min(last, run.last)
			}
		}
		v, _, err := c.moveCommand(first, last, sp.id)
		if err != nil || v.Kind != ':' {
			c.moves.askFailed++
			c.note("split: move slots %d-%d into new group %d: %s %v; asked again after the next fault", first, last, sp.id, v, err)
			return false
		}
		mid, _ := strconv.ParseUint(v.Str, 10, 64)
		c.moves.asked = append(c.moves.asked, mid)
		r.splitMoves++
		c.logf("move %d: slots %d-%d (%d slots) into new group %d", mid, first, last, last-first+1, sp.id)
		return true
	})
}

// moveCommand sends KVS.SLOTS MOVE to the first running member that
// answers.
func (c *chaos) moveCommand(first, last, target int) (Value, *Node, error) {
	var lastErr error
	for _, n := range c.members() {
		if n.isExited() {
			continue
		}
		v, err := oneCommand(n.Addr, ioTimeout, "KVS.SLOTS", "MOVE", strconv.Itoa(first), strconv.Itoa(last), strconv.Itoa(target))
		if err != nil {
			lastErr = err
			continue
		}
		return v, n, nil
	}
	return Value{}, nil, fmt.Errorf("no member answered KVS.SLOTS MOVE: %v", lastErr)
}

// removeGroup begins the removal of a data group drawn at random, but one
// just added and not yet given slots: KVS.GROUPS EMPTY through a random
// member. The moves it starts go on while the next faults hit them;
// tendGroups finishes the removal.
func (c *chaos) removeGroup() {
	r := c.regroup
	var can []int
	for _, g := range r.live {
		if !slices.ContainsFunc(r.splits, func(sp chaosSplit) bool { return sp.id == g }) {
			can = append(can, g)
		}
	}
	if r.removing != 0 || len(r.live) <= chaosMinGroups || len(can) == 0 {
		c.logf("remove group: groups %v, group %d being removed (at least %d stay): move slots instead", r.live, r.removing, chaosMinGroups)
		c.moveSlots()
		return
	}
	id := can[c.rng.Intn(len(can))]
	_, n := c.pick()
	r.removing = id
	r.removeAsked++
	c.setMoveRate(chaosRemoveRate)
	v, err := oneCommand(n.Addr, ioTimeout, "KVS.GROUPS", "EMPTY", strconv.Itoa(id))
	c.logf("remove group %d of %v: KVS.GROUPS EMPTY via %s: %s %v", id, r.live, n.Name, v, err)
	if err == nil && v.Kind == '*' && len(v.Elems) > 0 {
		r.emptyRuns++
	}
}

// tendGroups runs after each fault's settle: it learns the groups the
// members agree on, records the moves into new groups still to record,
// and takes the removal under way a step further. It reports whether
// anything is left to do.
func (c *chaos) tendGroups() bool {
	if c.regroup.rate != chaosMoveRate {
		c.setMoveRate(c.regroup.rate) // again on nodes restarted since
	}
	c.refreshGroups()
	c.tendSplits()
	c.tendRemoval()
	return len(c.regroup.splits) > 0 || c.regroup.removing != 0
}

// refreshGroups waits until the members list the same groups (they do
// after a settle) and learns from them a group added by an ADD whose
// reply was lost. It takes no group out of live: only this run's removals
// do, and the end of the run checks that the members list live exactly.
func (c *chaos) refreshGroups() {
	r := c.regroup
	var listed []int
	waitFor(c.t, "the members to list the same groups", func() error {
		ls, err := groupLeadersNow(c.members(), c.raftGroups())
		if err != nil {
			return err
		}
		listed = nil
		for g, l := range ls {
			if g > 0 && l != nil {
				listed = append(listed, g)
			}
		}
		return nil
	})
	for _, g := range listed {
		if !r.seen[g] {
			r.seen[g] = true
			r.live = append(r.live, g)
			slices.Sort(r.live)
			c.logf("group %d is listed: added by an ADD of unknown outcome", g)
		}
	}
}

// tendRemoval takes the removal under way a step: EMPTY again, and REMOVE
// once EMPTY names no move.
func (c *chaos) tendRemoval() {
	r := c.regroup
	id := r.removing
	if id == 0 {
		return
	}
	gone := func(how string) {
		r.removing = 0
		r.removed = append(r.removed, id)
		r.live = slices.DeleteFunc(r.live, func(g int) bool { return g == id })
		c.logf("group %d removed (%s); groups now %v", id, how, r.live)
		if r.rate == chaosRemoveRate {
			c.setMoveRate(chaosMoveRate)
		}
	}
	v, n, err := c.groupsCommand("EMPTY", strconv.Itoa(id))
	switch {
	case err != nil:
		c.note("tend removal of group %d: %v", id, err)
		return
	case v.IsError() && strings.Contains(v.Str, "it was removed"):
		gone("a REMOVE whose reply was lost")
		return
	case v.IsError() || v.Kind != '*':
		c.note("tend removal of group %d: KVS.GROUPS EMPTY via %s: %s", id, n.Name, v)
		return
	case len(v.Elems) > 0:
		var ids []string
		for _, e := range v.Elems {
			ids = append(ids, e.Str)
		}
		c.note("tend removal of group %d: its moves %s go on", id, strings.Join(ids, ","))
		return
	}
	v, n, err = c.groupsCommand("REMOVE", strconv.Itoa(id))
	switch {
	case err != nil:
		c.note("tend removal of group %d: %v", id, err)
	case string(v.Raw) == "+OK\r\n":
		gone("KVS.GROUPS REMOVE via " + n.Name)
	case v.IsError() && strings.Contains(v.Str, "it was removed"):
		gone("a REMOVE whose reply was lost")
	default:
		r.refusals++
		c.note("tend removal of group %d: KVS.GROUPS REMOVE via %s: %s", id, n.Name, v)
	}
}

// drainGroups ends an epoch's moves, the moves into new groups still to
// record and its removal under way once its faults are over, with the
// copies at full speed (slot-move-rate 0 on every member; the faults'
// moves ran at chaosMoveRate), then sets the rate back.
func (c *chaos) drainGroups() {
	c.setMoveRate("0")
	pollFor(c.t, "the removal under way to end", chaosMoveWait, 200*time.Millisecond, func() error {
		c.settle()
		if c.tendGroups() {
			return fmt.Errorf("group %d is being removed; moves into new groups %v to record", c.regroup.removing, c.regroup.splits)
		}
		return nil
	})
	c.waitMoves()
	c.setMoveRate(chaosMoveRate)
}

// setMoveRate sets slot-move-rate on every member.
func (c *chaos) setMoveRate(rate string) {
	c.regroup.rate = rate
	for _, n := range c.members() {
		waitFor(c.t, "CONFIG SET slot-move-rate "+rate+" on "+n.Name, func() error {
			v, err := oneCommand(n.Addr, ioTimeout, "CONFIG", "SET", "slot-move-rate", rate)
			if err != nil || string(v.Raw) != "+OK\r\n" {
				return fmt.Errorf("%s %v", v, err)
			}
			return nil
		})
	}
}

// checkGroups runs at the end of a sharded run, no move in flight and no
// removal under way: every member lists the live groups and no other,
// each with a leader; no slot of the stored map belongs to a removed
// group; no member keeps a removed group's state.
func (c *chaos) checkGroups() {
	t := c.t
	r := c.regroup
	c.refreshGroups()
	var gone []int
	for g := range r.seen {
		if !slices.Contains(r.live, g) {
			gone = append(gone, g)
		}
	}
	slices.Sort(gone)
	want := append([]int{0}, r.live...)
	waitFor(t, fmt.Sprintf("every member to list groups %v, each with a leader, and none of %v", want, gone), func() error {
		ls, err := groupLeadersNow(c.members(), c.raftGroups())
		if err != nil {
			return err
		}
		var got []int
		for g, l := range ls {
			if l != nil {
				got = append(got, g)
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("the members list groups %v, want %v", got, want)
		}
		return nil
	})
	if len(r.live) < chaosMinGroups || len(r.live) > chaosMaxGroups {
		t.Errorf("%d data groups at the end (%v), want %d to %d", len(r.live), r.live, chaosMinGroups, chaosMaxGroups)
	}
	_, runs, err := c.slotMapNow()
	if err != nil {
		t.Fatal(err)
	}
	owned := map[int]int{}
	for _, run := range runs {
		owned[run.group] += run.last - run.first + 1
		if !slices.Contains(r.live, run.group) {
			t.Errorf("the stored slot map gives slots %d-%d to group %d, not among the live groups %v", run.first, run.last, run.group, r.live)
		}
	}
	for _, n := range c.members() {
		for _, g := range gone {
			dir := filepath.Join(n.DataDir(), "groups", strconv.Itoa(g))
			waitFor(t, fmt.Sprintf("%s to delete removed group %d's state", n.Name, g), func() error {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("%s: %v", dir, err)
				}
				return nil
			})
		}
	}
	t.Logf("groups: %d added (%d adds refused or of unknown outcome), %d moves into new groups; %d removals begun, %d removed %v, %d REMOVEs refused; data groups at the end %v, slots by group %v",
		r.added, r.addFailed, r.splitMoves, r.removeAsked, len(r.removed), r.removed, r.refusals, r.live, owned)
	if c.faults["add-group"] > 0 && r.added == 0 && r.addFailed == 0 {
		t.Errorf("add-group was drawn %d times and never asked to add a group", c.faults["add-group"])
	}
}
