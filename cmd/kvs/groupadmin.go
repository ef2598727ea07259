package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// Data groups added and removed while the cluster runs (kvs groups add
// and remove; docs/cluster.md, "Adding and removing groups"). The live
// groups are a group.GroupSet in the meta group's metadata, under
// group.GroupSetMeta, written by compare-and-set from the value read; a
// cluster that never changed its groups holds none, and its groups are
// 1..N of its shape (DIR/group-count, now the groups it was made with).
//
// Adding writes the new groups' ids and initial voters (group.Placement
// at creation) into the set; each node's tending then bootstraps the
// group where it is an initial voter, or opens an empty replica for the
// group's leader to add. Removing a group is two steps: emptying it (a
// move of slots for each range of its slots, spread over the other groups
// so that they hold about as many slots as each other) and, once it owns
// no slot and no move involving it is in flight, deleting it from the
// set; each node's tending then closes its replica and deletes its state,
// and the group's entries in the meta group are cleared.

// A node that knows the list of groups says so in the meta group, under
// node/<id>/groups, as it tends; groups are added and removed only once
// every member of the meta group has (checkNodesKnow): an older node
// would not follow a slot map that names a group it does not know.

func metaNodeGroups(id string) string { return "node/" + id + "/groups" }

// publishKnowsGroups writes this node's node/<id>/groups while it is
// absent.
func publishKnowsGroups(gm *groupsMeta) error {
	if _, ok := gm.meta.store.Meta(metaNodeGroups(gm.meta.id)); ok {
		return nil
	}
	if _, ok := gm.meta.Leader(); !ok && !gm.meta.node.IsLeader() {
		return nil
	}
	_, err := gm.srv.Propose([]fsm.Command{metaSet(metaNodeGroups(gm.meta.id), "1")})
	return err
}

// checkNodesKnow refuses a change of the groups while a member of the
// meta group has not said it knows the list of groups.
func checkNodesKnow(gm *groupsMeta) error {
	members, err := gm.meta.node.Members()
	if err != nil {
		return err
	}
	var old []string
	for _, m := range members {
		if _, ok := gm.meta.store.Meta(metaNodeGroups(m.ID)); !ok {
			old = append(old, m.ID)
		}
	}
	if len(old) > 0 {
		return errMove(fmt.Sprintf("node %s runs a kvs that does not add or remove groups, or has not said yet that it does: upgrade every node first", strings.Join(old, ", ")))
	}
	return nil
}

// readGroupSet returns the meta group's set of data groups as this node's
// replica has it, and the value it read ("" while there is none: groups
// 1..n of the shape, version 0).
func readGroupSet(gm *groupsMeta, n int) (group.GroupSet, string, error) {
	return groupSetFrom(gm.meta.store.Meta, n)
}

// groupSetFrom is readGroupSet from a replica of the meta group as meta
// reads it.
func groupSetFrom(meta func(string) (string, bool), n int) (group.GroupSet, string, error) {
	v, ok := meta(group.GroupSetMeta)
	if !ok {
		return group.DefaultGroupSet(n), "", nil
	}
	s, err := group.ParseGroupSet(v)
	return s, v, err
}

// LiveGroups lists the cluster's live data groups, by id, as this node's
// replica of the meta group has them: what a rebalance spreads slots
// over.
func LiveGroups(gm *groupsMeta, sh shape) ([]uint32, error) {
	s, _, err := readGroupSet(gm, sh.groups)
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.Live), nil
}

// groupAdmin is server.GroupAdmin over the meta group.
type groupAdmin struct {
	gm     *groupsMeta
	sh     shape
	moves  *slotMoves
	logger *slog.Logger
}

// Add records n new data groups, with the next unused ids, each with its
// placement over group 0's voters as its initial voters.
func (ga *groupAdmin) Add(n int) ([]int, error) {
	if err := checkNodesKnow(ga.gm); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		set, cur, err := readGroupSet(ga.gm, ga.sh.groups)
		if err != nil {
			return nil, err
		}
		members, err := ga.gm.meta.node.Members()
		if err != nil {
			return nil, err
		}
		var ids []string
		addrs := map[string]string{}
		for _, m := range members {
			if m.Voter {
				ids = append(ids, m.ID)
				addrs[m.ID] = m.RaftAddr
			}
		}
		if len(ids) == 0 {
			return nil, errMove("the meta group has no voters known to this node yet: try again")
		}
		if n > group.MaxGroups {
			return nil, errMove(fmt.Sprintf("cannot add %d groups: a cluster has at most %d", n, group.MaxGroups))
		}
		voters := make([][]group.Peer, n)
		for i := range voters {
			for _, id := range group.Placement(set.Last+uint32(i)+1, ids, ga.sh.replicas) {
				voters[i] = append(voters[i], group.Peer{ID: id, Addr: addrs[id]})
			}
		}
		next, added, err := set.Add(voters)
		if err != nil {
			return nil, errMove(strings.TrimPrefix(err.Error(), group.ErrBadGroupSet.Error()+": "))
		}
		rs, err := ga.gm.meta.keeper.propose(ga.gm.srv, []fsm.Command{metaCAS(group.GroupSetMeta, cur, next.Encode())})
		if err != nil {
			return nil, err
		}
		if casDone(rs[0]) {
			out := make([]int, len(added))
			for i, id := range added {
				out[i] = int(id)
			}
			ga.logger.Info("data groups added", "groups", added, "version", next.Version)
			return out, nil
		}
		if try == 10 {
			return nil, errMove("the cluster's groups kept changing: try again")
		}
	}
}

// checkRemovable returns the refusal of removing (or emptying) data group
// id by set: the meta group, an unknown or removed group, the last one.
func checkRemovable(set group.GroupSet, id int) error {
	switch {
	case id == 0:
		return errMove("group 0 is the meta group: it holds no slots and is on every node, and cannot be removed")
	case id < 0 || id > group.MaxGroupID || set.Removed(uint32(id)):
		return errMove(fmt.Sprintf("no data group %d: it was removed", id))
	case !set.Has(uint32(id)):
		return errMove(fmt.Sprintf("no data group %d: the cluster's are %s", id, idsText(set.Live)))
	case len(set.Live) == 1:
		return errMove(fmt.Sprintf("group %d is the cluster's last data group: its slots have nowhere to go", id))
	}
	return nil
}

// idsText lists ids, "a to b" when they are consecutive.
func idsText(ids []uint32) string {
	if n := len(ids); n > 1 && ids[n-1]-ids[0] == uint32(n-1) {
		return fmt.Sprintf("%d to %d", ids[0], ids[n-1])
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(parts, ", ")
}

// movesOf returns the moves not finished that involve group id, by the
// meta group's entries meta.
func movesOf(meta map[string]string, id int) ([]uint64, error) {
	recs, err := moveRecords(meta)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, r := range recs {
		if !r.finished() && (r.source == uint32(id) || r.target == uint32(id)) {
			out = append(out, r.id)
		}
	}
	return out, nil
}

// Empty starts the moves that take group id's slots to the other live
// groups (spreadSlots), one move for each range, and returns their ids.
// While moves out of the group are in flight (an emptying under way) it
// starts none and returns those, for the caller to wait for and ask
// again; a move into the group in flight is refused.
func (ga *groupAdmin) Empty(id int) ([]uint64, error) {
	set, _, err := readGroupSet(ga.gm, ga.sh.groups)
	if err != nil {
		return nil, err
	}
	if err := checkRemovable(set, id); err != nil {
		return nil, err
	}
	if err := checkNodesKnow(ga.gm); err != nil {
		return nil, err
	}
	recs, err := moveRecords(ga.gm.meta.store.MetaAll())
	if err != nil {
		return nil, err
	}
	var out, in []uint64
	for _, r := range recs {
		switch {
		case r.finished():
		case r.target == uint32(id):
			in = append(in, r.id)
		case r.source == uint32(id):
			out = append(out, r.id)
		}
	}
	if len(in) > 0 {
		return nil, errMove(fmt.Sprintf("slot moves %s into group %d are in flight: wait for them, or cancel them (kvs slots cancel)", joinInts(in), id))
	}
	if len(out) > 0 {
		return out, nil
	}
	m, err := storedSlotMap(ga.gm, ga.sh)
	if err != nil {
		return nil, err
	}
	plan := spreadSlots(m.Table(), uint16(id), set.Live)
	var started []uint64
	for _, mv := range plan {
		mid, err := ga.moves.Move(mv.first, mv.last, int(mv.to))
		if err != nil {
			if len(started) > 0 {
				return nil, fmt.Errorf("%w (moves %s were recorded and go on)", err, joinInts(started))
			}
			return nil, err
		}
		started = append(started, mid)
	}
	ga.logger.Info("emptying a data group", "group", id, "moves", started)
	return started, nil
}

// Remove deletes group id from the set, once it owns no slot by the
// stored map and no move involving it is in flight, then clears its
// entries in the meta group. The set is written by a transaction that
// also finds the last move id as read with the moves (removeEntry): a
// move recorded after that read fails it, and is seen in flight by the
// next try.
func (ga *groupAdmin) Remove(id int) error {
	// Only the transaction keeps a move from being recorded into the
	// group as it goes.
	if err := ga.gm.meta.keeper.levels.Allows(txnLevel); err != nil {
		return errMove(fmt.Sprintf("a group is removed once the cluster's level is %d or more: %v", txnLevel, err))
	}
	for try := 0; ; try++ {
		meta := ga.gm.meta.store.MetaAll()
		set, cur, err := groupSetFrom(func(name string) (string, bool) { v, ok := meta[name]; return v, ok }, ga.sh.groups)
		if err != nil {
			return err
		}
		if err := checkRemovable(set, id); err != nil {
			return err
		}
		if err := checkNodesKnow(ga.gm); err != nil {
			return err
		}
		if inFlight, err := movesOf(meta, id); err != nil {
			return err
		} else if len(inFlight) > 0 {
			return errMove(fmt.Sprintf("slot moves %s of group %d are in flight: remove it once they are over", joinInts(inFlight), id))
		}
		m, err := storedSlotMap(ga.gm, ga.sh)
		if err != nil {
			return err
		}
		owned := 0
		for s := range fsm.ClusterSlots {
			if m.Owner(s) == uint32(id) {
				owned++
			}
		}
		if owned > 0 {
			return errMove(fmt.Sprintf("group %d owns %d slots: empty it first (KVS.GROUPS EMPTY, or kvs groups remove, which does both)", id, owned))
		}
		next, err := set.Remove(uint32(id))
		if err != nil {
			return errMove(strings.TrimPrefix(err.Error(), group.ErrBadGroupSet.Error()+": "))
		}
		rs, err := ga.gm.meta.keeper.propose(ga.gm.srv, []fsm.Command{removeEntry(cur, meta[moveNextMeta], next.Encode())})
		if err != nil {
			return err
		}
		if casDone(rs[0]) {
			ga.logger.Info("data group removed", "group", id, "version", next.Version)
			// Its leader and membership: a leader that has not seen the
			// removal yet may publish them again, which the meta
			// group's leader clears as it tends (clearRemoved).
			_, err := ga.gm.srv.Propose([]fsm.Command{
				metaSet(metaGroupLeader(id), ""),
				metaSet(metaGroupConfig(id), ""),
			})
			if err != nil {
				ga.logger.Warn("clearing a removed group's entries; the meta group's leader clears them as it tends", "group", id, "err", err)
			}
			return nil
		}
		if try == 10 {
			return errMove("the cluster's groups kept changing: try again")
		}
	}
}

// removeEntry is the meta group's entry that writes next over the list
// of groups setText while the last move id given is still moveNext, as
// read with the moves found not to involve the group removed: a move
// recorded since, which may be into it, fails it (moveEntry checks the
// list the other way).
func removeEntry(setText, moveNext, next string) fsm.Command {
	return fsm.MetaTxn([]string{group.GroupSetMeta, setText, moveNextMeta, moveNext}, []string{group.GroupSetMeta, next})
}

// clearRemoved clears, on the meta group's leader, the leader and
// membership entries of removed groups that are still there (published
// by a leader that had not seen the removal yet).
func clearRemoved(gm *groupsMeta, set group.GroupSet) error {
	if !gm.meta.node.IsLeader() {
		return nil
	}
	var cmds []fsm.Command
	for name := range gm.meta.store.MetaAll() {
		rest, ok := strings.CutPrefix(name, "group/")
		if !ok {
			continue
		}
		idText, _, ok := strings.Cut(rest, "/")
		id, err := strconv.ParseUint(idText, 10, 32)
		if !ok || err != nil || !set.Removed(uint32(id)) {
			continue
		}
		cmds = append(cmds, metaSet(name, ""))
	}
	if len(cmds) == 0 {
		return nil
	}
	_, err := gm.srv.Propose(cmds)
	return err
}

// A spreadMove is one range of slots to move to group to, of a plan that
// empties a group (spreadSlots).
type spreadMove struct {
	first, last int
	to          uint32
}

// spreadSlots plans the moves that empty group from of table (slot ->
// group) over the other groups of live: each gets a share of from's slots
// so that they end with about as many slots as each other (the groups
// with fewest first, water-filling), the shares taken from from's slots
// in slot order, lower ids first; a move for each range of consecutive
// slots of a share. The plan is nil when from owns no slot.
func spreadSlots(table []uint16, from uint16, live []uint32) []spreadMove {
	counts := map[uint32]int{}
	var mine []int
	for s, g := range table {
		if g == from {
			mine = append(mine, s)
		} else {
			counts[uint32(g)]++
		}
	}
	var others []uint32
	for _, g := range live {
		if g != uint32(from) {
			others = append(others, g)
		}
	}
	if len(mine) == 0 || len(others) == 0 {
		return nil
	}
	// The highest level no group is raised past while the slots last.
	fill := func(level int) int {
		n := 0
		for _, g := range others {
			n += max(0, level-counts[g])
		}
		return n
	}
	level := 0
	for fill(level+1) <= len(mine) {
		level++
	}
	quota := map[uint32]int{}
	left := len(mine)
	for _, g := range others {
		quota[g] = max(0, level-counts[g])
		left -= quota[g]
	}
	for _, g := range others {
		if left == 0 {
			break
		}
		if counts[g]+quota[g] == level {
			quota[g]++
			left--
		}
	}
	var plan []spreadMove
	i := 0
	for _, g := range others {
		share := mine[i : i+quota[g]]
		i += quota[g]
		for j := 0; j < len(share); {
			k := j
			for k+1 < len(share) && share[k+1] == share[k]+1 {
				k++
			}
			plan = append(plan, spreadMove{share[j], share[k], g})
			j = k + 1
		}
	}
	return plan
}

var _ server.GroupAdmin = (*groupAdmin)(nil)

// A data group made while the cluster runs starts with an empty store,
// while every group's store holds the cluster's functions and loaded
// scripts alike (FUNCTION LOAD and SCRIPT LOAD write to every group): its
// leader copies them in from the meta group's store, which holds them
// too, and marks the group seeded under group/<k>/seeded. A move of slots
// to the group waits for the mark (moveDriver.begin), so that FCALL and
// EVALSHA find there what they find in the other groups. A library loaded
// while the copy is made reaches the group both ways (REPLACE makes the
// second the same); one deleted meanwhile may come back in the new group
// alone (FUNCTION DELETE it again).

func metaGroupSeeded(id int) string { return "group/" + strconv.Itoa(id) + "/seeded" }

// seeded reports whether data group id's store holds what every group's
// does: a group made with the cluster, or one seeded since.
func seeded(gm *groupsMeta, set group.GroupSet, id uint32) bool {
	return seededIn(gm.meta.store.Meta, set, id)
}

// seededIn is seeded from a replica of the meta group as meta reads it.
func seededIn(meta func(string) (string, bool), set group.GroupSet, id uint32) bool {
	if set.InitialVoters(id) == nil {
		return true
	}
	_, ok := meta(metaGroupSeeded(int(id)))
	return ok
}

// seedGroups copies the functions and scripts into each group made while
// the cluster runs that this node leads and that is not seeded yet.
func seedGroups(gm *groupsMeta, node *group.Node, set group.GroupSet, logger *slog.Logger) error {
	for _, id := range set.Live {
		if seeded(gm, set, id) {
			continue
		}
		g := node.Group(id)
		if g == nil || !g.Node().IsLeader() {
			continue
		}
		var cmds []fsm.Command
		for name, v := range gm.meta.store.MetaAll() {
			switch {
			case strings.HasPrefix(name, "function/"):
				cmds = append(cmds, fsm.Command{Op: fsm.OpFunctionLoad, Flags: fsm.FlagFunctionReplace, Args: [][]byte{[]byte(v)}})
			case strings.HasPrefix(name, "script/"):
				cmds = append(cmds, fsm.Command{Op: fsm.OpScriptLoad, Args: [][]byte{[]byte(v)}})
			}
		}
		if len(cmds) > 0 {
			rs, err := g.Proposer().Propose(cmds)
			if err != nil {
				return fmt.Errorf("group %d: copying the functions and scripts: %w", id, err)
			}
			for _, r := range rs {
				if r.Kind == fsm.ReplyError {
					return fmt.Errorf("group %d: copying the functions and scripts: %s", id, r.Str)
				}
			}
		}
		if _, err := gm.srv.Propose([]fsm.Command{metaSet(metaGroupSeeded(int(id)), "1")}); err != nil {
			return err
		}
		logger.Info("copied the functions and scripts into a new group", "group", id, "entries", len(cmds))
	}
	return nil
}
