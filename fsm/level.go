package fsm

// ApplyLevel is the level of replicated entries this kvs can apply. A kvs
// that meets an op it does not know in a committed entry stops (it is a
// bug for the store to skip an entry), so an op that an earlier release
// cannot apply has a level above 0, and a node proposes it only once
// every node of its cluster has said it can apply that level (the
// cluster's level, kept in the meta group: see package group's Levels).
// Levels only grow, one step for each release that adds such ops:
//
//	0: the ops of every kvs before the cluster level existed
//	1: OpMetaCAS; OpSlotsAssign, OpSlotsPurge, OpMoveOut, OpMoveDrain and
//	   OpMoveIn (moving slots)
//	2: OpMetaTxn (a move of slots and a group's removal, exclusive)
const ApplyLevel = 2

// Level is the level an entry holding cmds needs: the highest of its
// ops', 0 for ops every kvs applies.
func Level(cmds []Command) int {
	level := 0
	for i := range cmds {
		if s := cmds[i].Op.spec(); s != nil && s.level > level {
			level = s.level
		}
	}
	return level
}
