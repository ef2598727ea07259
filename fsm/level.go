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
//	3: the HyperLogLog and geo ops (opBaseHLL, opBaseGeo), DUMP and
//	   RESTORE, DEBUG DIGEST (and OpCallLevel, which lets an entry's
//	   scripts call the commands of level 3)
//	4: what came after the first release of level 3 (streams, databases,
//	   ...); OpCallLevel may name level 4
//
// A transaction (OpExec) needs the level of the commands it queued. A
// script's calls are not known before it runs: calllevel.go says how
// they keep to the cluster's level.
const ApplyLevel = 4

// dbLevel is the level of a command of a database other than 0 (its
// encoding has a field no earlier kvs reads).
const dbLevel = 4

// Level is the level an entry holding cmds needs: the highest of its
// ops', 0 for ops every kvs applies.
func Level(cmds []Command) int {
	level := 0
	for i := range cmds {
		s := cmds[i].Op.spec()
		if s == nil {
			continue
		}
		level = max(level, s.level)
		if cmds[i].DB != 0 || (cmds[i].Op == OpFlushAll && cmds[i].Flags&FlagFlushDB != 0) {
			level = max(level, dbLevel) // a database other than 0
		}
		if cmds[i].Op == OpCallLevel {
			level = max(level, int(cmds[i].Int))
		}
		if cmds[i].Op == OpExec && len(cmds[i].Args) == 2 {
			level = max(level, execLevel(&cmds[i]))
		}
	}
	return level
}

// execLevel is the level of the commands an OpExec queued; 0 when they do
// not decode (Validate refuses such an EXEC anyway).
func execLevel(c *Command) int {
	d := decoder{b: c.Args[1]}
	cmds, err := d.commands(false)
	if err != nil {
		return 0
	}
	return Level(cmds)
}
