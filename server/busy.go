package server

import (
	"errors"
	"time"

	"kvs/fsm"
)

// Scripts that run long, as Redis answers around them (processCommand's
// busy check, scriptKill). Once a script has run for busy-reply-threshold
// milliseconds the store says it is busy (fsm/script_state.go), and every
// command but Redis's allow_busy ones (AUTH, HELLO, MULTI, DISCARD, WATCH,
// UNWATCH, QUIT, RESET, SHUTDOWN, SCRIPT KILL, FUNCTION KILL, FUNCTION
// STATS) is answered BUSY, naming SCRIPT KILL or FUNCTION KILL after the
// kind of script. Nothing of that reaches the store, whose lock the script
// holds: the allowed commands are answered without it.
//
// Where the script runs decides who answers:
//
//   - on an event loop (memory mode's writes, a read-only script), the
//     script's checkpoint calls the loop back every millisecond or so
//     (serveBusy in loop_linux.go, Redis's processEventsWhileBlocked),
//     which answers the loop's other clients from inside the script and
//     leaves the script's own client alone until it returns;
//   - other loops and the connections with a goroutine of their own see
//     the store busy before each command; one already waiting for the
//     store's lock when the script turns busy gives up the wait
//     (fsm.Store.ReadServing, ApplyServing) and answers BUSY too;
//   - a script that may write, in durable or cluster mode, runs inside the
//     log's apply; its caller waits for its entry as for any write.
//
// SCRIPT KILL and FUNCTION KILL stop the busy script unless it has written,
// or it may write and runs inside a logged entry's apply: every replica and
// every replay runs that one in full, so a kill on one node would make that
// node differ. A cluster follower refuses with Redis's own text for a
// script its master sent; the leader and a durable node say why. Such a
// script ends at its instruction budget (script-write-budget).

// busyError is what a store call reports when it gave up waiting for the
// store's lock because a script turned busy.
type busyError struct{ kind fsm.Busy }

func (e busyError) Error() string { return errBusy(e.kind) }

// busyNow is the busyError of the script busy now.
func (s *Server) busyNow() error { return busyError{s.scriptBusy()} }

// errBusyText is the client text of err if it is a busyError.
func errBusyText(err error) (string, bool) {
	var be busyError
	if errors.As(err, &be) {
		return be.Error(), true
	}
	return "", false
}

// proposeServing proposes c's batch: in memory mode c's goroutine applies
// it itself, giving up, with a busyError, if a script turns busy while it
// waits for the store.
func (c *client) proposeServing(dst []fsm.Reply, cmds []fsm.Command) ([]fsm.Reply, error) {
	g := c.batchGrp
	mp, ok := g.proposer.(MemoryProposer)
	if !ok {
		return c.s.proposeLocal(g, dst, cmds)
	}
	replies, ok := mp.Store.ApplyServing(dst[:0], time.Now().UnixMilli(), cmds, c.busyServe)
	if !ok {
		return nil, c.s.busyNow()
	}
	return replies, nil
}

// readNow answers the read cmd, which a command the server answers itself
// makes, at the clock's reading: BUSY if a script turned busy while it
// waited for the store.
func (c *client) readNow(cmd fsm.Command) {
	cmd.DB = c.db
	c.readCmd = cmd
	r, ok := c.grp.store.ReadServing(time.Now().UnixMilli(), &c.readCmd, nil)
	c.readCmd = fsm.Command{}
	if !ok {
		c.out = appendError(c.out, errBusy(c.s.scriptBusy()))
		return
	}
	c.out = appendReply(c.out, &r, c.proto)
}

// runScriptKill answers SCRIPT KILL.
func runScriptKill(c *client, args [][]byte) { c.killScript(false) }

// runFunctionKill answers FUNCTION KILL.
func runFunctionKill(c *client, args [][]byte) { c.killScript(true) }

// killScript answers SCRIPT KILL (function false) or FUNCTION KILL: of
// the busy script of the node's groups, if one is.
func (c *client) killScript(function bool) {
	res, kind, g := fsm.KillNotBusy, fsm.NotBusy, &c.s.router.home
	for lg := range c.s.router.local() {
		if res, kind = lg.store.KillScript(function); res != fsm.KillNotBusy {
			g = lg
			break
		}
	}
	switch res {
	case fsm.Killed:
		c.out = appendStatus(c.out, "OK")
	case fsm.KillNotBusy:
		c.out = appendError(c.out, errNotBusy)
	case fsm.KillDirty:
		c.out = appendError(c.out, errUnkillableDirty)
	case fsm.KillLogged:
		if !g.leads() {
			c.out = appendError(c.out, errUnkillableReplica)
		} else {
			c.out = appendError(c.out, errUnkillableLogged)
		}
	case fsm.KillWrongKind:
		c.out = appendError(c.out, errBusy(kind))
	}
}

// runFunctionStatsBusy answers FUNCTION STATS while a script is busy:
// the running function, or BUSY while the busy script is an eval, as
// Redis answers.
func runFunctionStatsBusy(c *client, args [][]byte) {
	for {
		r, kind := fsm.Reply{}, fsm.NotBusy
		if g := c.s.busyGroup(); g != nil {
			r, kind = g.store.BusyFunctionStats()
		}
		switch kind {
		case fsm.BusyFunction:
			c.out = appendReply(c.out, &r, c.proto)
			return
		case fsm.BusyEval:
			c.out = appendError(c.out, errBusyScript)
			return
		}
		// It ended meanwhile: the stats of no running script, unless
		// another one turns busy first.
		c.readCmd = fsm.Command{Op: fsm.OpFunctionStats}
		r, ok := c.s.cfg.Store.ReadServing(time.Now().UnixMilli(), &c.readCmd, nil)
		c.readCmd = fsm.Command{}
		if ok {
			c.out = appendReply(c.out, &r, c.proto)
			return
		}
	}
}

// scriptSubcommands is the runs of SCRIPT: KILL, which the server answers.
func scriptSubcommands(c *client, args [][]byte) func(*client, [][]byte) {
	if len(args) == 2 && is(args[1], "kill") {
		return runScriptKill
	}
	return nil
}

// functionSubcommands is the runs of FUNCTION: KILL, and STATS while a
// script is busy, which the server answers.
func functionSubcommands(c *client, args [][]byte) func(*client, [][]byte) {
	switch {
	case len(args) != 2:
	case is(args[1], "kill"):
		return runFunctionKill
	case is(args[1], "stats") && c.s.scriptBusy() != fsm.NotBusy:
		return runFunctionStatsBusy
	}
	return nil
}
