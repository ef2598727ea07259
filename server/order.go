package server

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Arrival order across event loops.
//
// redis-server reads and runs every connection's requests on one thread,
// in about the order they arrive, so a client that sends SUBSCRIBE on one
// connection and then PUBLISH on another (go-redis's Subscribe does not
// wait for the confirmation) always has its message delivered. kvs reads
// connections on several event loops (loop_linux.go), each on a thread of
// its own: the loop that reads the PUBLISH can run it before another loop
// has even read a SUBSCRIBE (or an UNSUBSCRIBE) that arrived first.
//
// A command marked ordered (PUBLISH, SPUBLISH, a blocking command's first
// try, and a write to a key a client is blocked on, which serves that
// client) therefore waits until every other loop has run what it
// received before the command arrived: a loop has, once it has finished a
// round whose epoll_wait began after that (loop.doneBefore), or when it
// sleeps with nothing ready (loop.quietNow). When the command arrived is
// the kernel's receive time of its bytes (stampArrivals), or else when it
// was read. Ordered commands held on different loops then go on in the
// order they arrived: one waits until every one that arrived before it on
// another loop has run. Two clients blocked on one list with a push after
// them (unit/type/list's "BRPOPLPUSH with multiple blocked clients") are
// served in the order they sent their pops, whichever loop reads first.
// A loop client waits suspended, as a client pause holds it, and its loop
// serves the others meanwhile; the waiting command goes on when the last
// loop it waits for reports progress. Loops never wait for each other, so
// they cannot deadlock, and a loop reports progress only while someone
// waits (one atomic load per round otherwise). What a loop holds back on
// purpose does not count: the requests of a client blocked, held by a
// pause, or waiting for its replies to be read, and what a round leaves
// unread past one read per connection (as Redis reads at most 16 KiB of a
// connection per turn of its event loop).
//
// A connection served by a goroutine of its own (cluster mode, --io
// goroutines, TLS) has its PUBLISH wait for the loops too, but nothing
// waits for its own subscription changes: see docs/compatibility.md.

// monoBase is the origin of monoNow's clock.
var monoBase = time.Now()

// monoNow is the monotonic clock in ns since monoBase: the times loops and
// requests are compared by.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// monoAt is t on monoNow's clock.
func monoAt(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// offsetRefresh is how often a loop measures the wall clock's offset from
// monoNow's: it changes only when the wall clock is set.
const offsetRefresh = 100 * time.Millisecond

// maxOffsetError bounds the error of a measurement measureWallOffset
// accepts: requests that arrived further apart than that on different
// loops are ordered right.
const maxOffsetError = 2 * time.Microsecond

// measureWallOffset returns the wall clock less monoNow's clock, ok when
// measured to within maxOffsetError. time.Now reads the two clocks one
// after the other, and a thread preempted between the two reads (a busy
// machine) gets an offset wrong by as long as it was off the CPU: the
// receive times converted with it put a request that arrived first after
// one that arrived later on another loop. So the reading taken is
// bracketed by two others, which bound when both its clocks were read,
// and the tightest of a few tries is kept.
func measureWallOffset() (int64, bool) {
	best, span := int64(0), int64(math.MaxInt64)
	for range 4 {
		a := time.Now()
		b := time.Now()
		c := time.Now()
		if d := monoAt(c) - monoAt(a); d < span {
			best, span = b.UnixNano()-monoAt(b), d
		}
	}
	return best, span <= int64(maxOffsetError)
}

// orderBarrier holds the commands waiting for other loops to catch up.
type orderBarrier struct {
	mu      sync.Mutex // guards waiters
	waiters []*orderWaiter
	// waiting is len(waiters), which loops read without the lock.
	waiting atomic.Int32
	// entering counts the connections accepted and not yet taken by
	// their loop, whose requests may have arrived before a waiter's;
	// backlog reports whether the listener holds connections not yet
	// accepted (stampArrivals sets it).
	entering atomic.Int32
	backlog  atomic.Pointer[func() bool]
}

// entered notes that c's loop took it (or that no loop will).
func (c *client) entered() {
	if c.entering {
		c.entering = false
		c.s.order.entering.Add(-1)
	}
}

// arrivalsPending reports whether connections not yet read by a loop
// exist: accepted and on their way to one, or not yet accepted.
func (o *orderBarrier) arrivalsPending() bool {
	// The backlog first: a connection gone from it was counted in
	// entering before it left (accept).
	if f := o.backlog.Load(); f != nil && (*f)() {
		return true
	}
	return o.entering.Load() > 0
}

// orderWaiter is a wait for each of loops to have run what it received
// before at: of the ordered commands a loop suspended in one round
// (clients, woken on lp), or of one command of a client with a goroutine
// of its own (ch).
type orderWaiter struct {
	// at is the latest arrival of the commands, first the earliest.
	at, first int64
	loops     []*loop
	done      atomic.Bool
	// released: done was set, and the commands have yet to run
	// (orderBarrier.finish), under the barrier's lock.
	released bool
	// lp and clients, or ch: who goes on once done.
	lp      *loop
	clients []*client
	ch      chan struct{}
}

// inOrder reports whether c may run its ordered command now: every other
// loop has run what it received before c's pipeline was read. A loop
// client is first suspended (c.ordering) until its loop has read and run
// the rest of the round's input, since epoll hands a loop its ready
// connections only about in the order they became ready; then it runs or
// waits for the other loops with the other ordered commands of its loop's
// round (holdOrdered), and inOrder reports false meanwhile. A client with
// a goroutine of its own waits here.
func (c *client) inOrder() bool {
	if c.orderedAt == c.readAt || c.peer || c.script != nil {
		return true
	}
	if w := c.orderWait; w != nil {
		if !w.done.Load() {
			c.ordering = true
			return false
		}
		c.orderWait = nil
		c.orderedAt = c.readAt
		return true
	}
	if lp := c.lp; lp != nil {
		if len(lp.orderHeld) == 0 {
			lp.orderFirst = c.arrivedAt
		}
		lp.orderHeld = append(lp.orderHeld, c)
		lp.orderAt = max(lp.orderAt, c.arrivedAt)
		lp.orderFirst = min(lp.orderFirst, c.arrivedAt)
		c.ordering = true
		return false
	}
	w := &orderWaiter{at: c.arrivedAt, first: c.arrivedAt, ch: make(chan struct{})}
	if !c.s.order.hold(c.s.loops, nil, w) {
		select {
		case <-w.ch:
		case <-c.s.cronStopChan():
		}
		// The command runs now: the ones that arrived after it may go on
		// (as they would once it ran, a moment later).
		c.s.order.finish(c.s.loops, w)
	}
	c.orderedAt = c.readAt
	return true
}

// holdOrdered is called by a loop once it has read and run a round's
// input, if it suspended ordered commands: they go on at once if the other
// loops have caught up with the latest of their read times, or else wait
// for them together.
func (lp *loop) holdOrdered() {
	clients, at, first := lp.orderHeld, lp.orderAt, lp.orderFirst
	lp.orderHeld, lp.orderAt, lp.orderFirst = nil, 0, 0
	o := &lp.s.order
	if len(lp.s.loops) > 1 {
		w := &orderWaiter{at: at, first: first, lp: lp, clients: clients}
		for _, c := range clients {
			c.orderWait = w
		}
		if !o.hold(lp.s.loops, lp, w) {
			return
		}
	}
	for i, c := range clients {
		clients[i] = nil
		if !c.dead && c.suspended && c.ordering {
			c.suspended, c.ordering, c.orderWait = false, false, nil
			c.orderedAt = c.readAt
			lp.run1(c, nil)
		}
	}
	if lp.orderHeld == nil {
		lp.orderHeld = clients[:0] // its array, for the next round
	}
}

// behind returns the loops other than self that may not yet have run
// everything they received before at.
func (o *orderBarrier) behind(loops []*loop, self *loop, at int64) []*loop {
	var out []*loop
	for _, lp := range loops {
		if lp != self && lp.doneBefore.Load() < at && !lp.quietNow() {
			out = append(out, lp)
		}
	}
	return out
}

// hold registers w, unless no loop is behind and no ordered command that
// arrived before w's waits or is about to run on another loop: then w is
// done and hold reports true. A loop waited for does not go to sleep before it has
// caught up (loop.idle), so nobody needs to wake it, unless it sleeps in
// epoll_wait itself (loop.blocking).
func (o *orderBarrier) hold(loops []*loop, self *loop, w *orderWaiter) bool {
	o.mu.Lock()
	// Counted before the loops are looked at, so that a loop that makes
	// progress after its look sees a waiter to tell (progress).
	o.waiting.Add(1)
	w.loops = o.behind(loops, self, w.at)
	if len(w.loops) == 0 && !o.arrivalsPending() && !o.earlierLocked(w) {
		o.waiting.Add(-1)
		o.mu.Unlock()
		w.done.Store(true)
		return true
	}
	o.waiters = append(o.waiters, w)
	o.mu.Unlock()
	for _, lp := range w.loops {
		if lp.blocking.Load() {
			lp.signal()
		}
	}
	return false
}

// progress is called by loop lp once its doneBefore advanced: it releases
// the waiters every loop of which has caught up, and reports whether one
// that is left still waits for lp.
func (o *orderBarrier) progress(lp *loop) (waited bool) {
	if o.waiting.Load() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range o.waiters {
		if !w.released {
			waited = waited || w.waitsFor(lp)
		}
	}
	o.releaseLocked(lp.s.loops)
	return waited
}

// releaseLocked lets go on the waiters every loop of which has caught up
// and before which nothing that arrived earlier waits on another loop.
// They stay registered until they have run (finish).
func (o *orderBarrier) releaseLocked(loops []*loop) {
	for _, w := range o.waiters {
		if w.released || !o.caughtUpLocked(loops, w) || o.earlierLocked(w) {
			continue
		}
		w.released = true
		w.done.Store(true)
		if w.lp != nil {
			w.lp.wakeOrdered(w)
		} else {
			close(w.ch)
		}
	}
}

// earlierLocked reports whether a command that arrived before w's first
// is held on another loop (or another goroutine client's) and has not run.
func (o *orderBarrier) earlierLocked(w *orderWaiter) bool {
	for _, x := range o.waiters {
		if x != w && (x.lp == nil || x.lp != w.lp) && x.first < w.first {
			return true
		}
	}
	return false
}

// finish unregisters w, whose commands have run, letting go on what waited
// for them.
func (o *orderBarrier) finish(loops []*loop, w *orderWaiter) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.waiters {
		if x == w {
			o.waiters = slices.Delete(o.waiters, i, i+1)
			break
		}
	}
	o.waiting.Store(int32(len(o.waiters)))
	o.releaseLocked(loops)
}

// waitsFor reports whether w still waits for lp.
func (w *orderWaiter) waitsFor(lp *loop) bool {
	for _, x := range w.loops {
		if x == lp && lp.doneBefore.Load() < w.at {
			return true
		}
	}
	return false
}

// caughtUpLocked reports whether every loop but w's has run what it
// received before w.at, and no connection is on its way to a loop. Every
// loop is looked at again, not only those behind when w began to wait: a
// loop that was quiet may have taken a new connection since.
func (o *orderBarrier) caughtUpLocked(loops []*loop, w *orderWaiter) bool {
	if o.arrivalsPending() {
		return false
	}
	for _, lp := range loops {
		if lp != w.lp && lp.doneBefore.Load() < w.at && !lp.quietNow() {
			return false
		}
	}
	return true
}
