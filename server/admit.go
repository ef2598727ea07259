package server

import (
	"strings"

	"kvs/acl"
	"kvs/fsm"
)

// The checks before a command runs or is queued in MULTI: Redis 7.0's
// processCommand (server.c), in its order and with its texts. executeOne
// runs admit on every command a client sends, before it decides between
// running the command and queuing it, so the two can never judge a
// command apart. In order:
//
//  1. the command exists, and for a container (CONFIG, CLIENT, ...) its
//     subcommand, one the container's row names (commands.go):
//     "ERR unknown command ...", "ERR unknown subcommand ...";
//  2. the arity, a subcommand's own for a container; DEBUG is refused
//     unless enable-debug-command allows it (debug.go);
//  3. the connection has authenticated if it must (NOAUTH);
//  4. inside MULTI, the command is not one of Redis's no-multi ones
//     (SAVE, SHUTDOWN; KVS.BACKUP);
//  5. the user's ACL rules allow the command on those keys and channels
//     (NOPERM, logged in ACL LOG); under tls-cluster, the node-to-node
//     commands come from a node;
//  6. past maxmemory with nothing to evict, a denyoom command, or inside
//     MULTI any command to queue, since queuing takes memory (OOM), unless
//     a script is busy;
//  7. while the append log cannot be written, a write (MISCONF);
//  8. while this node has fewer good replicas than min-replicas-to-write,
//     a write (NOREPLICAS; replicas.go);
//  9. RESP2's subscribed mode allows only (P|S)SUBSCRIBE,
//     (P|S)UNSUBSCRIBE, PING, QUIT and RESET;
// 10. while a script runs past busy-reply-threshold, only Redis's
//     allow_busy commands run (BUSY, busy.go);
// 11. a client pause holds the command until it ends.
//
// The flags the steps read are Redis's getCommandFlags: a subcommand's
// own, from Redis's table (package cmdspec), and a script's or function's as
// it declares them (commandFlags).
//
// A refusal is answered at once, in the pipeline's order, and inside MULTI
// it flags the transaction, so that EXEC answers EXECABORT (Redis's
// flagTransaction), whatever the refused command: MULTI, WATCH or DISCARD
// with a wrong arity too. A refused EXEC discards the transaction and the
// watched keys, answering "EXECABORT Transaction discarded because of: "
// and the refusal (Redis's execCommandAbort). EXEC is judged by what it
// holds: it is a denyoom command, or a write, when a command it queued is.
// What a command answers itself (MULTI nested, WATCH inside MULTI) flags
// nothing.
//
// Steps of processCommand with no counterpart in kvs: MODULE's
// protection (kvs has no MODULE); Redis Cluster's redirection (a
// cluster node redirects a READONLY connection's keyed writes as it
// proposes them, route.go, and forwards a transaction whole); a read-only
// replica and replica-serve-stale-data (a follower forwards writes to the
// leader, which checks min-replicas-to-write for them); LOADING (a node that has not
// caught up with its log answers it to reads, as it reads: readLocal).

// A verdict is admit's decision on a command.
type verdict uint8

const (
	admitted verdict = iota // run or queue it
	refused                 // answered with its refusal, or the connection closes
	held                    // a loop client waits for a client pause to end; executed again then
)

// admit runs the checks before execution on args, which name cmd (nil:
// unknown) and, when cmd is a container, its subcommand spec (nil:
// unknown); spec is cmd otherwise. id is the command's statistics index.
func (c *client) admit(cmd, spec *command, id int, args [][]byte) verdict {
	if spec == nil {
		if cmd == nil {
			c.refuse(nil, id, args, errUnknownCommand(args[0], args[1:]))
		} else {
			c.refuse(cmd, id, args, errUnknownSubcommand(args[1], cmd.name))
		}
		return refused
	}
	if !spec.arityOK(args) {
		c.refuse(cmd, id, args, errWrongArgs(spec.name))
		return refused
	}
	if cmd.name == "debug" && !c.debugAllowed() {
		c.refuse(cmd, id, args, errDebugDisabled)
		return refused
	}
	// The user's checks cost one atomic load while it may run anything.
	var ac *acl.Command
	if !c.auth.fast || c.auth.gen != c.s.cfg.Store.ACLGen() {
		if !c.refreshUser() {
			return refused
		}
		if !c.auth.fast {
			ac = c.aclCommand(cmd, args)
		}
		if ac != nil && c.needsAuth(ac) {
			c.refuse(cmd, id, args, errNoAuth)
			return refused
		}
	}
	if c.multi != nil && spec.flags&flagNoMulti != 0 {
		c.refuse(cmd, id, args, errNoMulti)
		return refused
	}
	if ac != nil {
		if e := c.aclDenial(ac, args); e != "" {
			c.refuse(cmd, id, args, e)
			return refused
		}
	}
	if c.s.cfg.TLS != nil {
		if e := c.nodeRefusal(cmd); e != "" {
			c.refuse(cmd, id, args, e)
			return refused
		}
	}
	if c.s.router.sharded() {
		if e := c.routeCommand(cmd, spec, args); e != "" {
			if cmd.name == "exec" && c.multi != nil {
				// Redis discards the transaction and redirects: the
				// error is not an EXECABORT.
				c.endTransaction()
				c.replyError(id, true, e)
				return refused
			}
			c.refuse(cmd, id, args, e)
			return refused
		}
	}
	// Redis skips the step while a script is busy: the busy step refuses
	// instead.
	if c.s.maxMemory.Load() > 0 && c.s.scriptBusy() == fsm.NotBusy && c.refusesOOM(cmd, spec, args) {
		if e := c.oomRefusal(); e != "" {
			c.refuse(cmd, id, args, e)
			return refused
		}
	}
	if c.s.cfg.LogWriteErr != nil && (spec.flags&(flagWrite|flagDeclared) != 0 || cmd.tx != nil) {
		// What may write (EXEC, a script) asks the log's state first,
		// then what it holds or declares.
		if err := c.s.cfg.LogWriteErr(); err != nil && c.writes(cmd, spec, args) {
			c.refuse(cmd, id, args, errMisconfAOF+strerror(err))
			return refused
		}
	}
	if c.s.minReplicas.toWrite.Load() > 0 && (spec.flags&(flagWrite|flagDeclared) != 0 || cmd.tx != nil) &&
		c.writes(cmd, spec, args) && c.s.tooFewReplicas(c.writeGroup()) {
		c.refuse(cmd, id, args, errNoReplicas)
		return refused
	}
	if c.s.readOnlyReplica() && !c.peer && (spec.flags&(flagWrite|flagDeclared) != 0 || cmd.tx != nil) && c.replicaRefuses(cmd, spec, args) {
		// Redis's replica-read-only yes, while REPLICAOF links this
		// node to a redis-server (replicaof.go).
		c.refuse(cmd, id, args, errReadOnlyReplica)
		return refused
	}
	if c.ps != nil {
		if e := c.subscribedRefusal(cmd, spec); e != "" {
			c.refuse(cmd, id, args, e)
			return refused
		}
	}
	// While a script runs past busy-reply-threshold, a command without
	// flagAllowBusy (its subcommand's, for a container) is refused, after
	// every refusal above and before the client pause: a command queued
	// during the script flags its transaction, and EXEC, which is not
	// allow_busy, answers EXECABORT, so that a transaction sent during
	// the script runs whole or not at all. One atomic load while no
	// script is busy.
	if busy := c.s.scriptBusy(); busy != fsm.NotBusy && spec.flags&flagAllowBusy == 0 {
		c.refuse(cmd, id, args, errBusy(busy))
		return refused
	}
	if (c.held || c.s.pauseMode.Load() != pauseNone) && !c.holdIfPaused(spec, args) {
		return held
	}
	if c.serveHeld {
		c.serveHeld = false // woken: the services ended
	}
	if c.s.blocked.servingN.Load() > 0 && c.fd >= 0 && c.blk == nil && !c.peer && c.script == nil &&
		!c.s.blocked.holdUntilServed(c) {
		return held
	}
	return admitted
}

// refuse answers a command the checks before execution refused with e, as
// Redis's rejectCommand does: inside MULTI it flags the transaction, so
// that EXEC answers EXECABORT, and a refused EXEC (in MULTI or not)
// discards the transaction and the watched keys and says why.
func (c *client) refuse(cmd *command, id int, args [][]byte, e string) {
	if cmd != nil && cmd.name == "exec" {
		c.endTransaction()
		// Redis shows the EXEC that ends the MULTI it showed.
		c.s.showMonitorLines(c.execMonitorLines(nil, false, args))
		// Redis gives its generic refusals their "ERR" only as it
		// replies them, so that EXECABORT names them without it.
		c.replyError(id, true, errExecAbortBecause+strings.TrimPrefix(e, "ERR "))
		return
	}
	if c.multi != nil {
		c.multi.aborted = true
	}
	c.replyError(id, true, e)
}

// refusesOOM reports whether Redis refuses cmd (spec, for a container)
// with args past maxmemory: a denyoom command, a script that declares it
// may write without allow-oom; inside MULTI, every command but EXEC,
// DISCARD, QUIT and RESET, and an EXEC whose transaction holds a denyoom
// command.
func (c *client) refusesOOM(cmd, spec *command, args [][]byte) bool {
	if c.multi != nil {
		switch cmd.name {
		case "exec":
			return c.multi.flags&flagDenyOOM != 0
		case "discard", "quit", "reset":
			return false
		}
		return true
	}
	return c.commandFlags(spec, args)&flagDenyOOM != 0
}

// writes reports whether cmd (spec, for a container) with args is a write
// to refuse while the log cannot be written: a write command, a script
// that declares it may write, or an EXEC whose transaction holds one.
func (c *client) writes(cmd, spec *command, args [][]byte) bool {
	if c.multi != nil && cmd.name == "exec" {
		return c.multi.flags&flagWrite != 0
	}
	return c.commandFlags(spec, args)&flagWrite != 0
}
