package server

import (
	"slices"
	"time"

	"kvs/fsm"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, as Redis 7.0's
// multi.c has them.
//
// The queue and the watched keys are the connection's state. Between
// MULTI and EXEC every command but EXEC, DISCARD, MULTI, WATCH, QUIT and
// RESET is queued and answered QUEUED once it passed the checks every
// command passes before it runs (admit.go: its name, its arity, the ACL,
// maxmemory, ...); a refusal is answered with its error and marks the
// transaction, so that EXEC answers EXECABORT. Syntax errors are not
// queuing errors (Redis checks only what admit checks then): the
// command's error is its element of EXEC's array.
//
// EXEC turns the queue into one fsm.OpExec: the data commands (parsed at
// EXEC, so relative expiry times count from it), reads and writes alike,
// and the watched keys with what WATCH saw of each (fsm.Store.WatchKey:
// whether the key was live, its version, the store's write counter). The
// OpExec joins the pipeline's batch like any write, so it goes through
// every mode's write path (the wal, raft, forwarding from a follower) as
// one log entry, and apply decides from replicated state whether a
// watched key changed (nil reply, nothing run) or runs every command under
// the one write lock: reads see the transaction's earlier writes, and a
// crash keeps all of it or none. The commands the server answers itself
// (PING, ECHO, INFO, CLIENT, CONFIG, ...) run at EXEC, before the entry
// is proposed, and their replies take their places in EXEC's array.
// Blocking commands run as their non-blocking forms: an empty result is a
// null array at once, as in Redis.

// multiState is a connection's open transaction. Its memory is the
// connection's (client.tx), reused by the next MULTI: EXEC is done with
// the queued arguments once it returns, since the OpExec holds a copy.
type multiState struct {
	queued  []queuedCmd
	aborted bool // a queuing error: EXEC answers EXECABORT
	// flags are the queued commands' flags together, scripts' as they
	// declare them (Redis's mstate.cmd_flags): EXEC is a denyoom command,
	// or a write, when one of them is, and a pause of writes holds it.
	flags cmdFlags
	// buf holds the queued commands' arguments, which the connection's
	// read buffer cannot keep, and argv the slices of them.
	buf  []byte
	argv [][]byte
	// slot is the slot the queued commands' keys share (noSlot: none
	// yet); crossSlot, that they do not share one (slots.go).
	slot      int
	crossSlot bool
}

// maxReusedTx is the size above which a transaction's memory is dropped
// rather than kept for the connection's next one.
const maxReusedTx = 64 << 10

// reset empties m for a new transaction, keeping its memory.
func (m *multiState) reset() {
	clear(m.queued)
	clear(m.argv)
	m.queued, m.argv, m.buf = m.queued[:0], m.argv[:0], m.buf[:0]
	m.aborted, m.flags, m.slot, m.crossSlot = false, 0, noSlot, false
	if cap(m.buf) > maxReusedTx || cap(m.argv) > maxReusedTx/16 || cap(m.queued) > maxReusedTx/32 {
		*m = multiState{slot: noSlot}
	}
}

type queuedCmd struct {
	cmd  *command
	spec *command // the subcommand, for a container; cmd otherwise
	id   int      // the command's index in the command statistics
	args [][]byte
}

// watchedKey is a key WATCH recorded. unseen: WATCH could not look at
// it, a busy script holding the store (busy.go); it counts as changed.
type watchedKey struct {
	key    []byte
	seen   fsm.KeyVersion
	unseen bool
}

// execSlot is one element of EXEC's reply: a reply the server wrote at
// EXEC (raw), or the next reply of the OpExec's array.
type execSlot struct {
	raw     []byte
	sub     bool
	block   bool   // a blocking command's non-blocking form whose empty reply is a null array
	op      fsm.Op // a read's op, for the hit counters
	read    bool
	ifFound string // the parser's errIfFound
}

const (
	errExecAbort        = "EXECABORT Transaction discarded because of previous errors."
	errExecAbortBecause = "EXECABORT Transaction discarded because of: " // and the refusal of EXEC
	errNoMulti          = "ERR Command not allowed inside a transaction"
	errMultiNested      = "ERR MULTI calls can not be nested"
	errExecNoMulti      = "ERR EXEC without MULTI"
	errDiscardNoMulti   = "ERR DISCARD without MULTI"
	errWatchInMulti     = "ERR WATCH inside MULTI is not allowed"
)

func init() {
	registerCommands(
		command{name: "multi", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagAllowBusy, group: "transactions", tx: txMulti},
		command{name: "exec", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagSkipSlowlog, group: "transactions", tx: txExec},
		command{name: "discard", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagAllowBusy, group: "transactions", tx: txDiscard},
		command{name: "watch", arity: -2, flags: flagNoScript | flagLoading | flagStale | flagFast | flagAllowBusy, firstKey: 1, lastKey: -1, keyStep: 1, group: "transactions", tx: txWatch},
		command{name: "unwatch", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagAllowBusy, group: "transactions", run: runUnwatch},
	)
}

// queuesInMulti reports whether cmd is queued inside MULTI: all but the
// commands that control the transaction or the connection.
func queuesInMulti(cmd *command) bool {
	switch cmd.name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return false
	}
	return true
}

// queueInMulti queues a command sent inside MULTI that admit let pass
// (spec: its subcommand, for a container) and answers QUEUED.
func (c *client) queueInMulti(cmd, spec *command, id int, args [][]byte) {
	m := c.multi
	if !m.aborted { // an aborted transaction keeps nothing, as in Redis
		n := 0
		for _, a := range args {
			n += len(a)
		}
		// A full buffer is replaced, not grown: the arguments queued
		// before keep the old one.
		if cap(m.buf)-len(m.buf) < n {
			m.buf = make([]byte, 0, max(n, 2*cap(m.buf), 256))
		}
		if cap(m.argv)-len(m.argv) < len(args) {
			m.argv = make([][]byte, 0, max(len(args), 2*cap(m.argv), 16))
		}
		first := len(m.argv)
		for _, a := range args {
			start := len(m.buf)
			m.buf = append(m.buf, a...)
			m.argv = append(m.argv, m.buf[start:len(m.buf):len(m.buf)])
		}
		end := len(m.argv)
		m.queued = append(m.queued, queuedCmd{cmd: cmd, spec: spec, id: id, args: m.argv[first:end:end]})
		m.flags |= c.commandFlags(spec, args)
		c.multiCount.Store(int32(len(m.queued)))
	}
	c.replyRaw(id, rawQueued)
}

// Replies decided before proposing, for replyRaw.
const (
	rawOK     = "+OK\r\n"
	rawQueued = "+QUEUED\r\n"
)

// replyRaw answers command id with a reply already in RESP, queued behind
// pending writes so it keeps its place in the pipeline.
func (c *client) replyRaw(id int, raw string) {
	if len(c.pending) > 0 {
		c.pending = append(c.pending, pendingReply{raw: raw, cmd: id})
		return
	}
	at := len(c.out)
	c.out = append(c.out, raw...)
	c.answered(id, false, at)
}

func txMulti(c *client, id int, args [][]byte) bool {
	if c.multi != nil {
		c.replyError(id, false, errMultiNested)
		return true
	}
	c.tx.reset()
	c.multi = &c.tx
	c.multiCount.Store(0)
	c.replyRaw(id, rawOK)
	return true
}

func txDiscard(c *client, id int, args [][]byte) bool {
	if c.multi == nil {
		c.replyError(id, false, errDiscardNoMulti)
		return true
	}
	c.endTransaction()
	c.replyRaw(id, rawOK)
	return true
}

// endTransaction leaves MULTI and forgets the watched keys, as EXEC and
// DISCARD do.
func (c *client) endTransaction() {
	c.multi = nil
	c.multiCount.Store(-1)
	c.watched = nil
}

func txWatch(c *client, id int, args [][]byte) bool {
	if c.multi != nil {
		c.replyError(id, false, errWatchInMulti)
		return true
	}
	// WATCH sees the pipeline's writes before it.
	if c.proposeBatch() {
		return false
	}
	for _, k := range args[1:] {
		if c.watching(k) {
			continue
		}
		key := append([]byte(nil), k...)
		if len(c.watched) == 0 {
			// The transaction's check runs in this database: kvs checks
			// every watched key in the first WATCH's.
			c.watchDB = c.db
		}
		seen, ok := c.grp.store.WatchKeyInDBServing(c.now, c.watchDB, key)
		if c.db != c.watchDB {
			// A key of another database than the first WATCH's cannot
			// be checked: EXEC answers as if it changed, never running
			// a transaction whose keys may have.
			ok = false
		}
		c.watched = append(c.watched, watchedKey{key: key, seen: seen, unseen: !ok})
	}
	at := len(c.out)
	c.out = appendStatus(c.out, "OK")
	c.answered(id, false, at)
	return true
}

func (c *client) watching(k []byte) bool {
	for i := range c.watched {
		if string(c.watched[i].key) == string(k) {
			return true
		}
	}
	return false
}

func runUnwatch(c *client, args [][]byte) {
	c.watched = nil
	c.out = appendStatus(c.out, "OK")
}

func txExec(c *client, id int, args [][]byte) bool {
	m := c.multi
	if m == nil {
		c.s.showMonitorLines(c.execMonitorLines(nil, false, args))
		c.replyError(id, false, errExecNoMulti)
		return true
	}
	if m.aborted {
		c.s.showMonitorLines(c.execMonitorLines(m.queued, false, args))
		c.endTransaction()
		c.replyError(id, false, errExecAbort)
		return true
	}
	if slices.ContainsFunc(c.watched, func(w watchedKey) bool { return w.unseen }) {
		// As if a watched key changed: a null reply, nothing run.
		c.s.showMonitorLines(c.execMonitorLines(m.queued, false, args))
		c.endTransaction()
		r := fsm.Reply{Kind: fsm.ReplyNilArray}
		c.replyRaw(id, string(appendReply(nil, &r, c.proto)))
		return true
	}
	if len(c.batch) > 0 && c.batchGrp != c.grp {
		// A batch goes to one group: the one before goes first.
		if c.proposeBatch() {
			return false
		}
	}
	// The commands the server answers see the pipeline's writes before
	// the EXEC, as they would in Redis.
	for _, q := range m.queued {
		if q.cmd.run != nil && len(c.pending) > 0 {
			if c.proposeBatch() {
				return false // run again once the batch is answered
			}
			break
		}
	}
	// The watched keys as they are now: a queued UNWATCH runs in
	// planExec, after Redis has checked them.
	watched := c.watched
	dbBefore := c.db
	lines := c.execMonitorLines(m.queued, true, args)
	start := len(c.execSlots)
	slots, subs := c.planExec(m.queued)
	c.endTransaction()
	if len(subs) == 0 && len(watched) == 0 {
		c.s.showMonitorLines(lines)
		c.replyRaw(id, string(c.appendExec(nil, slots, nil)))
		clear(slots)
		c.execSlots = c.execSlots[:start] // nothing else refers to them
		return true
	}
	keys, seen := c.watchKeys[:0], c.watchSeen[:0]
	for _, w := range watched {
		keys, seen = append(keys, w.key), append(seen, w.seen)
	}
	if c.trk.on {
		c.trackExec(m.queued)
	}
	exec := c.execs.Build(keys, seen, subs)
	if len(watched) > 0 {
		exec.DB = c.watchDB // where apply checks them
	}
	c.batch, c.batchGrp = append(c.batch, exec), c.grp
	clear(keys)
	clear(subs)
	c.watchKeys, c.watchSeen, c.execSubs = keys, seen, subs
	p := pendingReply{cmd: id, exec: true, slots: slots, monitor: lines}
	if c.db != dbBefore {
		p.dbBefore = int(dbBefore) + 1
	}
	c.queue(p)
	return true
}

// execDone is answerBatch's: the batch's OpExecs and EXEC replies are
// written, so their memory is reused from here on.
func (c *client) execDone() {
	c.execs.Reset()
	clear(c.execSlots)
	c.execSlots = c.execSlots[:0]
	if cap(c.execSlots) > maxReusedTx/64 {
		c.execSlots = nil
	}
}

// planExec turns the queued commands into EXEC's reply slots, appended to
// c.execSlots, and the OpExec's commands, in c.execSubs's memory, running
// the commands the server answers itself.
func (c *client) planExec(queued []queuedCmd) ([]execSlot, []fsm.Command) {
	start := len(c.execSlots)
	// Grown, the slab moves: the EXECs planned before keep the old one.
	c.execSlots = slices.Grow(c.execSlots, len(queued))[:start+len(queued)]
	slots := c.execSlots[start : start+len(queued) : start+len(queued)]
	subs := c.execSubs[:0]
	for i, q := range queued {
		sl := &slots[i]
		if e := c.execRefusal(q.cmd, q.args); e != "" {
			sl.raw = appendError(nil, e)
			continue
		}
		var fc fsm.Command
		var e string
		switch {
		case q.cmd.block != nil:
			var req blockReq
			req, e = q.cmd.block(c, q.args)
			req.cmd.DB = c.db
			// Inside MULTI, BRPOPLPUSH and BLMOVE answer an empty source
			// with a null bulk string (Redis's blmoveGenericCommand),
			// the others with a null array.
			fc, sl.block = req.cmd, q.cmd.name != "brpoplpush" && q.cmd.name != "blmove"
		case q.cmd.parse != nil:
			fc, e = q.cmd.parse(c, q.args)
			fc.DB = c.db
			sl.ifFound, c.errIfFound = c.errIfFound, ""
		default:
			sl.raw = c.runCaptured(q.cmd, q.args)
			continue
		}
		switch {
		case e != "":
			sl.raw = appendError(nil, e)
		case fc.Op == fsm.OpInvalid:
			// SCAN past the end (see readLocal).
			sl.raw = []byte("*2\r\n$1\r\n0\r\n*0\r\n")
		default:
			if fc.Op == fsm.OpEvalRO || fc.Op == fsm.OpFCallRO {
				// A read-only script runs inside the log's apply too when
				// EXEC holds it, where a replay runs it again with no
				// client to kill it: it gets a write script's budget.
				fc.Float = c.s.scriptBudget()
			}
			sl.sub, sl.op, sl.read = true, fc.Op, !fc.Op.IsWrite()
			subs = append(subs, fc)
		}
	}
	return slots, subs
}

// runCaptured runs a command the server answers itself and returns its
// reply, leaving the connection's output and pending replies as they were.
func (c *client) runCaptured(cmd *command, args [][]byte) []byte {
	if c.ps != nil && c.fd < 0 {
		// Its writer takes the replies before EXEC's now: while the
		// command runs, c.out holds only its reply (see mergeOutput).
		c.mergeOutput()
	}
	pending, batch := c.pending, c.batch
	c.pending, c.batch, c.capturing = nil, nil, true
	at := len(c.out)
	start := time.Now()
	cmd.run(c, args)
	if d, t := time.Since(start), c.s.slowlog.threshold(); t >= 0 && d >= t && cmd.name != "exec" {
		// Redis logs the commands EXEC runs, each with its own time
		// (EXEC itself is not logged).
		c.s.slowlog.add(c, args, d)
	}
	raw := append([]byte(nil), c.out[at:]...)
	c.out = c.out[:at]
	c.pending, c.batch, c.capturing = pending, batch, false
	return raw
}

// appendExec writes EXEC's reply: r is the OpExec's (nil when there was
// none to propose).
func (c *client) appendExec(b []byte, slots []execSlot, r *fsm.Reply) []byte {
	if r != nil && r.Kind != fsm.ReplyArray {
		return appendReply(b, r, c.proto) // a watched key changed: nil
	}
	b = appendArrayLen(b, len(slots))
	j := 0
	for i := range slots {
		sl := &slots[i]
		if !sl.sub {
			b = append(b, sl.raw...)
			continue
		}
		sr := &r.Array[j]
		j++
		switch {
		case sl.block && (sr.Kind == fsm.ReplyNil || sr.Kind == fsm.ReplyNilArray):
			*sr = fsm.Reply{Kind: fsm.ReplyNilArray}
		case sl.ifFound != "":
			if sr.Kind == fsm.ReplyBulk {
				*sr = fsm.Reply{Kind: fsm.ReplyError, Str: sl.ifFound}
			}
		case sl.read:
			c.countHits(sl.op, sr)
		}
		b = appendReply(b, sr, c.proto)
	}
	return b
}
