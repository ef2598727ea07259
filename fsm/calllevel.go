package fsm

import "errors"

// The level of the commands a script may call.
//
// A client's command of a level above the cluster's is refused before it
// is proposed (Level, and the proposers' gate). A script's calls are not
// known before it runs, so a script cannot be refused that way: during a
// rolling upgrade a script calling PFADD would add on the replicas of the
// newer kvs and fail, as an unknown command, on those of the older, and
// the replicas would differ. So in a cluster (GateScriptCalls) the entry
// says which commands its scripts may call: an entry proposed once the
// cluster's level is this kvs's begins with an OpCallLevel, which an older
// kvs cannot apply and is never sent while one may be a member; an entry
// without it lets its scripts call only the commands of level
// ungatedLevel and below, and answers a call of a newer one as every
// older kvs answers it: as a command it does not know. The level lasts to
// the end of the entry. Reads outside the log (a script run on a replica
// as a read) may call every command: they change nothing that replicas
// must agree on. Without GateScriptCalls (memory and durable mode, one
// kvs) scripts may call every command.

// ungatedLevel is the level of the last kvs that did not gate script
// calls: every command it knew may be called by any entry's scripts.
const ungatedLevel = 2

// CallLevelFrom is the first level whose kvs applies OpCallLevel.
const CallLevelFrom = 3

// OpCallLevel: Int = the level the rest of the entry's scripts may call
// commands of. Reply +OK, which the proposer that added it drops.
const OpCallLevel Op = opBaseScript + 40

func init() {
	registerOp(OpCallLevel, opSpec{name: "CALLLEVEL", write: true, args: 0, keys: keysNone, level: CallLevelFrom,
		check: checkCallLevel, apply: applyCallLevel})
}

func checkCallLevel(c *Command) error {
	if c.Int < CallLevelFrom || c.Int > ApplyLevel {
		return errCallLevel
	}
	return nil
}

var errCallLevel = errors.New("call level out of range")

func applyCallLevel(s *Store, now int64, c *Command) Reply {
	s.callLevel = max(s.callLevel, int(c.Int))
	return replyOK
}

// CallLevel is the command a proposer puts first in an entry whose
// scripts may call every command of level (CallLevelFrom to ApplyLevel):
// the cluster's level, which every member can apply. The entry then
// needs that level (Level).
func CallLevel(level int) Command { return Command{Op: OpCallLevel, Int: int64(level)} }

// RunsScripts reports whether an entry of cmds may run scripts (EVAL,
// FCALL, a transaction that may hold them): the entries that need a
// CallLevel for their scripts to call the newest commands.
func RunsScripts(cmds []Command) bool { return runsScripts(cmds) }

// GateScriptCalls makes the store's scripts, in the entries it applies,
// call only the commands the entry's level allows (see above): the store
// of a cluster's group, which kvs of several levels may replicate during
// a rolling upgrade.
func (s *Store) GateScriptCalls() {
	s.mu.Lock()
	s.gatedCalls = true
	s.mu.Unlock()
}

// beginCallsLocked sets the call level at the start of an entry.
func (s *Store) beginCallsLocked() {
	if s.gatedCalls {
		s.callLevel = ungatedLevel
	}
}

// endCallsLocked lets reads, outside entries, call every command.
func (s *Store) endCallsLocked() { s.callLevel = ApplyLevel }
