package server

import (
	"fmt"
	"strconv"
	"strings"

	"kvs/fsm"
)

// CLUSTER MIGRATESLOTS, GETSLOTMIGRATIONS and CANCELSLOTMIGRATIONS:
// Valkey 9's commands of atomic slot migration, answered by kvs's moves of
// slots between groups (slotmoves.go; docs/cluster.md, "Moving slots").
// Any node takes them, as KVS.SLOTS. They differ from Valkey's where kvs
// differs: a move goes from group to group, so NODE names the target by
// the node that leads its group (or, where that node leads several, by
// the group's number), a range that spans groups becomes a move from
// each, and every node lists every move.

// slotMigration is one range of one source group, to move to a group.
type slotMigration struct{ first, last, source, target int }

// clusterMigrateSlots answers CLUSTER MIGRATESLOTS SLOTSRANGE start end
// [start end ...] NODE id [SLOTSRANGE ... NODE id ...]: every range is
// checked against the slot map and the topology before the first move is
// recorded.
func (c *client) clusterMigrateSlots(shards []shard, m *slotMap, args [][]byte) {
	mv := c.s.cfg.Mover
	if mv == nil {
		c.out = appendError(c.out, errNoMover)
		return
	}
	var moves []slotMigration
	for i := 2; i < len(args); {
		if !is(args[i], "slotsrange") {
			c.out = appendError(c.out, errSyntax)
			return
		}
		i++
		var ranges [][2]int
		for i+1 < len(args) && !is(args[i], "node") {
			first, ok1 := parseInt(args[i])
			last, ok2 := parseInt(args[i+1])
			if !ok1 || !ok2 || first < 0 || last < 0 || first >= fsm.ClusterSlots || last >= fsm.ClusterSlots {
				c.out = appendError(c.out, "ERR Invalid or out of range slot")
				return
			}
			if first > last {
				c.out = appendError(c.out, fmt.Sprintf("ERR start slot number %d is greater than end slot number %d", first, last))
				return
			}
			ranges = append(ranges, [2]int{int(first), int(last)})
			i += 2
		}
		if len(ranges) == 0 || i+1 >= len(args) || !is(args[i], "node") {
			c.out = appendError(c.out, errSyntax)
			return
		}
		target, e := migrationTarget(shards, string(args[i+1]))
		if e != "" {
			c.out = appendError(c.out, e)
			return
		}
		i += 2
		for _, r := range ranges {
			for s := r[0]; s <= r[1]; {
				src, e := int(m.slots[s]), s
				for e+1 <= r[1] && int(m.slots[e+1]) == src {
					e++
				}
				if src == target {
					c.out = appendError(c.out, fmt.Sprintf("ERR slots %d-%d are data group %d's already", s, e, target))
					return
				}
				for _, o := range moves {
					if s <= o.last && o.first <= e {
						c.out = appendError(c.out, fmt.Sprintf("ERR slot %d is named more than once", max(s, o.first)))
						return
					}
				}
				moves = append(moves, slotMigration{s, e, src, target})
				s = e + 1
			}
		}
	}
	if len(moves) == 0 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	var ids []string
	for _, mg := range moves {
		id, err := mv.Move(mg.first, mg.last, mg.target)
		if err != nil {
			e := errProposal(err, true)
			if len(ids) > 0 {
				// The moves recorded go on: say which, so that they can
				// be followed or cancelled.
				e += fmt.Sprintf(" (slots %d-%d; the moves recorded before it go on: %s)", mg.first, mg.last, strings.Join(ids, ", "))
			}
			c.out = appendError(c.out, e)
			return
		}
		ids = append(ids, strconv.FormatUint(id, 10))
	}
	c.out = appendStatus(c.out, "OK")
}

// migrationTarget returns the data group NODE names: the group its node
// leads, or the group of that number. It answers an error for a node that
// leads none or several, and for a number that is no data group.
func migrationTarget(shards []shard, name string) (int, string) {
	if n, err := strconv.Atoi(name); err == nil && len(name) < 40 {
		if n < 1 || n >= len(shards) {
			return 0, fmt.Sprintf("ERR no data group %d: the cluster's are 1 to %d", n, len(shards)-1)
		}
		return n, ""
	}
	var led []int
	known := false
	for i := range shards {
		if m := shards[i].master; m != nil && strings.EqualFold(m.nodeID, name) {
			known = true
		}
		for _, n := range shards[i].replicas {
			if strings.EqualFold(n.nodeID, name) {
				known = true
			}
		}
		if shards[i].master != nil && len(shards[i].ranges) > 0 && strings.EqualFold(shards[i].master.nodeID, name) {
			led = append(led, i)
		}
	}
	switch {
	case len(led) == 1:
		return led[0], ""
	case len(led) > 1:
		groups := make([]string, len(led))
		for i, g := range led {
			groups[i] = strconv.Itoa(g)
		}
		return 0, fmt.Sprintf("ERR node %s leads data groups %s: name the target group by its number (NODE %s)",
			name, strings.Join(groups, ", "), groups[0])
	case known:
		return 0, fmt.Sprintf("ERR node %s is not the master of any slots: name the target group by its number (NODE 2)", name)
	}
	return 0, "ERR Unknown node " + name
}

// clusterGetSlotMigrations answers CLUSTER GETSLOTMIGRATIONS: a map per
// move, in flight or finished lately, with Valkey's fields where kvs has
// them and KVS.SLOTS STATUS's besides.
func (c *client) clusterGetSlotMigrations(shards []shard) {
	moves, ok := c.slotMoves()
	if !ok {
		return
	}
	leader := func(g int) string {
		if g >= 0 && g < len(shards) && shards[g].master != nil {
			return shards[g].master.nodeID
		}
		return ""
	}
	b := appendArrayLen(c.out, len(moves))
	for _, m := range moves {
		b = appendMapLen(b, 12, c.proto)
		str := func(name, v string) {
			b = appendBulkString(b, name)
			b = appendBulkString(b, v)
		}
		num := func(name string, v int64) {
			b = appendBulkString(b, name)
			b = appendInt(b, v)
		}
		num("id", int64(m.ID))
		str("slot_ranges", strings.ReplaceAll(m.Slots, ",", " "))
		str("source_node", leader(m.Source))
		str("target_node", leader(m.Target))
		num("source_group", int64(m.Source))
		num("target_group", int64(m.Target))
		str("state", m.Phase)
		str("message", m.Note)
		b = appendSlotMoveProgress(b, &m)
	}
	c.out = b
}

// slotMoves returns the moves of the cluster, or answers the error.
func (c *client) slotMoves() ([]SlotMove, bool) {
	mv := c.s.cfg.Mover
	if mv == nil {
		c.out = appendError(c.out, errNoMover)
		return nil, false
	}
	moves, err := mv.Moves()
	if err != nil {
		c.out = appendError(c.out, errProposal(err, false))
		return nil, false
	}
	return moves, true
}

// clusterCancelSlotMigrations answers CLUSTER CANCELSLOTMIGRATIONS: every
// move that may still be rolled back (before its activation) is.
func (c *client) clusterCancelSlotMigrations() {
	moves, ok := c.slotMoves()
	if !ok {
		return
	}
	mv := c.s.cfg.Mover
	for _, m := range moves {
		switch m.Phase {
		case "begun", "copying", "fenced":
			if err := mv.Cancel(m.ID); err != nil && !pastHandOver(mv, m.ID) {
				c.out = appendError(c.out, errProposal(err, true)+fmt.Sprintf(" (move %d)", m.ID))
				return
			}
		}
	}
	c.out = appendStatus(c.out, "OK")
}

// pastHandOver reports whether move id went past the point a cancel may
// reach (or ended) since it was listed: a cancel that lost that race is
// no failure of CANCELSLOTMIGRATIONS.
func pastHandOver(mv SlotMover, id uint64) bool {
	moves, err := mv.Moves()
	if err != nil {
		return false
	}
	for _, m := range moves {
		if m.ID == id {
			switch m.Phase {
			case "begun", "copying", "fenced":
				return false
			}
			return true
		}
	}
	return true
}
