package server

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kvs/cmdspec"
	"kvs/fsm"
)

// Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, and the
// sorted sets' BZPOPMIN, BZPOPMAX, BZMPOP).
//
// # Adding one
//
// A blocking command's row has block instead of parse:
//
//	{name: "bzpopmin", arity: -3, flags: wd | flagNoScript, ..., block: blockBZPop}
//
// block parses the arguments in Redis's order into a blockReq: cmd, the
// command's non-blocking form over all its keys (a write op whose reply is
// nil or a null array when there is nothing to pop); keys, the keys to
// wait on; the timeout (parseTimeout gives Redis's errors; 0 waits
// forever); and retry, which builds the form to run when one key became
// ready: cmd with that key as its only argument for ops whose arguments
// are just their keys (retryListKey, retryZSetKey), or cmd itself, and in
// either case with the op's ready flag (fsm.FlagListReady...), under which
// a key that holds another type by then is passed over as missing, as
// Redis serves a blocked client only from a key of the type it waits for;
// and tokenized, when
// the op takes a result token in Int2 and reports its reply with it
// (register its apply as withResultToken(apply) in fsm, as LMPOP does), so
// that a pop whose outcome a lost leader left unknown is resolved rather
// than answered UNCERTAIN. The op's apply must call
// s.signalReadyLocked(key) for every key a write may make poppable (ZADD,
// ZINCRBY, ZUNIONSTORE... into a sorted set).
//
// # How a blocking command runs
//
//  1. The writes queued before it in the pipeline are proposed first, so
//     its effects keep the pipeline's order.
//  2. The client is queued as a waiter on each of its keys, then cmd goes
//     through the normal write path (the Proposer, or forwarded to the
//     leader from a follower). A reply that is not empty (an element, or
//     an error such as WRONGTYPE) answers the client at once.
//  3. Otherwise the client blocks: it reads none of its further
//     pipelined requests until it is answered, as in Redis. When the
//     store applies a write that signals one of its keys (every replica
//     applies every write, so a follower wakes its own clients), the
//     signal goes to the first waiter in that key's queue, which runs
//     retry(key) through the write path again. It is served if the pop
//     found something (and then passes the signal on to the next waiter,
//     since the key may hold more), or blocks again in its place.
//     Signals that arrive while a waiter's pop is on its way are kept
//     and tried next, so a push is never missed between the pop and the
//     block. One waiter per key pops at a time, so clients are served in
//     the order they blocked. A pop that fails (BLMOVE's destination
//     holds another type) answers its client with the error and passes
//     the signal on, as the key still holds what it held.
//  4. Keys are served in the order they were made ready, as Redis serves
//     its ready keys after each command: a key's service lasts until a
//     pop from it comes back empty or it has no waiter left, and a key
//     made ready later waits for the services of earlier keys that could
//     change what it holds or whom it serves (a waiter of both, a BLMOVE
//     from one into the other, or from both into one list). Services that
//     cannot interact run at once.
//  5. The timeout answers a null array (RESP3 null); a disconnect removes
//     the waiter; shutdown closes the connection.
//
// A pop that fails with an error that says it did not happen (TRYAGAIN,
// CLUSTERDOWN: no leader, the leader unreachable) answers the client with
// it, which it can retry. A pop whose outcome is unknown (the leader was
// lost after the pop was sent) is resolved by resolvePop: the client gets
// the element the pop took, or stays blocked if it took none, and gets
// UNCERTAIN only if no leader answers before its timeout. See
// docs/compatibility.md.
//
// Inside MULTI blocking commands run as their non-blocking forms, as in
// Redis: EXEC puts cmd in its entry and answers an empty result with a
// null array (multi.go).
//
// # Locks
//
// blockRegistry.mu guards every waiter's state. It may be held while a
// loop's mu is taken (to wake a client on a loop), never the other way.

// blockReq is what a blocking command's parser returns.
type blockReq struct {
	cmd  fsm.Command
	keys [][]byte
	// dst is the key the command pushes into (BLMOVE's destination), if
	// any: its service waits for this client's key's.
	dst     []byte
	timeout time.Duration // 0: forever
	retry   func(cmd fsm.Command, key []byte) fsm.Command
	// tokenized: the op takes a result token in Int2 and reports its
	// reply with it (fsm's withResultToken), so that a pop whose outcome
	// is unknown can be resolved (see resolvePop).
	tokenized bool
	// broadcast: a signal of one of its keys wakes this waiter and every
	// other broadcast waiter queued after it, not the first alone: a
	// read of a stream takes nothing from it, and a waiter that finds
	// nothing (it waits for later IDs, or for another group) must not
	// keep the others from what they wait for.
	broadcast bool
}

// retryListKey and retryZSetKey are blockReq.retry for ops whose
// arguments are their keys.
func retryListKey(cmd fsm.Command, key []byte) fsm.Command {
	cmd.Args = [][]byte{key}
	cmd.Flags |= fsm.FlagListReady
	return cmd
}

func retryZSetKey(cmd fsm.Command, key []byte) fsm.Command {
	cmd.Args = [][]byte{key}
	cmd.Flags |= fsm.FlagZReady
	return cmd
}

// parseTimeout parses a blocking command's timeout in seconds as Redis
// 7.0 does: a long double, truncated to milliseconds; a value that does
// not fit is negative there too.
func parseTimeout(arg []byte) (time.Duration, string) {
	if !fsm.ValidFloat(arg) {
		return 0, errTimeoutNotFloat
	}
	f, err := strconv.ParseFloat(string(arg), 64)
	if err != nil {
		if bf, _, perr := big.ParseFloat(string(arg), 0, 64, big.ToZero); perr == nil {
			f, _ = bf.Float64()
		} else {
			f = math.Inf(1) // out of float64's range: out of int64's too
		}
	}
	ms := f * 1000
	if !(ms < math.MaxInt64 && ms >= math.MinInt64) {
		return 0, errTimeoutNegative // (long long) of a value out of range
	}
	n := int64(ms)
	if n < 0 {
		return 0, errTimeoutNegative
	}
	if n > int64(math.MaxInt64/time.Millisecond) {
		return 0, "" // beyond any deadline: forever
	}
	return time.Duration(n) * time.Millisecond, ""
}

// waiter states
const (
	waitTrying = iota // its pop is on its way (or about to be)
	waitIdle          // blocked, waiting for a signal, its timeout or a hang-up
	waitWoken         // signalled, timed out or unblocked: its executor will look
)

// waiter is one blocked client.
type waiter struct {
	c     *client
	req   blockReq
	keys  []string
	dst   string
	state int
	// ready are keys signalled to this waiter and not yet tried, in
	// order; timedOut and unblockErr say why else it was woken.
	ready      []string
	timedOut   bool
	unblockErr bool
	timer      *time.Timer // loop clients' timeout
	deadline   time.Time   // zero: none
	// wake tells the client's executor to look at the waiter: it is
	// called with the registry's lock held and must not block.
	wake func()
	// woken is signalled by wake for a client on a goroutine of its own.
	woken chan struct{}
	// blocked: the waiter has blocked at least once (INFO's
	// blocked_clients, CLIENT LIST's flag b).
	blocked bool
}

// blockRegistry holds the blocked clients of a server, queued per key,
// and the result tokens of pops whose replies are awaited.
type blockRegistry struct {
	mu      sync.Mutex
	keys    map[string][]*waiter
	byID    map[int64]*waiter
	results map[int64]*popResult
	// serving numbers the keys whose waiters are being served in the
	// order the keys were made ready (step 4 at the top of the file);
	// deferred are the waiters signalled for a key whose service waits
	// for an earlier one, woken to look again when a service ends.
	serving    map[string]uint64
	servingSeq uint64
	deferred   map[*waiter]struct{}
	// servingN is len(serving), read without the lock; afterServe are
	// the loop clients whose next command waits until no key is being
	// served (holdUntilServed).
	servingN   atomic.Int32
	afterServe []*client
	// keyed is len(keys), read without the lock.
	keyed atomic.Int32
}

// waitedOn reports whether a client waits on one of the keys a command's
// finder finds in its arguments args.
func (br *blockRegistry) waitedOn(keys cmdspec.KeyFinder, args [][]byte, db uint16) bool {
	found := keys.Find(args, nil)
	br.mu.Lock()
	defer br.mu.Unlock()
	for _, k := range found {
		if _, ok := br.keys[fsm.DBKey(db, string(args[k.Pos]))]; ok {
			return true
		}
	}
	return false
}

// holdUntilServed holds loop client c while keys are being served: in
// Redis a write serves the clients it made ready before any other command
// runs, so a client that pushed, then reads (unit/type/list's "Linked
// LMOVEs"), sees the chain of BLMOVEs done. It reports false when c now
// waits to be woken. Clients that are being served are not held: they are
// what the wait is for.
func (br *blockRegistry) holdUntilServed(c *client) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	if len(br.serving) == 0 {
		return true
	}
	c.serveHeld = true
	br.afterServe = append(br.afterServe, c)
	return false
}

// servedLocked notes that a key's service ended: once none is left, the
// clients held for them go on.
func (br *blockRegistry) servedLocked() {
	br.servingN.Store(int32(len(br.serving)))
	if len(br.serving) > 0 {
		return
	}
	for i, c := range br.afterServe {
		br.afterServe[i] = nil
		c.lp.wakeHeld(c)
	}
	br.afterServe = br.afterServe[:0]
}

// popResult is the reply a replica's apply reported for a pop's token.
type popResult struct {
	done  chan struct{} // closed once r is set
	r     fsm.Reply
	found bool
}

// watch starts collecting the reply of the pop with token.
func (br *blockRegistry) watch(token int64) *popResult {
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.results == nil {
		br.results = make(map[int64]*popResult)
	}
	pr := &popResult{done: make(chan struct{})}
	br.results[token] = pr
	return pr
}

func (br *blockRegistry) unwatch(token int64) {
	br.mu.Lock()
	defer br.mu.Unlock()
	delete(br.results, token)
}

// result returns the reply reported for pr, if any.
func (br *blockRegistry) result(pr *popResult) (fsm.Reply, bool) {
	br.mu.Lock()
	defer br.mu.Unlock()
	return pr.r, pr.found
}

// add queues w on its keys. It reports whether one of them is being
// served: w then waits its turn without a first try, as in Redis a push
// serves the clients already blocked before any other command runs, and
// one that arrives meanwhile must not take what they are owed.
func (br *blockRegistry) add(w *waiter) (behind bool) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.keys == nil {
		br.keys, br.byID = make(map[string][]*waiter), make(map[int64]*waiter)
	}
	for _, k := range w.keys {
		q := br.keys[k]
		if len(q) > 0 && q[len(q)-1] == w {
			continue // a key named twice
		}
		br.keys[k] = append(q, w)
		_, serving := br.serving[k]
		behind = behind || serving
	}
	br.byID[w.c.id] = w
	br.keyed.Store(int32(len(br.keys)))
	return behind
}

// remove takes w out of every queue. served is the key it popped from
// (or failed to: "" when it tried none): that key may hold more, so its
// next waiter is signalled first, as Redis serves every client blocked on
// one key before the next ready key; then the keys w was signalled for
// and never tried.
func (br *blockRegistry) remove(w *waiter, served string) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	for _, k := range w.keys {
		q := br.keys[k]
		for i, x := range q {
			if x == w {
				q = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		if len(q) == 0 {
			delete(br.keys, k)
		} else {
			br.keys[k] = q
		}
	}
	if br.byID[w.c.id] == w {
		delete(br.byID, w.c.id)
	}
	br.keyed.Store(int32(len(br.keys)))
	delete(br.deferred, w)
	pass := w.ready
	if served != "" {
		pass = append([]string{served}, w.ready...)
	}
	w.ready = nil
	br.signalLocked(pass)
	br.wakeDeferredLocked() // w may have been what a service waited for
}

// signal is the store's ready hook: it wakes the first waiter of each key.
func (br *blockRegistry) signal(keys []string) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.signalLocked(keys)
}

func (br *blockRegistry) signalLocked(keys []string) {
	if slices.Contains(keys, fsm.FlushedKey) {
		var all []string
		for _, k := range keys {
			if k != fsm.FlushedKey {
				all = append(all, k)
			}
		}
		for k := range br.keys {
			if !slices.Contains(all, k) {
				all = append(all, k)
			}
		}
		keys = all
	}
	for _, k := range keys {
		if token, r, ok := fsm.ResultOf(k); ok {
			if pr := br.results[token]; pr != nil && !pr.found {
				pr.r, pr.found = r, true
				close(pr.done)
			}
			continue
		}
		q := br.keys[k]
		if len(q) == 0 {
			if _, ok := br.serving[k]; ok {
				delete(br.serving, k) // served every waiter it had
				br.servedLocked()
				br.wakeDeferredLocked()
			}
			continue
		}
		if br.serving[k] == 0 {
			br.startServiceLocked(k)
		}
		for i, w := range q {
			if i > 0 && !(w.req.broadcast && q[0].req.broadcast) {
				break
			}
			if !containsString(w.ready, k) {
				w.ready = append(w.ready, k)
			}
			if w.state == waitIdle {
				w.state = waitWoken
				w.wake()
			}
		}
	}
}

// signalMoved wakes the first waiter of each key whose slot moved says has
// moved to another group: its pop is tried again, and, refused by the
// group that gave the slot up, blocks on the new one (executeBlocking).
// Those behind it are woken in turn, as for any signal.
func (br *blockRegistry) signalMoved(moved func(slot int) bool) {
	br.mu.Lock()
	defer br.mu.Unlock()
	var keys []string
	for k := range br.keys {
		if moved(fsm.KeySlot(k)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	br.signalLocked(keys)
}

// startServiceLocked numbers k's service after every other.
func (br *blockRegistry) startServiceLocked(k string) {
	if br.serving == nil {
		br.serving = make(map[string]uint64)
	}
	br.servingSeq++
	br.serving[k] = br.servingSeq
	br.servingN.Store(int32(len(br.serving)))
}

// pickLocked returns the key w is to try next: of the keys it was
// signalled for, the one made ready first, once no earlier service it
// could interact with is still running.
func (br *blockRegistry) pickLocked(w *waiter) (string, bool) {
	at := -1
	for i, k := range w.ready {
		if br.serving[k] == 0 {
			br.startServiceLocked(k) // signalled before its service was numbered
		}
		if at < 0 || br.serving[k] < br.serving[w.ready[at]] {
			at = i
		}
	}
	k := w.ready[at]
	seq := br.serving[k]
	for other, s := range br.serving {
		if s < seq && br.interactLocked(other, k) {
			return "", false
		}
	}
	w.ready = append(w.ready[:at:at], w.ready[at+1:]...)
	return k, true
}

// interactLocked reports whether serving keys a and b in either order
// could end differently: a waiter of a also waits on b, one moves elements
// from one into the other, or both move elements into one list.
func (br *blockRegistry) interactLocked(a, b string) bool {
	for _, x := range br.keys[a] {
		if x.dst == b || containsString(x.keys, b) {
			return true
		}
	}
	for _, y := range br.keys[b] {
		if y.dst == "" {
			continue
		}
		if y.dst == a {
			return true
		}
		for _, x := range br.keys[a] {
			if x.dst == y.dst {
				return true
			}
		}
	}
	return false
}

// emptiedLocked ends the service of key, from which w's pop came back
// empty, unless key was made ready again meanwhile (w holds its signal).
func (br *blockRegistry) emptiedLocked(w *waiter, key string) {
	if _, ok := br.serving[key]; !ok {
		return
	}
	if containsString(w.ready, key) {
		br.startServiceLocked(key)
	} else {
		delete(br.serving, key)
		br.servedLocked()
	}
	br.wakeDeferredLocked()
}

// wakeDeferredLocked has the deferred waiters look again at their keys.
func (br *blockRegistry) wakeDeferredLocked() {
	for w := range br.deferred {
		delete(br.deferred, w)
		if w.state == waitIdle {
			w.state = waitWoken
			w.wake()
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// timeout is the timer of a waiter on a loop.
func (br *blockRegistry) timeout(w *waiter) {
	br.mu.Lock()
	defer br.mu.Unlock()
	w.timedOut = true
	if w.state == waitIdle {
		w.state = waitWoken
		w.wake()
	}
}

// unblock is CLIENT UNBLOCK: it reports whether client id was blocked.
func (br *blockRegistry) unblock(id int64, withError bool) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	w := br.byID[id]
	if w == nil || !w.blocked {
		return false
	}
	if withError {
		w.unblockErr = true
	} else {
		w.timedOut = true
	}
	if w.state == waitIdle {
		w.state = waitWoken
		w.wake()
	}
	return true
}

// next decides what a waiter whose pop came back empty does (emptied is
// the key that pop was for, "" for the first one over all its keys): the
// key to try next, or done with the reply to give (a timeout's), or
// neither: wait. It moves the waiter to the matching state.
func (br *blockRegistry) next(w *waiter, emptied string) (key string, try bool, done bool, reply fsm.Reply) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if emptied != "" {
		br.emptiedLocked(w, emptied)
	}
	if len(w.ready) > 0 {
		if key, ok := br.pickLocked(w); ok {
			delete(br.deferred, w)
			w.state = waitTrying
			return key, true, false, fsm.Reply{}
		}
	}
	switch {
	case w.unblockErr:
		return "", false, true, fsm.Reply{Kind: fsm.ReplyError, Str: errUnblocked}
	case w.timedOut || (!w.deadline.IsZero() && !time.Now().Before(w.deadline)):
		return "", false, true, fsm.Reply{Kind: fsm.ReplyNilArray}
	}
	w.state = waitIdle
	w.blocked = true
	if len(w.ready) > 0 {
		if br.deferred == nil {
			br.deferred = make(map[*waiter]struct{})
		}
		br.deferred[w] = struct{}{}
	}
	return "", false, false, fsm.Reply{}
}

// count is INFO's blocked_clients.
func (br *blockRegistry) count() int {
	br.mu.Lock()
	defer br.mu.Unlock()
	n := 0
	for _, w := range br.byID {
		if w.blocked {
			n++
		}
	}
	return n
}

// isBlocked reports whether client id is blocked.
func (br *blockRegistry) isBlocked(id int64) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	w := br.byID[id]
	return w != nil && w.blocked
}

const errUnblockReason = "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"

// runClientUnblock answers CLIENT UNBLOCK id [TIMEOUT|ERROR], checking the
// reason before the id, as Redis does.
func runClientUnblock(c *client, args [][]byte) {
	withError := false
	if len(args) == 4 {
		switch {
		case is(args[3], "error"):
			withError = true
		case !is(args[3], "timeout"):
			c.out = appendError(c.out, errUnblockReason)
			return
		}
	}
	id, ok := parseInt(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	if c.s.blocked.unblock(id, withError) {
		c.out = appendInt(c.out, 1)
	} else {
		c.out = appendInt(c.out, 0)
	}
}

const errUnblocked = "UNBLOCKED client unblocked via CLIENT UNBLOCK"

// blockState is a client's blocking command in progress. It is the
// client's own: only the client's executor (its loop or goroutine) uses it.
type blockState struct {
	w   *waiter
	grp *groupRef   // the group of the command's keys
	cmd fsm.Command // the pop to run next (or on its way)
	key string      // the key cmd was built for; "" for the first try
	// emptied is the key of the last pop, which came back empty, until
	// the registry has been told (blockRegistry.next).
	emptied string
	id      int // the command's index in the statistics
	// waiting: the last pop came back empty and the client waits for its
	// waiter to be woken. sent: cmd went to a roundProposer; answered and
	// the fields after it hold the answer once it came.
	waiting  bool
	sent     bool
	answered bool
	replies  []fsm.Reply
	err      error
}

// executeBlocking runs a blocking command (see the top of the file). It
// reports false when the client must wait (for a roundProposer's answer
// or, on an event loop, for its waiter to be woken): the loop runs the
// command again then, and it continues from where it stopped. A client
// served by a goroutine of its own waits inside.
func (c *client) executeBlocking(cmd *command, id int, args [][]byte) bool {
	if c.blk == nil {
		if c.proposeBatch() {
			return false
		}
		c.endRun() // the commands before it are timed without its wait
		req, e := cmd.block(c, args)
		if e != "" {
			c.replyError(id, false, e)
			return true
		}
		req.cmd.DB = c.db
		if !c.inOrder() {
			// Its first try waits for the commands that arrived before it
			// on other loops (order.go): Redis serves clients blocked on
			// one key in the order their pops arrived, and a pop that
			// arrived first may yet block on another loop.
			return false
		}
		w := &waiter{c: c, req: req, dst: fsm.DBKey(c.db, string(req.dst)), state: waitTrying}
		if len(req.dst) == 0 {
			w.dst = ""
		}
		for _, k := range req.keys {
			w.keys = append(w.keys, fsm.DBKey(c.db, string(k)))
		}
		if req.timeout > 0 {
			w.deadline = time.Now().Add(req.timeout)
		}
		c.blk = &blockState{w: w, grp: c.grp, cmd: req.cmd, id: id}
		c.startWaiting(w)
		if c.s.blocked.add(w) {
			c.blk.waiting = true
		}
	}
	b := c.blk
	for {
		if b.waiting {
			if !c.nextTry(b) {
				switch {
				case c.blk == nil:
					return true // answered: timed out or unblocked
				case c.fd >= 0:
					return false // on a loop: run again when woken
				case !c.waitBlocked(b.w):
					c.quit = true // hung up, or the server is stopping
					c.leaveBlocked()
					return true
				}
				continue
			}
			b.waiting = false
		}
		if c.trk.on && !c.trk.writing {
			// The pop is the client's own write: its invalidations
			// follow its reply (tracking.go).
			c.trackWrite(cmd, args)
		}
		r, err, ok := c.tryPop(b)
		if !ok {
			return false
		}
		c.now = time.Now().UnixMilli()
		switch {
		case err != nil:
			c.finishBlocking(&fsm.Reply{Kind: fsm.ReplyError, Str: errProposal(err, true)}, "")
			return true
		case r.Kind == fsm.ReplyError:
			if c.movedBlocking(b, &r) {
				continue // blocks on the slot's new group
			}
			// Nothing was taken from b.key: its next waiter may be served.
			c.finishBlocking(&r, b.key)
			return true
		case r.Kind != fsm.ReplyNil && r.Kind != fsm.ReplyNilArray:
			c.finishBlocking(&r, servedKey(b, &r))
			return true
		}
		b.waiting, b.emptied = true, b.key
		if c.trk.writing {
			c.finishWrites() // nothing popped: no write of its own
		}
	}
}

// movedBlocking handles a pop refused because its group gave the slot up
// in a move of slots: when this node holds a replica of the slot's new
// group, the client blocks on that one (it reports true, and the pop is
// tried there); otherwise *r becomes MOVED to its leader, as for any
// blocking command on a group held elsewhere, or a TRYAGAIN error while
// this node's map does not name the new group yet.
func (c *client) movedBlocking(b *blockState, r *fsm.Reply) bool {
	slot, ok := fsm.SlotNotOwned(*r)
	if !ok || !c.s.router.sharded() {
		return false
	}
	g := c.s.router.groupOf(slot)
	switch {
	case g.index == b.grp.index:
		r.Str = errSlotUnknown(slot)
	case g.remote():
		r.Str = c.s.movedTo(g, slot)
	default:
		b.grp = g
		return true
	}
	return false
}

// tryPop runs b.cmd through the write path. ok is false while the answer
// of a roundProposer is awaited.
func (c *client) tryPop(b *blockState) (r fsm.Reply, err error, ok bool) {
	switch {
	case b.sent && !b.answered:
		return fsm.Reply{}, nil, false
	case b.sent:
		b.sent, b.answered = false, false
		r, err = firstReply(b.replies, b.err)
		b.replies, b.err = nil, nil
		return r, err, true
	case c.rounds != nil:
		b.sent = true
		c.rounds.Enqueue([]fsm.Command{b.cmd}, c.asyncDone)
		c.lp.enqueued++
		c.lp.outstanding++
		return fsm.Reply{}, nil, false
	case c.lp != nil && b.grp.replicated():
		// Cluster mode on a loop: the pop's Raft round (or forward to the
		// leader, or resolvePop's wait) runs off the loop, and its answer
		// comes back as a roundProposer's would (blockAnswered).
		b.sent = true
		// Its first try is queued here when this node leads the group, so
		// that pops and pushes are proposed in the order they arrived.
		first := c.queuePop(b)
		c.lp.offLoop(c, func() {
			r, err := c.popRoutedFrom(b, first)
			c.asyncReplies, c.asyncErr = []fsm.Reply{r}, err
		})
		return fsm.Reply{}, nil, false
	}
	r, err = c.popRouted(b)
	return r, err, true
}

// popRouted runs b.cmd through the cluster's write path, waiting for its
// answer; a pop whose outcome is unknown is resolved (resolvePop).
func (c *client) popRouted(b *blockState) (r fsm.Reply, err error) {
	return c.popRoutedFrom(b, nil)
}

// queuedPop is a pop's first try, queued with its group's proposer.
type queuedPop struct {
	wait func() ([]fsm.Reply, error)
	pr   *popResult // the token's watch, for a tokenized pop
}

// queuePop queues b's first try when this node leads its group and the
// group's proposer queues (queueLocal); nil otherwise.
func (c *client) queuePop(b *blockState) *queuedPop {
	q := &queuedPop{}
	if b.w.req.tokenized {
		b.cmd.Int2 = rand.Int64() | 1
		q.pr = c.s.blocked.watch(b.cmd.Int2)
	}
	if q.wait = queueLocal(b.grp, []fsm.Command{b.cmd}); q.wait == nil {
		if q.pr != nil {
			c.s.blocked.unwatch(b.cmd.Int2)
		}
		return nil
	}
	return q
}

// popRoutedFrom is popRouted whose first try, when first is not nil, was
// queued already (queuePop).
func (c *client) popRoutedFrom(b *blockState, first *queuedPop) (r fsm.Reply, err error) {
	if !b.grp.replicated() || !b.w.req.tokenized {
		if first != nil {
			return firstReply(first.wait())
		}
		replies, perr := c.s.proposeTo(b.grp, []fsm.Command{b.cmd})
		return firstReply(replies, perr)
	}
	for {
		var (
			token   int64
			pr      *popResult
			replies []fsm.Reply
			perr    error
		)
		if first != nil {
			token, pr = b.cmd.Int2, first.pr
			replies, perr = first.wait()
			first = nil
		} else {
			token = rand.Int64() | 1
			b.cmd.Int2 = token
			pr = c.s.blocked.watch(token)
			replies, perr = c.s.proposeTo(b.grp, []fsm.Command{b.cmd})
		}
		if errors.Is(perr, ErrUnknownOutcome) {
			var applied bool
			r, applied, perr = c.resolvePop(b, pr, perr)
			if !applied && perr == nil {
				c.s.blocked.unwatch(token)
				continue // the pop never happened: run it again
			}
			replies = []fsm.Reply{r}
		}
		c.s.blocked.unwatch(token)
		return firstReply(replies, perr)
	}
}

// resolvePop finds out what became of a pop whose outcome is unknown (the
// leader was lost, or timed out, after the pop was sent), so that an
// element it took is not lost with the reply. If the pop was committed,
// this node applies it too and its token reports the reply (applied). To
// learn that it was not, the node proposes a write of no effect through
// the current leader and catches up with it: a leader that commits an
// entry of its own term has committed every earlier entry that can ever
// be committed, so a pop not applied by then never will be (not applied,
// no error). Until a leader answers, it retries every resolveRetry; at the
// client's timeout, or when the server stops, it gives up with the
// original error.
func (c *client) resolvePop(b *blockState, pr *popResult, cause error) (r fsm.Reply, applied bool, err error) {
	var deadline <-chan time.Time
	if !b.w.deadline.IsZero() {
		t := time.NewTimer(time.Until(b.w.deadline))
		defer t.Stop()
		deadline = t.C
	}
	for {
		if r, ok := c.s.blocked.result(pr); ok {
			return r, true, nil
		}
		_, berr := c.s.proposeTo(b.grp, []fsm.Command{{Op: fsm.OpDelExpired}})
		if r, ok := c.s.blocked.result(pr); ok {
			return r, true, nil
		}
		if berr == nil {
			return fsm.Reply{}, false, nil
		}
		retry := time.NewTimer(resolveRetry)
		select {
		case <-pr.done:
		case <-retry.C:
		case <-deadline:
			retry.Stop()
			return fsm.Reply{}, false, cause
		case <-c.s.cronStopChan():
			retry.Stop()
			return fsm.Reply{}, false, cause
		}
		retry.Stop()
	}
}

// resolveRetry is how often resolvePop asks again for a leader.
const resolveRetry = 100 * time.Millisecond

// servedKey is the key a pop took from: the one it was retried on, or the
// one its reply names first (BLPOP's and BZPOPMIN's shapes), or its only
// key (BLMOVE's source).
func servedKey(b *blockState, r *fsm.Reply) string {
	switch {
	case b.key != "":
		return b.key
	case r.Kind == fsm.ReplyArray && len(r.Array) > 0 && r.Array[0].Kind == fsm.ReplyBulk:
		return fsm.DBKey(b.cmd.DB, string(r.Array[0].Bulk))
	case len(b.w.keys) > 0:
		return b.w.keys[0]
	}
	return ""
}

// nextTry sets up the next pop of a waiter whose last came back empty, or
// answers it (a timeout). It reports whether there is a pop to run; when
// not and c.blk is still set, the client waits.
func (c *client) nextTry(b *blockState) bool {
	// The time blocked is not the command's duration (SLOWLOG,
	// commandstats): as in Redis, it is timed from its wake-up.
	c.mark = time.Since(c.pipeStart)
	key, try, done, reply := c.s.blocked.next(b.w, b.emptied)
	b.emptied = ""
	switch {
	case try:
		b.key = key
		b.cmd = b.w.req.retry(b.w.req.cmd, []byte(fsm.KeyOfDBKey(b.w.req.cmd.DB, key)))
		return true
	case done:
		c.finishBlocking(&reply, "")
	}
	return false
}

// finishBlocking answers the blocking command with r and forgets its
// waiter.
func (c *client) finishBlocking(r *fsm.Reply, served string) {
	b := c.blk
	c.blk = nil
	c.s.blocked.remove(b.w, served)
	at := len(c.out)
	c.out = appendReply(c.out, r, c.proto)
	c.answered(b.id, false, at)
	if c.trk.writing {
		c.finishWrites()
	}
}

func firstReply(replies []fsm.Reply, err error) (fsm.Reply, error) {
	if err == nil && len(replies) != 1 {
		err = errReplyCount(len(replies), 1)
	}
	if err != nil {
		return fsm.Reply{}, err
	}
	return replies[0], nil
}

// waitingBlocked reports whether c is blocked, waiting to be woken (not
// with a pop on its way).
func (c *client) waitingBlocked() bool { return c.blk != nil && c.blk.waiting }

// startWaiting sets how w's client is woken: on a loop, by running it
// again there (and a timer for its timeout); on a goroutine, by
// interrupting the wait in waitBlocked.
func (c *client) startWaiting(w *waiter) {
	if c.fd >= 0 {
		lp := c.lp
		w.wake = func() { lp.wakeBlocked(c) }
		if !w.deadline.IsZero() {
			br := &c.s.blocked
			w.timer = time.AfterFunc(time.Until(w.deadline), func() { br.timeout(w) })
		}
		return
	}
	w.woken = make(chan struct{}, 1)
	w.wake = func() {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		select {
		case w.woken <- struct{}{}:
		default:
		}
	}
}

// blockAnswered takes a roundProposer's answer to a blocking command's
// pop; it reports false when the answer is for the pipeline's batch.
func (c *client) blockAnswered(replies []fsm.Reply, err error) bool {
	if c.blk == nil || !c.blk.sent {
		return false
	}
	c.blk.answered, c.blk.replies, c.blk.err = true, replies, err
	return true
}

// leaveBlocked forgets the waiter of a client that is going away.
func (c *client) leaveBlocked() {
	if c.blk != nil {
		b := c.blk
		c.blk = nil
		c.s.blocked.remove(b.w, "")
	}
}

// waitBlockedPlain is waitBlocked without watching the socket, where the
// connection offers no descriptor to poll: it waits for the wake-up, the
// deadline or the server's stop, and notices a hang-up only when the
// answer is written.
func (c *client) waitBlockedPlain(w *waiter) bool {
	var deadline <-chan time.Time
	if !w.deadline.IsZero() {
		t := time.NewTimer(time.Until(w.deadline))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-w.woken:
	case <-deadline:
	case <-c.s.cronStopChan():
		return false
	}
	return true
}

// idle reports whether w still waits to be woken.
func (br *blockRegistry) idle(w *waiter) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	return w.state == waitIdle
}
