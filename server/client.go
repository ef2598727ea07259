package server

import (
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"kvs/cmdspec"
	"kvs/fsm"
	"kvs/resp"
)

// outFlushSize is the output size at which a long pipeline's replies are
// written before the pipeline ends, so a pipeline of many large reads does
// not buffer all its replies.
const outFlushSize = 64 << 10

// client is one connection. Its fields are used only by the connection's
// goroutine, except those under info and the atomics, which CLIENT LIST and
// INFO read from other connections.
type client struct {
	s       *Server
	nc      net.Conn
	id      int64
	addr    string
	laddr   string
	created time.Time
	// unixSock: the connection came through the Unix socket (flag U).
	unixSock bool

	rd  *resp.Reader
	out []byte
	// readCmd holds a local read while the store answers it (readLocal).
	readCmd fsm.Command

	proto int // 2 or 3, set by HELLO
	quit  bool
	// repl is what REPLCONF told about the connection (rdbsync.go).
	repl replConf
	// db is the database SELECT chose, which every command the client
	// makes names (fsm.Command.DB); dbPub is it for CLIENT LIST.
	db    uint16
	dbPub atomic.Uint32
	// watchDB is the database of the keys WATCH saw (the first WATCH's).
	watchDB uint16

	// ps is the connection's subscriptions and the output messages take,
	// from its first SUBSCRIBE on (pubsub.go).
	ps *pushState
	// trk is the connection's client-side caching state (tracking.go).
	trk clientTracking

	// Cluster mode: readonly is set by READONLY (a cluster-aware client,
	// redirected with MOVED instead of forwarded); peer marks another
	// node's pool connection (KVS.PEER), whose requests are never relayed
	// again; readChecked is the group whose read barrier has passed
	// since the last proposal, for linearizable reads on the leader.
	readonly    bool
	peer        bool
	node        bool // a TLS connection with a CA-signed certificate (tls.go)
	readChecked *groupRef
	peerBuf     []byte // KVS.FORWARD's encoded replies, reused

	// The run of write commands not yet proposed (and, on a cluster
	// follower with linearizable reads, of reads to forward), and the
	// replies owed since the first of them, in order: a nil-error entry
	// takes the next reply of the batch, any other is an error decided
	// before proposing.
	batch    []fsm.Command
	batchGrp *groupRef // the group batch goes to
	pending  []pendingReply
	replies  []fsm.Reply // the batch's replies, when the proposer can reuse a buffer

	lower [maxCommandName]byte // scratch for the lowercase command name

	// The last command looked up, by the name as the client spelled it:
	// a pipeline usually repeats one command.
	lastName    [maxCommandName]byte
	lastNameLen int
	lastLookup  *command
	lastID      int // lastLookup's index in the command statistics

	// now is the clock reading, in Unix ms, that reads in the current
	// pipeline use: read once per pipeline and after each proposal, as
	// Redis reads its clock once per event-loop iteration.
	now int64

	// Keyspace hits and misses not yet added to the server's stats; they
	// are added once per pipeline and before any command that reports them.
	hits, misses int64

	// Command statistics (metrics.go): when the pipeline was read, how far
	// into it the last timed replies were queued, and the run of commands
	// answered at once since then, all of one name.
	pipeStart time.Time
	mark      time.Duration
	run       cmdRun
	runFirst  int // the pipeline index of the run's first command, for SLOWLOG

	// script is set on the scratch client that parses a script's
	// commands: the script's clock and random source (cmd_script.go).
	script *fsm.ParseContext
	// The open transaction (MULTI; nil outside one) and the keys WATCH
	// recorded (multi.go); capturing: EXEC runs a command for its reply
	// (runCaptured).
	multi   *multiState
	watched []watchedKey
	// grp is the group the command being executed runs on: the home
	// group, unless the node is sharded (slots.go); slotKeys is where
	// routing finds a command's keys, reused.
	grp       *groupRef
	slotKeys  []cmdspec.Key
	capturing bool
	// Memory transactions reuse (multi.go): tx is what multi points to;
	// execs builds the batch's OpExecs and execSlots holds their EXECs'
	// reply slots, both until the batch is answered (execDone);
	// execSubs, watchKeys and watchSeen are EXEC's scratch.
	tx        multiState
	execs     fsm.ExecBuilder
	execSlots []execSlot
	execSubs  []fsm.Command
	watchKeys [][]byte
	watchSeen []fsm.KeyVersion

	// errIfFound, set by a parser that returns a read, replaces the read's
	// reply when the key was found (GETEX with a bad time on a string).
	errIfFound string
	// sortAccess caches, for the SORT being parsed, whether its user may
	// use BY and GET patterns: 0 not yet asked, 1 no, 2 yes.
	sortAccess uint8

	lastActive atomic.Int64           // Unix ns of the last request, for CLIENT LIST idle=
	lastCmd    atomic.Pointer[string] // name of the last command, for CLIENT LIST cmd=
	protoSeen  atomic.Int32           // proto, for CLIENT LIST
	// For CLIENT LIST and CLIENT KILL TYPE: the subscriptions by kind
	// (channels, patterns, shard channels), kept by the pub/sub registry
	// under its lock; CLIENT NO-EVICT's flag.
	subCounts [3]atomic.Int32
	noEvict   atomic.Bool
	isMonitor atomic.Bool // sent MONITOR (monitor.go)
	// multiCount is the commands queued in the open transaction, -1
	// outside one (CLIENT LIST's multi=).
	multiCount atomic.Int32
	sockFD     atomic.Int32 // the socket's descriptor, -1 if it has none
	// CLIENT KILL of a loop client (cmd_client.go's kill): its loop, and
	// the request.
	loopRef atomic.Pointer[loop]
	killReq atomic.Bool

	// replyMode is CLIENT REPLY's state (cmd_client.go), 0 for ON; held
	// says a loop client waits for a client pause to end.
	replyMode uint8
	held      bool
	// pushedEnd, set while replyMode is not zero, ends the pub/sub frames
	// the current command queued in out (suppressReply keeps them).
	pushedEnd int
	// Arrival order (order.go): readAt is when the pipeline was read
	// (monoNow's clock), arrivedAt when it arrived (the kernel's receive
	// time where it gives one, else readAt); orderedAt the readAt an ordered command last
	// waited for; orderWait the wait of a loop client, which ordering
	// says it is suspended in.
	readAt    int64
	arrivedAt int64
	entering  bool // counted in orderBarrier.entering
	// serveHeld: a loop client held until no key is being served
	// (blockRegistry.holdUntilServed).
	serveHeld bool

	orderedAt int64
	orderWait *orderWaiter
	ordering  bool
	// paused: a client pause holds c, loop client or not (INFO's
	// blocked_clients, CLIENT LIST's flag b; setPaused).
	paused atomic.Bool

	// The buffers' figures for CLIENT LIST, and what resizing them needs
	// (querybuf.go): the reply buffer's peak since outPeakAt, the last
	// resize.
	bufs       bufFigures
	outPeak    int
	outPeakAt  time.Time
	lastResize time.Time

	// The pipeline being executed, and the index of the next command;
	// monitored: MONITOR has shown that command, which executeOne may
	// run again (after a batch's round, a client pause, a blocking wait)
	// but the monitors see once.
	pipe      [][][]byte
	pipeAt    int
	monitored bool

	// Event loop (loop_linux.go): the socket, or -1 for a connection
	// served by a goroutine of its own; the loop's state of it.
	fd   int
	lp   *loop
	fdr  *fdReader // the socket's reader
	more bool      // the socket may hold requests not yet read
	dead bool      // closed

	// busyServe answers the loop's other clients while a script this
	// connection runs is busy (loop_linux.go's serveBusy); nil for a
	// connection with a goroutine of its own, which serves no other.
	busyServe func()

	// Durable mode on a loop: the proposer that takes batches without
	// waiting, the callback it answers through (built once), the answer
	// (for finishAsync), and whether the pipeline waits for it.
	rounds       roundProposer
	asyncDone    func([]fsm.Reply, error)
	asyncReplies []fsm.Reply
	asyncErr     error
	suspended    bool
	// Cluster mode on a loop (loop.offLoop): offRunning, a step of c's
	// runs off the loop; offResume, its outcome is in c, not a batch's
	// answer for finishAsync. offRan says the current command's step ran
	// and answered from offAt in out; offCheck that the current read's
	// check ran, offCheckErr its outcome.
	offRunning  bool
	offStep     bool // counted in loop.offSteps
	offWaits    bool // the next offLoop step is a WAIT's (loop.offSteps)
	offResume   bool
	offRan      bool
	offAt       int
	offCheck    bool
	offCheckErr string
	// wrote is the group of the connection's last write, WAIT's and
	// WAITAOF's to count replicas of; nil until it writes (wait.go).
	// waitGone, while WAIT or WAITAOF waits off the loop, is closed by
	// the loop when the client hangs up or is closed (endWait).
	wrote     *groupRef
	waitGone  chan struct{}
	waitEnded bool
	// blk is the blocking command being executed (blocking.go); hup says
	// the loop saw the peer hang up.
	blk     *blockState
	hup     bool
	wantOut bool // out[outPos:] waits for the socket to take it
	outPos  int
	// ob is the output set aside and the output limit's state (outbuf.go).
	ob outBuf

	// auth is the connection's user (acl_users.go); userName is its
	// name, for CLIENT LIST from other connections.
	auth     clientAuth
	userName atomic.Pointer[string]

	info struct {
		sync.Mutex // guards the fields below
		name       string
		libName    string
		libVer     string
	}
}

type pendingReply struct {
	err string // "" takes the next batch reply
	// raw, when not "", is a reply decided before proposing, in RESP
	// (MULTI's +OK, +QUEUED).
	raw string
	// exec, an EXEC: the next batch reply is its OpExec's, and slots
	// say how to make EXEC's reply of it (multi.go).
	exec  bool
	slots []execSlot
	// dbBefore is, plus one, the connection's database before an EXEC
	// whose queued SELECT changed it: a watched key that changed runs
	// nothing, SELECT included, so the connection goes back to it (0:
	// no SELECT changed it).
	dbBefore int
	// monitor are the MONITOR lines of an EXEC (its commands', then its
	// own), shown once its outcome is known: only the last if a watched
	// key changed and nothing ran.
	monitor [][]byte
	// The command's index in the command statistics, and whether err
	// rejected it before execution (unknown name, arity).
	cmd      int
	rejected bool
	at       int // the command's index in the pipeline, for SLOWLOG
	// A forwarded read: its op (for the hit counters) and the parser's
	// errIfFound.
	read    bool
	op      fsm.Op
	ifFound string
}

func (s *Server) newClient(nc net.Conn) *client {
	c := &client{
		s:       s,
		nc:      nc,
		id:      s.nextClientID.Add(1),
		addr:    nc.RemoteAddr().String(),
		laddr:   nc.LocalAddr().String(),
		created: time.Now(),
		proto:   2,
		fd:      -1,
		grp:     &s.router.home,
	}
	c.protoSeen.Store(2)
	c.sockFD.Store(int32(connFD(nc)))
	c.multiCount.Store(-1)
	c.lastActive.Store(c.created.UnixNano())
	c.auth = s.newClientAuth()
	c.setUserName(c.auth.name)
	c.rd = c.newReader(nc)
	s.commandStats() // built on first use; lookup reads it
	return c
}

// serve is the connection's goroutine: read every request that has arrived
// (one pipeline), execute it, write all replies with one write, repeat.
func (c *client) serve() {
	defer c.s.unregister(c)
	defer c.leaveBlocked()
	defer c.nc.Close()
	defer c.leavePubsub()
	defer func() {
		if r := recover(); r != nil {
			c.panicked(r)
		}
	}()
	for {
		if now := time.Now(); now.Sub(c.lastResize) >= cronInterval {
			c.resizeBuffers(now)
		}
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.runPipeline(cmds)
		c.noteBuffers()
		if err := c.flush(); err != nil {
			return
		}
		if c.quit || c.s.shutdown.Load() {
			return
		}
	}
}

// runPipeline executes one pipeline, leaving the replies in c.out. It
// reports false when the pipeline waits for a roundProposer (see execute).
func (c *client) runPipeline(cmds [][][]byte) bool {
	start := time.Now()
	now := start.UnixNano()
	c.now = now / 1e6
	c.readAt = monoAt(start)
	c.arrivedAt = c.readAt
	if t := c.kernelArrival(); t != 0 && t < c.readAt {
		c.arrivedAt = t
	}
	c.lastActive.Store(now)
	c.beginTiming(start)
	c.s.stats.commands.Add(int64(len(cmds)))
	if c.ps != nil {
		c.mergeOutput() // messages delivered before this pipeline go first
	}
	return c.execute(cmds)
}

// panicked logs a panic while serving c: a bug, not bad input (bad input
// is rejected by parsing). The process and the other clients live on; c
// is closed.
func (c *client) panicked(r any) {
	c.s.cfg.Logger.Error("server: panic serving client; connection closed",
		"client", c.addr, "panic", r, "stack", string(debug.Stack()))
}

// readFailed answers a framing error before the connection is closed. I/O
// errors (the peer left, Shutdown's read deadline) close it silently.
func (c *client) readFailed(err error) {
	var pe *resp.ProtocolError
	if errors.As(err, &pe) {
		c.out = appendError(c.out, pe.Text)
		c.flush()
	}
	c.queryLimitHit(err)
}

func (c *client) flush() error {
	if c.ps != nil {
		return c.flushPush()
	}
	if len(c.out) == 0 {
		return nil
	}
	if !c.outputGuard() {
		return errOutputLimit
	}
	_, err := c.nc.Write(c.out)
	if ne, ok := err.(net.Error); ok && ne.Timeout() && c.ob.deadline {
		c.dropOutput() // over the soft limit for its seconds
		return err
	}
	if cap(c.out) > 1<<20 {
		c.out = nil // do not keep a huge buffer for an idle connection
	} else {
		c.out = c.out[:0]
	}
	return err
}

// execute runs one pipeline. Consecutive writes are collected and proposed
// as one batch; anything else first proposes the writes before it, so the
// replies and the effects keep the pipeline's order. It reports false when
// it handed a batch to a roundProposer (durable mode on an event loop):
// once the loop's round has flushed the proposer, the loop calls
// finishAsync and resume, and the pipeline goes on from there.
func (c *client) execute(cmds [][][]byte) bool {
	c.readChecked = nil
	c.pipe, c.pipeAt = cmds, 0
	return c.resume()
}

// resume executes the pipeline from pipeAt; see execute.
func (c *client) resume() bool {
	for c.pipeAt < len(c.pipe) {
		if !c.executeOne(c.pipe[c.pipeAt]) {
			return false // executed again once the batch is answered
		}
		if c.trk.caching {
			c.endCaching()
		}
		c.pipeAt++
		c.monitored = false
		if c.quit {
			c.pipeAt = len(c.pipe)
			break
		}
		if len(c.out) >= outFlushSize && len(c.pending) == 0 && c.fd >= 0 {
			if c.lp.endSlice(c) {
				return false // paused, or closed for its output (outbuf.go)
			}
		} else if len(c.out) >= outFlushSize && len(c.pending) == 0 {
			c.endRun()
			if c.flush() != nil {
				c.quit = true
				c.pipeAt = len(c.pipe)
				break
			}
			c.restartTiming()
		}
	}
	if c.proposeBatch() {
		return false
	}
	c.flushHits()
	c.endRun()
	c.pipe = nil
	return true
}

// flushHits adds the hits and misses counted so far to the server's stats.
func (c *client) flushHits() {
	if c.hits != 0 {
		c.s.stats.hits.Add(c.hits)
		c.hits = 0
	}
	if c.misses != 0 {
		c.s.stats.misses.Add(c.misses)
		c.misses = 0
	}
}

// executeOne executes one command, or queues it in the batch. It reports
// false, having done nothing, when it first had to propose the batch and
// that was handed to a roundProposer (see execute).
func (c *client) executeOne(args [][]byte) bool {
	cmd, id := c.lookup(args[0])
	spec := cmd
	if cmd != nil && cmd.subcommands != nil && len(args) > 1 {
		spec, id = c.subcommand(cmd, args[1])
	}
	if spec != nil && c.lastCmd.Load() != &spec.name {
		c.lastCmd.Store(&spec.name)
	}
	if c.offRan {
		// Its step ran off the loop (runOff) and wrote its reply.
		c.offRan = false
		c.answered(id, false, c.offAt)
		return true
	}
	switch c.admit(cmd, spec, id, args) {
	case refused:
		// A read checked off the loop, then refused (an ACL changed
		// meanwhile): the check is not the next read's.
		c.offCheck, c.offCheckErr = false, ""
		return true
	case held:
		return false // run again when the client pause ends
	}
	if c.multi != nil && queuesInMulti(cmd) {
		c.queueInMulti(cmd, spec, id, args)
		return true
	}
	if c.s.monitoring.Load() != 0 && !c.peer && !c.monitored && cmd.name != "exec" {
		// EXEC shows its transaction's commands, then itself, once they
		// have run (execMonitorLines).
		c.s.feedMonitors(c.addr, c.db, spec, args)
		c.monitored = true
	}
	if cmd.block != nil {
		return c.executeBlocking(cmd, id, args)
	}
	if cmd.flags&flagBlocking != 0 && cmd.parse != nil && xreadBlocks(args) && c.script == nil {
		// XREAD and XREADGROUP block only with BLOCK (cmd_stream.go).
		bc := *cmd
		bc.block = blockXRead
		return c.executeBlocking(&bc, id, args)
	}
	if cmd.tx != nil {
		return cmd.tx(c, id, args)
	}
	run := cmd.run
	if run == nil && cmd.runs != nil {
		run = cmd.runs(c, args)
	}
	if run != nil {
		if c.proposeBatch() {
			return false
		}
		if cmd.ordered && !c.inOrder() {
			return false // waits for the other loops (order.go)
		}
		c.flushHits()
		if (cmd.waits || spec.waits) && c.lp != nil && (c.s.router.clustered() || cmd.blocks) {
			if cmd.blocks {
				c.beginWait()
				c.offWaits = true
			}
			c.runOff(func() { run(c, args) })
			return false
		}
		at := len(c.out)
		run(c, args)
		c.answered(id, false, at)
		return true
	}
	fc, e := cmd.parse(c, args)
	if e != "" {
		c.replyError(id, false, e)
		return true
	}
	fc.DB = c.db
	if len(c.batch) > 0 && c.batchGrp != c.grp {
		// A batch goes to one group: the one before goes first.
		if c.proposeBatch() {
			c.errIfFound = ""
			return false
		}
	}
	if c.s.router.sharded() && (fc.Op == fsm.OpFlushAll || everyGroup(fc.Op)) {
		if c.proposeBatch() {
			return false
		}
		write := func() {
			if fc.Op == fsm.OpFlushAll {
				c.flushAcross(fc)
			} else {
				c.writeEveryGroup(fc)
			}
		}
		if c.lp != nil {
			c.runOff(write)
			return false
		}
		at := len(c.out)
		write()
		c.answered(id, false, at)
		return true
	}
	if fc.Op.IsWrite() {
		if c.s.blocked.keyed.Load() > 0 && c.s.blocked.waitedOn(spec.keys, args, c.db) {
			// A write that may serve blocked clients first waits for what
			// arrived before it on other loops (order.go), as a
			// transaction that watches the key a BLMOVE pushes to: in
			// Redis the write serves them before any later command
			// runs, and after every earlier one.
			if c.proposeBatch() {
				return false
			}
			if !c.inOrder() {
				return false
			}
		}
		if c.trk.on {
			if isScriptCall(spec) {
				c.trackSequence([]trackOp{{spec: spec, args: args, write: true, read: true}})
			} else {
				c.trackWrite(spec, args)
			}
		}
		c.batch, c.batchGrp = append(c.batch, fc), c.grp
		c.queue(pendingReply{cmd: id})
		return true
	}
	if fc.Op != fsm.OpInvalid && c.forwardsReads() && !c.readsAcross(fc.Op) {
		if c.trk.on {
			if c.grp.remote() {
				c.trackRemoteRead(spec, args)
			} else {
				c.trackRead(spec, args)
			}
		}
		c.batch, c.batchGrp = append(c.batch, fc), c.grp
		c.queue(pendingReply{cmd: id, read: true, op: fc.Op, ifFound: c.errIfFound})
		c.errIfFound = ""
		return true
	}
	if c.proposeBatch() {
		c.errIfFound = "" // parsed again when the command is executed
		return false
	}
	if c.lp != nil && fc.Op != fsm.OpInvalid && !c.offCheck && c.checkWaits(fc.Op) {
		c.checkOff(fc.Op)
		c.errIfFound = ""
		return false
	}
	if c.trk.on {
		c.trackRead(spec, args)
	}
	at := len(c.out)
	c.readLocal(fc)
	c.answered(id, false, at)
	return true
}

// readLocal answers a read from the node's store.
func (c *client) readLocal(fc fsm.Command) {
	if fc.Op == fsm.OpInvalid {
		// Only SCAN with a cursor past any the store hands out parses to
		// no command: the scan is over.
		c.out = append(c.out, "*2\r\n$1\r\n0\r\n*0\r\n"...)
		return
	}
	var led []*groupRef // the groups a read across groups answers for
	var e string
	switch {
	case c.offCheck:
		// Checked off the loop (checkOff).
		e = c.offCheckErr
		c.offCheck, c.offCheckErr = false, ""
		if c.readsAcross(fc.Op) {
			led = c.s.router.ledGroups()
		}
	case c.readsAcross(fc.Op):
		led = c.s.router.ledGroups()
		e = c.checkReadAcross(led)
	default:
		e = c.checkRead()
	}
	if e != "" {
		c.errIfFound = ""
		c.out = appendError(c.out, e)
		return
	}
	g := c.grp
	if !g.caughtUp() {
		c.errIfFound = ""
		c.out = appendError(c.out, errLoading)
		return
	}
	var r fsm.Reply
	var ok bool
	if c.readsAcross(fc.Op) {
		r, ok = c.readAcross(led, fc)
	} else {
		// Through a field, not &fc: the pointer escapes, and the field
		// lives with the connection, so the read allocates no copy.
		c.readCmd = fc
		r, ok = g.store.ReadServing(c.now, &c.readCmd, c.busyServe)
		c.readCmd = fsm.Command{}
		if ok && fc.Op == fsm.OpScriptExists && c.s.router.sharded() {
			c.s.scriptsElsewhere(fc.Args, &r)
		}
	}
	if !ok {
		// A script turned busy while the read waited for the store.
		c.errIfFound = ""
		if fc.Op == fsm.OpFunctionStats {
			runFunctionStatsBusy(c, nil)
			return
		}
		c.out = appendError(c.out, errBusy(c.s.scriptBusy()))
		return
	}
	if r.Kind == fsm.ReplyError && c.s.router.sharded() {
		c.readRefused(fc.Op, &r)
	}
	if c.errIfFound != "" {
		if r.Kind == fsm.ReplyBulk {
			r = fsm.Reply{Kind: fsm.ReplyError, Str: c.errIfFound}
		}
		c.errIfFound = ""
	} else {
		c.countHits(fc.Op, &r)
	}
	c.out = appendReply(c.out, &r, c.proto)
}

// forwardsReads reports whether reads go to the leader: those of a group
// this node holds no replica of, and linearizable reads on a follower.
func (c *client) forwardsReads() bool {
	g := c.grp
	return g.remote() || g.replicated() && c.s.cfg.LinearizableReads && !g.leads()
}

// readsAcross reports whether op, on this node, reads every group it leads
// (keyless.go). Such a read is never forwarded: the node answers for its
// own groups, as a Redis Cluster master answers for its slots, and the
// leader of the home group would answer for its own instead.
func (c *client) readsAcross(op fsm.Op) bool {
	return c.s.router.sharded() && acrossGroups(op)
}

// checkReadAcross is checkRead for a read of the groups led: with
// linearizable reads, each passes its read barrier.
func (c *client) checkReadAcross(led []*groupRef) string {
	if !c.s.cfg.LinearizableReads {
		return ""
	}
	for _, g := range led {
		if err := c.s.readBarrier(g); err != nil {
			return errProposal(err, false)
		}
	}
	c.now = time.Now().UnixMilli()
	return ""
}

// checkRead returns the error to answer a local read with, if any, once
// per run of reads in a pipeline (a proposal in between starts a new run):
// with linearizable reads, the leader passes a read barrier; a follower's
// READONLY connection first catches up with the leader's applied index
// (replicasync.go).
func (c *client) checkRead() string {
	g := c.grp
	if !g.replicated() || c.readChecked == g {
		return ""
	}
	switch {
	case c.s.cfg.LinearizableReads:
		if err := c.s.readBarrier(g); err != nil {
			return errProposal(err, false)
		}
	case c.readonly && !c.peer && !g.leads():
		c.s.syncReplica(g)
	default:
		return ""
	}
	c.readChecked = g
	c.now = time.Now().UnixMilli()
	return ""
}

// checkWaits reports whether the check before a read of op may wait: a
// read barrier (linearizable reads), or a READONLY connection's replica
// catching up with its leader (checkRead).
func (c *client) checkWaits(op fsm.Op) bool {
	if c.readsAcross(op) {
		return c.s.cfg.LinearizableReads
	}
	g := c.grp
	return g.replicated() && c.readChecked != g &&
		(c.s.cfg.LinearizableReads || c.readonly && !c.peer && !g.leads())
}

// checkOff runs the check before a read of op off the loop (loop.offLoop);
// the loop then runs the read again, which takes the check's outcome
// (readLocal).
func (c *client) checkOff(op fsm.Op) {
	c.offResume = true
	c.lp.offLoop(c, func() {
		if c.readsAcross(op) {
			c.offCheckErr = c.checkReadAcross(c.s.router.ledGroups())
		} else {
			c.offCheckErr = c.checkRead()
		}
		c.offCheck = true
	})
}

// runOff runs step, the part of the current command that may wait (a
// membership change, a forwarded batch, a write to every group), off the
// loop (loop.offLoop). step writes the command's reply; the loop then
// runs the command again, which finds it answered (offRan, in
// executeOne).
func (c *client) runOff(step func()) {
	c.offAt = len(c.out)
	c.offResume = true
	c.lp.offLoop(c, func() {
		step()
		c.offRan = true
	})
}

// replyError answers command id with an error decided by the server
// (rejected: before execution); it is queued behind pending writes so it
// keeps its place in the pipeline.
func (c *client) replyError(id int, rejected bool, text string) {
	if len(c.pending) > 0 {
		c.pending = append(c.pending, pendingReply{err: text, cmd: id, rejected: rejected, at: c.pipeAt})
		return
	}
	at := len(c.out)
	c.out = appendError(c.out, text)
	c.answered(id, rejected, at)
}

// queue adds a reply owed after the batch is proposed. The first one ends
// the run of commands answered at once: the batch is timed from here.
func (c *client) queue(p pendingReply) {
	if len(c.pending) == 0 {
		c.endRun()
	}
	p.at = c.pipeAt
	c.pending = append(c.pending, p)
}

// proposeBatch proposes the pending writes as one batch and writes the
// replies owed so far. It reports true when the batch went to a
// roundProposer instead: the replies are written by finishAsync.
func (c *client) proposeBatch() bool {
	if len(c.pending) == 0 {
		return false
	}
	var replies []fsm.Reply
	var err error
	if len(c.batch) > 0 {
		c.wrote = c.batchGrp
		if c.rounds != nil {
			c.rounds.Enqueue(c.batch, c.asyncDone)
			c.lp.enqueued++
			c.lp.outstanding++
			return true
		}
		if c.batchGrp.replicated() {
			if c.lp != nil {
				// A Raft round, or a forward to the leader: off the loop.
				// A round this node leads is queued here, so that batches
				// are proposed in the order they arrived (a push after the
				// pops blocked before it).
				if wait := queueLocal(c.batchGrp, c.batch); wait != nil {
					c.lp.offLoop(c, func() {
						replies, err := wait()
						if err == nil && len(replies) != len(c.batch) {
							err = errReplyCount(len(replies), len(c.batch))
						}
						if err == nil && c.s.router.sharded() {
							replies = c.rerouteRefused(replies)
						}
						c.asyncReplies, c.asyncErr = replies, err
					})
					return true
				}
				c.lp.offLoop(c, func() { c.asyncReplies, c.asyncErr = c.routeBatch() })
				return true
			}
			replies, err = c.routeBatch()
		} else {
			replies, err = c.proposeServing(c.replies[:0], c.batch)
		}
		if _, ok := c.batchGrp.proposer.(appendProposer); ok {
			// Built on c.replies (or forwarded, then ours too): reuse it.
			// Another proposer's slice is not ours to reuse.
			c.replies = replies
		}
	}
	c.answerBatch(replies, err)
	return false
}

// finishAsync writes the replies of the batch a roundProposer answered.
func (c *client) finishAsync() {
	replies, err := c.asyncReplies, c.asyncErr
	c.asyncReplies, c.asyncErr = nil, nil
	if c.blockAnswered(replies, err) {
		return // a blocking command's pop: executeBlocking takes it
	}
	c.answerBatch(replies, err)
}

// answerBatch writes the replies owed since the batch began, given the
// batch's replies (or the error that stands for them).
func (c *client) answerBatch(replies []fsm.Reply, err error) {
	if len(c.batch) > 0 {
		if err == nil && len(replies) != len(c.batch) {
			err = errReplyCount(len(replies), len(c.batch))
			c.s.cfg.Logger.Error("server: " + err.Error())
		}
		c.readChecked = nil
	}
	end := time.Now()
	c.now = end.UnixMilli()
	d := c.lapBatch(end)
	st := &c.s.stats.cmds
	var run cmdRun
	j := 0
	for _, p := range c.pending {
		at := len(c.out)
		switch {
		case p.err != "":
			c.out = appendError(c.out, p.err)
		case p.raw != "":
			c.out = append(c.out, p.raw...)
		case err != nil:
			c.out = appendError(c.out, errProposal(err, !p.read))
		default:
			r := &replies[j]
			j++
			switch {
			case p.exec:
				if r.Kind != fsm.ReplyArray && len(p.monitor) > 0 {
					p.monitor = p.monitor[len(p.monitor)-1:]
				}
				if r.Kind != fsm.ReplyArray && p.dbBefore > 0 {
					c.selectDB(uint16(p.dbBefore - 1))
				}
				c.s.showMonitorLines(p.monitor)
				c.out = c.appendExec(c.out, p.slots, r)
			case p.read:
				c.finishRead(p, r)
				c.out = appendReply(c.out, r, c.proto)
			default:
				c.out = appendReply(c.out, r, c.proto)
			}
		}
		if run.n > 0 && run.id != p.cmd {
			st.record(&run, d, true)
		}
		run.id = p.cmd
		run.add(p.rejected, c.replyFailed(at))
		if c.replyMode != 0 {
			c.suppressReply(at)
		}
	}
	st.record(&run, d, true)
	c.logSlowBatch(d)
	// Drop references to the requests' and the store's memory before
	// reusing the slices.
	clear(c.batch)
	clear(c.replies)
	if cap(c.replies) > 1024 {
		c.replies = nil // do not keep a huge buffer for an idle connection
	}
	c.batch = c.batch[:0]
	c.pending = c.pending[:0]
	c.execDone()
	if c.trk.writing {
		c.finishWrites()
	}
}

// finishRead does for a forwarded read's reply what executeOne does for a
// local one.
func (c *client) finishRead(p pendingReply, r *fsm.Reply) {
	if p.ifFound != "" {
		if r.Kind == fsm.ReplyBulk {
			*r = fsm.Reply{Kind: fsm.ReplyError, Str: p.ifFound}
		}
		return
	}
	c.countHits(p.op, r)
}

// lookup finds the command named name, case-insensitively, without
// allocating: the name is lowercased into scratch space and the map index
// with a string conversion does not copy. It returns the command (nil when
// there is none) and its index in the command statistics.
func (c *client) lookup(name []byte) (*command, int) {
	if len(name) == c.lastNameLen && string(name) == string(c.lastName[:c.lastNameLen]) {
		return c.lastLookup, c.lastID
	}
	st := &c.s.stats.cmds
	if len(name) > len(c.lower) {
		return nil, st.unknown
	}
	for i, ch := range name {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		c.lower[i] = ch
	}
	ref, ok := st.byName[string(c.lower[:len(name)])]
	if !ok {
		ref.id = st.unknown
	}
	c.lastNameLen = copy(c.lastName[:], name)
	c.lastLookup, c.lastID = ref.cmd, ref.id
	return ref.cmd, ref.id
}

func (c *client) countHits(op fsm.Op, r *fsm.Reply) {
	switch op {
	case fsm.OpGet:
		if r.Kind == fsm.ReplyNil {
			c.misses++
		} else if r.Kind == fsm.ReplyBulk {
			c.hits++
		}
	case fsm.OpMGet:
		var hits, misses int64
		for i := range r.Array {
			if r.Array[i].Kind == fsm.ReplyBulk {
				hits++
			} else {
				misses++
			}
		}
		c.hits += hits
		c.misses += misses
	}
}

// subcommand returns cmd's subcommand named sub (nil when kvs does not
// serve one of that name) and its index in the command statistics.
// Redis's subcommands count apart from their container; a subcommand kvs
// does not serve counts as an unknown command, as Redis counts an unknown
// subcommand (its error is in errorstats only).
func (c *client) subcommand(cmd *command, sub []byte) (*command, int) {
	st := &c.s.stats.cmds
	if len(cmd.name)+1+len(sub) > len(c.lower) {
		return nil, st.unknown
	}
	b := append(c.lower[:0], cmd.name...)
	b = append(b, '|')
	for _, ch := range sub {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		b = append(b, ch)
	}
	for _, spec := range cmd.subcommands {
		if spec.name == string(b) {
			if i, ok := st.subs[spec.name]; ok {
				return spec, i
			}
			return spec, st.unknown
		}
	}
	return nil, st.unknown
}
