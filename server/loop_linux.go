//go:build linux

package server

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"kvs/fsm"
	"kvs/resp"
)

// A loop serves connections the way redis-server's event loop does: one
// goroutine waits on an epoll set, reads every connection that is ready
// (one read each: a short read means the socket is drained, and the
// edge-triggered set reports the next data), executes what it read, and
// then writes all the replies back to back. Compared with a goroutine per
// connection that saves, per request, the read that finds the socket
// empty and the park and wake-up through Go's network poller, and it
// writes the replies of one round together, so a client is woken once for
// many of them rather than once each.
//
// Every command runs on the loop. Loops serve memory mode, where no command
// waits, and durable mode, where a write waits for the log: the loop hands
// the round's write batches to the roundProposer and sends them together
// at the end of the round (one write, and with fsync always one fsync for
// all of them). A pipeline that must wait for its batch is suspended at the
// command that needs the answer; when the proposer answers, the loop
// resumes it and writes its replies with the round's others. While a
// round's batches are on their way to disk, the batches of later rounds
// are collected to go out together next. If some pipelines of the round
// were answered at once (reads), the loop serves on during the fsync;
// if every one waits for the log, the loop waits with them (Flush), as
// redis-server does, and reads what arrived meanwhile as one round.
//
// In cluster mode a write waits for a Raft round, on this node or, from a
// follower, on the leader it is forwarded to; a read may wait for a read
// barrier or for a replica to catch up, and some commands for other nodes.
// No loop sits in such a wait: the step that waits runs on a goroutine of
// its own (offLoop), the client suspended as for the proposer, and the
// loop serves its other clients meanwhile and resumes the client when the
// step is done.
//
// The epoll set itself is registered with Go's network poller, so an idle
// loop parks like any goroutine waiting for a socket and holds no thread.
// Other goroutines wake the loop through an eventfd in the set.
type loop struct {
	s    *Server
	epfd int
	evfd int
	ep   *os.File        // epfd, registered with Go's poller
	rc   syscall.RawConn // ep's, to park until the set has events

	events []unix.EpollEvent
	// The round's place in events (evAt of evN) and in the clients it
	// reads again (readyNow, taken from ready). busyEvents is serveBusy's,
	// apart from events, which the round a busy script interrupted is
	// still going through; wakeMissed says serveBusy took the eventfd's
	// wake-up and left the rest of its work (wake) to the round.
	evAt, evN  int
	readyNow   []*client
	readyAt    int
	busyEvents []unix.EpollEvent
	wakeMissed bool
	poll       func(uintptr) bool // pollOnce, as a func value made once
	polled     int                // what pollOnce found
	conns      map[int32]*client  // by fd; loop-owned
	ready      []*client          // may have input no new edge will announce
	dirty      []*client          // have replies to write at the end of the round

	signaled atomic.Bool // an eventfd write is pending
	// waitingOut counts the connections whose output waits for EPOLLOUT;
	// limitsDue asks the loop to check their output buffer limits
	// (checkLimitsSoon).
	waitingOut atomic.Int32
	limitsDue  atomic.Bool
	// cronDue asks the loop to resize its connections' buffers
	// (clientsCronSoon).
	cronDue atomic.Bool

	// Durable mode: the proposer; batches enqueued since the last kick;
	// batches enqueued and not yet answered (the log may answer a batch
	// nobody kicked for, when it writes after an fsync returns). In
	// cluster mode outstanding counts the steps running off the loop
	// (offLoop), and nothing is enqueued.
	rounds      roundProposer
	enqueued    int
	outstanding int
	// offSteps counts the steps of outstanding that are WAITs run off the
	// loop (offLoop) rather than waits for the proposer: a WAIT in durable mode
	// waiting for its timeout is not a batch in flight, and the batches
	// enqueued meanwhile go out as if it were not there.
	offSteps int
	// answered: a pipeline read this round was answered at once (it did
	// not wait for the log). flushing: the loop waits in Flush, which
	// collects the answers itself.
	answered bool
	flushing atomic.Bool

	// Arrival order (order.go), on monoNow's clock: the loop has run
	// every request that arrived before doneBefore; quiet, it is not
	// reading: it has run what it read (it writes replies, or sleeps), and
	// takes no events until it clears quiet, before each epoll_wait, so a
	// look from another loop never misses events this one took; sleeping,
	// it is about to sleep or sleeps. roundAt is when the epoll_wait of
	// the current round began, polledAt pollOnce's.
	doneBefore atomic.Int64
	quiet      atomic.Bool
	sleeping   atomic.Bool
	roundAt    int64
	// wallOffset is the wall clock less monoNow's (fdReader converts
	// receive times with it), measured at offsetAt (clock).
	wallOffset int64
	offsetAt   int64
	polledAt   int64
	// blocking: the loop sleeps in epoll_wait, not in Go's poller.
	// ordered are clients to run again (wakeOrdered), orderedDue says
	// there are some.
	blocking   atomic.Bool
	orderedDue atomic.Bool
	// orderHeld are the clients whose ordered command this round
	// suspended, orderAt and orderFirst the latest and earliest of their
	// arrivals (holdOrdered).
	orderHeld  []*client
	orderAt    int64
	orderFirst int64
	// entering are the connections taken this round, counted in the
	// barrier's entering until the round has read them.
	entering []*client

	mu       sync.Mutex     // guards the fields below
	done     []*client      // answered by the roundProposer, or back from offLoop: to resume
	woken    []*client      // blocked clients whose waiter was woken, to run again
	pushed   []*client      // subscribers with messages queued (pushReady)
	ordered  []*orderWaiter // whose ordered commands may go on (wakeOrdered)
	killed   []*client      // to close: CLIENT KILL (kill)
	incoming []*client      // accepted, not yet in conns
	stopping bool           // Shutdown: close connections once their replies are written
	closing  bool           // Close: close everything now
	exited   bool           // the loop returned; add closes the connection
}

// The loop's system calls on its sockets, its eventfd and its epoll set
// never block (the descriptors are non-blocking, epoll_wait is asked not to
// wait; the loop parks in Go's poller instead), so they are made raw: not
// through the scheduler's entersyscall/exitsyscall. Made the usual way,
// each one let the runtime's monitor take the loop's P away while the call
// ran and hand it back after, which on a server given one core (taskset,
// GOMAXPROCS 1) woke threads and kept the monitor polling every 20 µs: at
// -P 16 about 15,000 of its wake-ups a second, on the core the loop needs.
// A raw call holds its P; none here lasts longer than a copy into a socket
// buffer.

func rawRead(fd int, p []byte) (int, error)  { return rawIO(unix.SYS_READ, fd, p) }
func rawWrite(fd int, p []byte) (int, error) { return rawIO(unix.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) of p on fd, as trap says.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawEpollWait is epoll_wait with a timeout of 0: the events ready now.
func rawEpollWait(epfd int, events []unix.EpollEvent) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// fdReader reads a non-blocking socket, reporting EAGAIN as resp.ErrAgain
// (which resp.Reader.ReadReady understands). Each read also takes the
// kernel's receive time of the data it returns (SO_TIMESTAMPNS, which
// stampArrivals sets on the listener and accepted sockets inherit): the
// order requests arrived in across loops (order.go).
type fdReader struct {
	fd int
	lp *loop
	// arrived is that receive time on monoNow's clock, 0 when the kernel
	// gave none.
	arrived int64
	control [64]byte
}

func (r *fdReader) Read(p []byte) (int, error) {
	for {
		n, err := r.recv(p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, resp.ErrAgain
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// stampArrivals has the kernel note the receive time of what every
// connection ln accepts receives (SO_TIMESTAMPNS, which accepted sockets
// inherit), so that requests on different loops can be ordered by arrival
// (order.go). On the listener it also keeps the kernel stamping while no
// connection is open, so a new connection's first request is stamped too.
// A kernel that refuses leaves requests ordered by the time they are read.
// Only where there are loops to order: with one, it reads in arrival order.
func stampArrivals(s *Server, ln net.Listener) {
	sc, ok := ln.(syscall.Conn)
	if len(s.loops) < 2 || !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	})
	// A connection the kernel holds for accept(2) may already carry
	// requests that arrived before an ordered command's.
	pending := func() bool {
		ready := false
		rc.Control(func(fd uintptr) {
			fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			var ts unix.Timespec
			n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1,
				uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
			ready = e == 0 && n > 0
		})
		return ready
	}
	s.order.backlog.Store(&pending)
}

// recv is recvmsg(2) into p, noting the receive time.
func (r *fdReader) recv(p []byte) (int, error) {
	var iov unix.Iovec
	if len(p) > 0 {
		iov.Base = &p[0]
		iov.SetLen(len(p))
	}
	msg := unix.Msghdr{Iov: &iov, Iovlen: 1, Control: &r.control[0]}
	msg.SetControllen(len(r.control))
	n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(r.fd), uintptr(unsafe.Pointer(&msg)), 0)
	if e != 0 {
		return 0, e
	}
	r.arrived = 0
	hdr := unix.CmsgSpace(0)
	if int(msg.Controllen) >= hdr+int(unsafe.Sizeof(unix.Timespec{})) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&r.control[0]))
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SO_TIMESTAMPNS {
			ts := (*unix.Timespec)(unsafe.Pointer(&r.control[hdr]))
			// The kernel stamps by the wall clock: onto the monotonic one
			// by their difference at the round's start.
			r.arrived = ts.Nano() - r.lp.wallOffset
		}
	}
	return int(n), nil
}

// kernelArrival is when the data of c's last read arrived (monoNow's
// clock), or 0 when the kernel did not say.
func (c *client) kernelArrival() int64 {
	if c.fdr == nil {
		return 0
	}
	return c.fdr.arrived
}

// newLoops returns n loops, or an error when the system refuses epoll or
// eventfd (the server then serves a goroutine per connection).
func newLoops(s *Server, n int) ([]*loop, error) {
	var lps []*loop
	for range n {
		lp, err := newLoop(s)
		if err != nil {
			for _, lp := range lps {
				lp.release()
			}
			return nil, err
		}
		lps = append(lps, lp)
	}
	return lps, nil
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	fail := func(err error) (*loop, error) {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		return fail(os.NewSyscallError("epoll_ctl", err))
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		return fail(os.NewSyscallError("fcntl", err))
	}
	ep := os.NewFile(uintptr(epfd), "epoll")
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		unix.Close(evfd)
		return nil, err
	}
	// A cluster node's writes go through the router (routeBatch), never
	// to the Proposer directly.
	var rounds roundProposer
	if !s.router.clustered() {
		rounds = s.roundProposer()
	}
	lp := &loop{
		s:          s,
		epfd:       epfd,
		evfd:       evfd,
		ep:         ep,
		rc:         rc,
		rounds:     rounds,
		events:     make([]unix.EpollEvent, 256),
		busyEvents: make([]unix.EpollEvent, 64),
		conns:      make(map[int32]*client),
	}
	lp.poll = lp.pollOnce
	return lp, nil
}

// release closes the loop's descriptors; signal writes to the eventfd no
// more once it has run, so a late answer of the proposer cannot write to a
// descriptor number the process has since reused.
func (lp *loop) release() {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.exited = true
	lp.ep.Close() // closes epfd
	unix.Close(lp.evfd)
}

// add hands the accepted client c to the loop. The loop takes a duplicate
// of the socket out of Go's poller and closes c's net.Conn. It reports
// false, leaving c untouched, when the socket cannot be taken (the caller
// then serves c on a goroutine).
func (lp *loop) add(c *client) bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) {
		fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil || derr != nil {
		return false
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return false
	}
	c.loopRef.Store(lp)
	c.nc.Close()
	c.fd = fd
	c.sockFD.Store(int32(fd))
	c.lp = lp
	c.fdr = &fdReader{fd: fd, lp: lp}
	c.rd = c.newReader(c.fdr) // nothing is read yet
	c.busyServe = func() { lp.serveBusy(c) }
	if lp.rounds != nil {
		c.rounds = lp.rounds
		c.asyncDone = func(replies []fsm.Reply, err error) {
			c.asyncReplies, c.asyncErr = replies, err
			lp.mu.Lock()
			lp.done = append(lp.done, c)
			lp.mu.Unlock()
			if !lp.flushing.Load() {
				lp.signal()
			}
		}
	}
	lp.mu.Lock()
	if lp.exited {
		lp.mu.Unlock()
		c.entered()
		unix.Close(fd)
		lp.s.unregister(c)
		return true
	}
	lp.incoming = append(lp.incoming, c)
	lp.mu.Unlock()
	lp.signal()
	return true
}

// signal wakes the loop; writes to the eventfd are coalesced until the
// loop has read it.
func (lp *loop) signal() {
	if lp.signaled.Swap(true) {
		return
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.exited {
		return
	}
	one := [8]byte{1}
	for {
		_, err := unix.Write(lp.evfd, one[:])
		if err != unix.EINTR {
			return
		}
	}
}

// stop asks the loop to close its connections: once their replies are
// written (Shutdown), or at once (Close). The loop then returns.
func (lp *loop) stop(now bool) {
	lp.mu.Lock()
	lp.stopping = true
	if now {
		lp.closing = true
	}
	lp.mu.Unlock()
	lp.signal()
}

// run is the loop's goroutine.
func (lp *loop) run() {
	defer lp.release()
	for {
		// The round's events and ready clients are gone through by
		// index in the loop's fields, so that a busy script one of them
		// runs can serve the others (serveBusy): an edge-triggered event
		// taken from the set is not reported again.
		lp.evN = lp.wait(len(lp.ready) == 0 && !lp.wakeMissed)
		n := lp.evN
		if lp.orderedDue.Swap(false) {
			lp.runOrdered()
		}
		for lp.evAt = 0; lp.evAt < lp.evN; {
			ev := lp.events[lp.evAt]
			lp.evAt++
			if ev.Fd == int32(lp.evfd) {
				lp.wake()
				continue
			}
			if c := lp.conns[ev.Fd]; c != nil {
				lp.event(c, ev.Events)
			}
		}
		if lp.wakeMissed {
			lp.wakeMissed = false
			lp.wake()
		}
		if len(lp.ready) > 0 {
			lp.readyNow, lp.ready = lp.ready, nil
			for lp.readyAt = 0; lp.readyAt < len(lp.readyNow); {
				c := lp.readyNow[lp.readyAt]
				lp.readyAt++
				lp.input(c)
			}
			clear(lp.readyNow)
			lp.readyNow = lp.readyNow[:0]
		}
		for len(lp.orderHeld) > 0 {
			// Ordered commands suspended this round wait together
			// (order.go), registered before the loop says it caught up,
			// or run now if the other loops have.
			lp.holdOrdered()
		}
		for i, c := range lp.entering {
			// Read, and what they sent run or registered above: no
			// longer on their way (order.go).
			c.entered()
			lp.entering[i] = nil
		}
		lp.entering = lp.entering[:0]
		if n < len(lp.events) {
			// Every connection ready when the round began has been read
			// (once) and run; with the events array full, some may not
			// have been. Other loops' ordered commands need no more.
			lp.doneBefore.Store(lp.roundAt)
			lp.quiet.Store(true)
			lp.s.order.progress(lp)
		}
		for len(lp.orderHeld) > 0 || lp.enqueued > 0 && lp.outstanding-lp.offSteps <= lp.enqueued {
			if len(lp.orderHeld) > 0 {
				// Ordered commands suspended this round wait together
				// (order.go), or run now if the other loops caught up.
				lp.holdOrdered()
				continue
			}
			// The batches enqueued since the last kick go out together:
			// one write and one fsync. Until they are answered the loop
			// collects the next writes, which go out together once these
			// are answered, as redis-server's writes of one event-loop
			// iteration share one fsync.
			lp.enqueued = 0
			if lp.answered {
				// Others are reading: serve them during the fsync.
				lp.rounds.Kick()
			} else {
				// Every pipeline of the round waits for the log: wait with
				// them, as redis-server does, so that the requests that
				// arrive meanwhile are read as one round afterwards
				// rather than one wake-up each.
				// A script turning busy ends the wait: the loop answers
				// BUSY to its clients while the log's apply runs it.
				busy, already := lp.s.cfg.Store.ScriptTurnsBusy()
				lp.flushing.Store(true)
				if already {
					lp.rounds.Kick()
				} else {
					lp.rounds.Flush(busy)
				}
				lp.flushing.Store(false)
				lp.resume() // which may enqueue again: the loop goes round
			}
		}
		lp.answered = false
		lp.flush()
		if lp.finished() {
			return
		}
	}
}

// wait returns the number of events in lp.events, parking in Go's poller
// until there is one if block is set.
func (lp *loop) wait(block bool) int {
	lp.roundAt = lp.clock()
	lp.quiet.Store(false)
	lp.sleeping.Store(false)
	n, _ := rawEpollWait(lp.epfd, lp.events)
	if n > 0 || !block || !lp.idle(lp.roundAt) {
		// An empty round when idle says not to sleep: it has ordered
		// clients to run, or another loop waits for a later look.
		return max(n, 0)
	}
	if err := lp.rc.Read(lp.poll); err != nil {
		// Go's poller refused the epoll set: block in epoll_wait, which
		// holds a thread but works. Not quiet (the wait may take events
		// while another loop looks), so an ordered command that waits
		// for this loop wakes it (orderBarrier.hold).
		lp.blocking.Store(true)
		lp.quiet.Store(false)
		lp.roundAt = lp.clock()
		n, _ := unix.EpollWait(lp.epfd, lp.events, -1)
		return max(n, 0)
	}
	lp.roundAt = lp.polledAt
	return max(lp.polled, 0)
}

// pollOnce is the callback of wait's park, built once (a closure made per
// park would cost an allocation per idle moment): it reports whether the
// set has events, leaving their number in polled.
func (lp *loop) pollOnce(uintptr) bool {
	lp.polledAt = lp.clock()
	lp.quiet.Store(false)
	lp.sleeping.Store(false)
	lp.polled, _ = rawEpollWait(lp.epfd, lp.events)
	// Not sleeping after all, when an ordered command still waits for
	// this loop: the next look (a later time) releases it.
	return lp.polled > 0 || !lp.idle(lp.polledAt)
}

// clock returns monoNow, and keeps the wall clock's offset from it, which
// fdReader converts the kernel's receive times with, measured anew every
// offsetRefresh (measureWallOffset).
func (lp *loop) clock() int64 {
	mono := monoNow()
	if lp.wallOffset == 0 || mono-lp.offsetAt >= int64(offsetRefresh) {
		if off, ok := measureWallOffset(); ok {
			lp.wallOffset, lp.offsetAt = off, mono
		}
	}
	return mono
}

// idle notes that the loop is about to sleep, having found nothing ready
// at t: it has run every request that arrived before t. It reports false
// when an ordered command on another loop still waits for a time after t:
// the loop looks again instead of sleeping, so that nobody needs to wake
// it for that.
func (lp *loop) idle(t int64) bool {
	lp.doneBefore.Store(t)
	lp.quiet.Store(true)
	lp.sleeping.Store(true)
	return !lp.s.order.progress(lp) && !lp.orderedDue.Load()
}

// quietNow reports whether the loop is not reading and has nothing ready:
// it has run everything it received. Called from other loops: the epoll
// set is polled (which takes nothing from it) before quiet is read, so
// events this loop took meanwhile are seen as its quiet gone false.
func (lp *loop) quietNow() bool {
	if !lp.quiet.Load() {
		return false // busy: no need to look
	}
	fds := [1]unix.PollFd{{Fd: int32(lp.epfd), Events: unix.POLLIN}}
	var ts unix.Timespec
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1,
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return e == 0 && n == 0 && lp.quiet.Load()
}

// resume continues the pipelines whose batches the proposer answered.
func (lp *loop) resume() {
	lp.mu.Lock()
	done := lp.done
	lp.done = nil
	lp.mu.Unlock()
	lp.outstanding -= len(done)
	for _, c := range done {
		c.suspended = false
		c.offRunning = false
		if c.offStep {
			c.offStep = false
			lp.offSteps--
		}
		if c.dead {
			c.pipe, c.asyncReplies, c.asyncErr = nil, nil, nil
			continue
		}
		if c.offResume {
			c.offResume = false // the step left its outcome in c itself
		} else {
			c.finishAsync()
		}
		if ps := c.ps; ps != nil {
			// Messages that arrived during the step go before what the
			// pipeline answers next, and a kill (killSubscriber) is done
			// now: takePushes left both for here.
			ps.mu.Lock()
			queued := ps.queued || ps.killed
			ps.mu.Unlock()
			if queued {
				lp.takePushes(c)
			}
		}
		if !c.dead {
			lp.run1(c, nil)
		}
	}
}

// offLoop runs step, which may wait (a Raft round, a forward to the leader,
// a read barrier), on a goroutine of its own while c stays suspended, so
// that the loop serves its other clients meanwhile; c comes back through
// done as a roundProposer's answer does, and resume runs its pipeline on.
// step may use c's pipeline state (batch, pending, out): the loop leaves a
// suspended client's alone. A step whose outcome is not a batch's answer
// sets c.offResume first, so that resume does not take one.
func (lp *loop) offLoop(c *client, step func()) {
	lp.outstanding++
	c.offRunning = true
	if c.offWaits {
		// Only a WAIT's step: every other step off the loop (a forwarded
		// batch, a blocking pop's first try) holds what was enqueued
		// after it, which keeps their order across connections.
		lp.offSteps++
		c.offStep, c.offWaits = true, false
	}
	go func() {
		step()
		lp.mu.Lock()
		lp.done = append(lp.done, c)
		lp.mu.Unlock()
		lp.signal()
	}()
}

// wake takes what other goroutines handed the loop.
func (lp *loop) wake() {
	var b [8]byte
	rawRead(lp.evfd, b[:])
	lp.signaled.Store(false)
	if lp.limitsDue.Swap(false) {
		lp.checkLimits()
	}
	if lp.cronDue.Swap(false) {
		lp.clientsCron()
	}
	lp.resume()
	lp.mu.Lock()
	woken := lp.woken
	lp.woken = nil
	pushed := lp.pushed
	lp.pushed = nil
	killed := lp.killed
	lp.killed = nil
	incoming := lp.incoming
	lp.incoming = nil
	stopping, closing := lp.stopping, lp.closing
	lp.mu.Unlock()
	for _, c := range woken {
		if !c.dead && c.suspended && (c.waitingBlocked() || c.held || c.serveHeld) {
			if c.held {
				c.setPaused(false)
			}
			c.suspended, c.held = false, false
			lp.run1(c, nil)
		}
	}
	for _, c := range pushed {
		lp.takePushes(c)
	}
	lp.register(incoming)
	for _, c := range killed {
		if lp.conns[int32(c.fd)] == c {
			lp.close(c)
		}
	}
	switch {
	case closing:
		for _, c := range lp.conns {
			lp.close(c)
		}
	case stopping:
		for _, c := range lp.conns {
			if c.pendingOut() == 0 && !c.ob.paused && (!c.suspended || c.waitingBlocked() || c.held || c.serveHeld || c.ordering) {
				lp.close(c)
			}
		}
	}
}

// register adds the accepted connections to the loop's epoll set, to be
// read this round.
func (lp *loop) register(incoming []*client) {
	for _, c := range incoming {
		// Read below, in this round; counted as entering until then
		// (order.go).
		lp.entering = append(lp.entering, c)
		ev := unix.EpollEvent{
			Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET,
			Fd:     int32(c.fd),
		}
		if err := unix.EpollCtl(lp.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			lp.s.cfg.Logger.Error("server: epoll_ctl", "err", err, "client", c.addr)
			unix.Close(c.fd)
			lp.s.unregister(c)
			continue
		}
		lp.conns[int32(c.fd)] = c
		if c.killReq.Load() {
			lp.close(c) // CLIENT KILL while it was handed over
			continue
		}
		c.more = true // requests may have arrived before the registration
		lp.ready = append(lp.ready, c)
	}
}

// finished reports whether a stopping loop has nothing left to do.
func (lp *loop) finished() bool {
	if len(lp.conns) > 0 || lp.outstanding > 0 {
		// A batch still with the proposer is answered before the loop
		// goes, as a goroutine waiting in Propose finishes that wait.
		return false
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if !lp.stopping || len(lp.incoming) > 0 {
		return false
	}
	lp.exited = true
	return true
}

func (lp *loop) event(c *client, events uint32) {
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.hup = true
		c.endWait() // a WAIT of a client gone answers nobody
		if c.suspended && c.waitingBlocked() {
			// A blocked client that hangs up leaves its queue, as in Redis.
			lp.close(c)
			return
		}
	}
	if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && c.wantOut {
		lp.write(c)
		if c.dead {
			return
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		c.more = true
		lp.input(c)
	}
}

// input reads and executes c's requests, once a round, unless c's replies
// wait for its socket to take them (it is read again once it has). Replies
// of its own queued this round, or messages for a subscriber, do not hold
// its input back: Redis reads a connection whatever it has to write, and
// a request that arrived before another loop's PUBLISH must run before it
// (order.go).
func (lp *loop) input(c *client) {
	if ps := c.ps; ps != nil && !c.dead {
		// Messages published before what c sent next go out before its
		// replies, as Redis writes them into c's buffer at once: take
		// them now rather than when the publisher's wake-up arrives.
		ps.mu.Lock()
		queued := ps.queued
		ps.mu.Unlock()
		if queued {
			lp.takePushes(c)
		}
	}
	if c.ob.paused && !c.dead {
		// A pipeline paused after a slice of output goes on (endSlice).
		c.ob.paused = false
		lp.run1(c, nil)
		return
	}
	// A client is not read while its replies wait for its socket, which
	// pushes back on one that does not read them; except one that must
	// still authenticate, read on as Redis reads it, so that its unread
	// replies pass unauthOutputLimit and it is closed.
	if !c.dead && !c.suspended && c.more && (!c.wantOut || c.authRequired()) && c.readAt >= lp.roundAt {
		// Read this round already, by a busy script's serveBusy: next
		// round, since no edge may announce what it has left.
		lp.ready = append(lp.ready, c)
		return
	}
	for !c.dead && !c.suspended && c.more && (!c.wantOut || c.authRequired()) && c.readAt < lp.roundAt {
		if lp.s.shutdown.Load() {
			// Shutdown: requests that arrive now are not read.
			lp.close(c)
			return
		}
		cmds, more, err := c.rd.ReadReady()
		// Once the peer has hung up, a short read no longer means the
		// socket is drained: the hang-up's edge came with the last bytes,
		// and no other will announce the end of the stream, so read on
		// until it is seen.
		c.more = more || c.hup
		if err != nil {
			var pe *resp.ProtocolError
			if errors.As(err, &pe) {
				c.out = appendError(c.out, pe.Text)
				c.quit = true
				lp.dirty = append(lp.dirty, c)
				return
			}
			c.queryLimitHit(err)
			lp.close(c)
			return
		}
		if len(cmds) == 0 {
			c.noteBuffers()
			continue // a request still incomplete: read on while more
		}
		lp.run1(c, cmds)
		return
	}
}

// run1 runs one pipeline of c's on the loop (cmds nil: resumes the one
// that waited for the proposer). Once it is complete, c's replies are
// written at the end of the round; otherwise c waits for the proposer's
// answer.
func (lp *loop) run1(c *client, cmds [][][]byte) {
	defer func() {
		if r := recover(); r != nil {
			c.panicked(r)
			c.quit = true
			c.pipe = nil
			lp.dirty = append(lp.dirty, c)
		}
	}()
	var complete bool
	if cmds != nil {
		complete = c.runPipeline(cmds)
	} else {
		complete = c.resume()
	}
	if complete {
		c.noteBuffers()
		lp.dirty = append(lp.dirty, c)
		if cmds != nil {
			lp.answered = true
		}
		return
	}
	if c.dead {
		return // closed for its output buffer (endSlice)
	}
	if c.ob.paused {
		lp.ready = append(lp.ready, c) // goes on next round, after the others
		lp.answered = true
		return
	}
	c.suspended = true
	if c.waitingBlocked() && (c.hup || lp.isStopping()) {
		lp.close(c)
	}
}

// isStopping reports whether Shutdown or Close asked the loop to stop.
func (lp *loop) isStopping() bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.stopping
}

// wakeBlocked runs the blocked client c again on the loop: its waiter was
// woken. It is called with the block registry's lock held.
func (lp *loop) wakeBlocked(c *client) {
	lp.mu.Lock()
	lp.woken = append(lp.woken, c)
	lp.mu.Unlock()
	lp.signal()
}

// kill closes c on the loop (CLIENT KILL from any goroutine).
func (lp *loop) kill(c *client) {
	lp.mu.Lock()
	lp.killed = append(lp.killed, c)
	lp.mu.Unlock()
	lp.signal()
}

// wakeHeld runs c again once the client pause that held it ended.
func (lp *loop) wakeHeld(c *client) { lp.wakeBlocked(c) }

// wakeOrdered has the loop run clients again once the loops their ordered
// commands waited for caught up (order.go); called from other loops. A
// busy loop takes them at the start of its next round (runOrdered), so
// only a sleeping one is signalled (idle looks at orderedDue after it set
// sleeping).
func (lp *loop) wakeOrdered(w *orderWaiter) {
	lp.mu.Lock()
	lp.ordered = append(lp.ordered, w)
	lp.mu.Unlock()
	lp.orderedDue.Store(true)
	if lp.sleeping.Load() {
		lp.signal()
	}
}

// runOrdered runs the clients of the waits wakeOrdered handed the loop,
// then lets go on what waited for them to run.
func (lp *loop) runOrdered() {
	lp.mu.Lock()
	waits := lp.ordered
	lp.ordered = nil
	lp.mu.Unlock()
	for _, w := range waits {
		for _, c := range w.clients {
			if !c.dead && c.suspended && c.ordering {
				c.suspended, c.ordering = false, false
				lp.run1(c, nil)
			}
		}
		lp.s.order.finish(lp.s.loops, w)
	}
}

// pushReady hands the loop a subscriber with messages queued (or killed
// for its output buffer); it is called by publishers, on any goroutine.
func (lp *loop) pushReady(c *client) {
	lp.mu.Lock()
	lp.pushed = append(lp.pushed, c)
	lp.mu.Unlock()
	lp.signal()
}

// takePushes moves the messages queued for c into its output, to be
// written with the round's replies, or closes c if it was killed for its
// output buffer.
func (lp *loop) takePushes(c *client) {
	if c.dead || c.offRunning {
		// A step off the loop may be writing c's output: the messages
		// stay queued until resume takes them.
		return
	}
	ps := c.ps
	ps.mu.Lock()
	ps.queued = false
	killed := ps.killed
	if !killed {
		c.mergeOutputLocked(ps)
	}
	ps.mu.Unlock()
	if killed {
		lp.close(c)
		return
	}
	if !c.wantOut {
		lp.dirty = append(lp.dirty, c)
	}
}

// flush writes the replies of the round, back to back.
func (lp *loop) flush() {
	for i, c := range lp.dirty {
		lp.dirty[i] = nil
		if !c.dead {
			lp.write(c)
		}
	}
	lp.dirty = lp.dirty[:0]
}

// endSlice is called when c's pipeline has produced outFlushSize bytes of
// output: it writes what the socket takes and reports whether the pipeline
// stops here, paused until the loop's next round (the socket did not take
// everything) or closed (over the output buffer limit); see outbuf.go.
func (lp *loop) endSlice(c *client) bool {
	if c.overUnauthLimit() {
		c.dropOutput()
		lp.close(c)
		return true
	}
	if !lp.writeOut(c) {
		return true // the write failed: closed
	}
	if c.pendingOut() == 0 {
		return false
	}
	c.setAside()
	if c.overOutputLimit() {
		c.dropOutput()
		lp.close(c)
		return true
	}
	c.ob.paused = true
	lp.waitOut(c)
	return true
}

// checkLimitsSoon has the loop check the output buffer limits of the
// clients whose output waits; the cron loop calls it every tick, since a
// client that stopped reading adds no output that would check them (a
// soft limit's seconds pass while nothing happens).
func (lp *loop) checkLimitsSoon() {
	if lp.waitingOut.Load() > 0 {
		lp.limitsDue.Store(true)
		lp.signal()
	}
}

// clientsCronSoon has the loop resize its connections' buffers; the cron
// loop calls it every tick, as Redis's clientsCron runs.
func (lp *loop) clientsCronSoon() {
	lp.cronDue.Store(true)
	lp.signal()
}

// clientsCron resizes the buffers of the connections between pipelines:
// a running pipeline's arguments alias its read buffer.
func (lp *loop) clientsCron() {
	now := time.Now()
	for _, c := range lp.conns {
		if c.pipe == nil && !c.suspended && !c.dead {
			c.resizeBuffers(now)
		}
	}
}

// checkLimits closes the clients whose waiting output breaks its limit.
func (lp *loop) checkLimits() {
	for _, c := range lp.conns {
		if c.wantOut && !c.dead && c.overOutputLimit() {
			c.dropOutput()
			lp.close(c)
		}
	}
}

// waitOut notes that c's output waits for EPOLLOUT.
func (lp *loop) waitOut(c *client) {
	if !c.wantOut {
		lp.waitingOut.Add(1)
	}
	c.wantOut = true
	if c.ps != nil {
		c.ps.mu.Lock()
		c.ps.inflight = c.pendingOut()
		c.ps.mu.Unlock()
	}
}

// writeOut writes what the socket takes of c's output, the blocks set
// aside first. It reports false when the write failed and c was closed.
func (lp *loop) writeOut(c *client) bool {
	for len(c.ob.q) > 0 {
		b := c.ob.q[0]
		n, err := rawWrite(c.fd, b[c.ob.qPos:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil:
			lp.close(c)
			return false
		}
		if c.ob.qPos += n; c.ob.qPos == len(b) {
			c.ob.q[0] = nil
			c.ob.q = c.ob.q[1:]
			c.ob.qBytes -= len(b)
			c.ob.qPos = 0
		}
	}
	c.ob.q = nil // the emptied array goes too
	for c.outPos < len(c.out) {
		n, err := rawWrite(c.fd, c.out[c.outPos:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil:
			lp.close(c)
			return false
		}
		c.outPos += n
	}
	return true
}

// write writes what it can of c's replies. The rest waits for EPOLLOUT;
// c is not read meanwhile, which pushes back on a client that does not
// read its replies.
func (lp *loop) write(c *client) {
	if c.overUnauthLimit() {
		c.dropOutput()
		lp.close(c)
		return
	}
	if !lp.writeOut(c) {
		return
	}
	if c.pendingOut() > 0 {
		lp.waitOut(c)
		return
	}
	if c.wantOut {
		lp.waitingOut.Add(-1)
		c.wantOut = false
	}
	c.outPos = 0
	if c.ps != nil {
		c.ps.mu.Lock()
		c.ps.inflight = 0
		c.ps.mu.Unlock()
	}
	if cap(c.out) > 1<<20 {
		c.out = nil // do not keep a huge buffer for an idle connection
	} else {
		c.out = c.out[:0]
	}
	if c.quit || lp.s.shutdown.Load() {
		lp.close(c)
		return
	}
	if c.more && !c.ob.paused {
		lp.ready = append(lp.ready, c) // after the other clients
	}
}

// close closes c's socket.
func (lp *loop) close(c *client) {
	if c.dead {
		return
	}
	c.dead = true
	if c.wantOut {
		lp.waitingOut.Add(-1)
	}
	c.endWait()
	c.leaveBlocked()
	delete(lp.conns, int32(c.fd))
	unix.Close(c.fd)
	lp.s.unregister(c)
}

// accept is ln.Accept, counting the connection in entering from before
// accept(2) takes it out of the kernel's backlog, so that arrivalsPending
// never misses it between the two. Go's listeners cannot wait for
// readiness through their RawConn, so the wait is a ppoll of at most
// acceptPoll, inside Control so that a Close waits for it rather than
// the descriptor being reused under it.
func (o *orderBarrier) accept(ln net.Listener) (net.Conn, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		nc, err := ln.Accept()
		if err == nil {
			o.entering.Add(1)
		}
		return nc, err
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	for {
		nfd, aerr := -1, error(nil)
		err := rc.Control(func(fd uintptr) {
			o.entering.Add(1)
			nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if aerr == nil {
				return
			}
			o.entering.Add(-1)
			if aerr == unix.EAGAIN {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				ts := unix.NsecToTimespec(int64(acceptPoll))
				unix.Ppoll(fds, &ts, nil)
			}
		})
		switch {
		case err != nil:
			return nil, err // closed
		case aerr == unix.EAGAIN || aerr == unix.EINTR || aerr == unix.ECONNABORTED:
			continue
		case aerr != nil:
			return nil, aerr
		}
		f := os.NewFile(uintptr(nfd), "")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			o.entering.Add(-1)
			return nil, err
		}
		return nc, nil
	}
}

// acceptPoll bounds accept's wait for a connection, which is how long a
// Close of the listener may wait for it.
const acceptPoll = 50 * time.Millisecond

// serveBusy answers the loop's clients while a script that c runs is
// busy, as Redis's processEventsWhileBlocked does: it is called from the
// script's checkpoint, on the loop's goroutine, with the store's lock
// held by the script, every millisecond or so. It reads what has arrived
// and runs it, which answers BUSY to all but the allow_busy commands (none
// of which takes the store's lock), writes the replies, and takes new
// connections. c itself is left alone until its script returns, as Redis
// protects the script's client: its pipeline is mid-way, and what it sent
// meanwhile is read afterwards. The rest of the loop's work (blocked
// clients woken, messages, kills, stopping) waits for the round the script
// interrupted.
func (lp *loop) serveBusy(c *client) {
	// It reads as a round of its own would, from now: a client it read
	// before is read again (input reads a client once a round). The
	// interrupted round keeps its own time, so what this read is read
	// again only next round, and the loop is not quiet: another loop's
	// ordered command waits for that round (order.go).
	roundAt := lp.roundAt
	lp.roundAt = monoNow()
	lp.quiet.Store(false)
	defer func() { lp.roundAt = roundAt }()
	// First what the interrupted round took from the set and has not
	// gone through yet: no edge reports it again.
	for lp.evAt < lp.evN {
		ev := lp.events[lp.evAt]
		lp.evAt++
		lp.busyEvent(c, ev)
	}
	n, _ := rawEpollWait(lp.epfd, lp.busyEvents)
	for i := range max(n, 0) {
		lp.busyEvent(c, lp.busyEvents[i])
	}
	for lp.readyAt < len(lp.readyNow) {
		c2 := lp.readyNow[lp.readyAt]
		lp.readyAt++
		lp.busyInput(c, c2)
	}
	ready := lp.ready
	lp.ready = nil
	for _, c2 := range ready {
		lp.busyInput(c, c2)
	}
	lp.flushExcept(c)
}

// busyEvent is event during c's busy script.
func (lp *loop) busyEvent(c *client, ev unix.EpollEvent) {
	switch c2 := lp.conns[ev.Fd]; {
	case ev.Fd == int32(lp.evfd):
		lp.busyWake()
	case c2 == c:
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			c.more = true
		}
		if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			c.hup = true
		}
	case c2 != nil:
		lp.event(c2, ev.Events)
	}
}

// busyInput is input during c's busy script: c2's requests are read,
// c's wait for the round.
func (lp *loop) busyInput(c, c2 *client) {
	if c2 == c {
		lp.ready = append(lp.ready, c)
		return
	}
	lp.input(c2)
}

// busyWake takes the eventfd's wake-up during a busy script: it registers
// the connections accepted meanwhile, so they are served too, and leaves
// the rest of wake's work to the interrupted round.
func (lp *loop) busyWake() {
	var b [8]byte
	rawRead(lp.evfd, b[:])
	lp.signaled.Store(false)
	lp.wakeMissed = true
	lp.mu.Lock()
	incoming := lp.incoming
	lp.incoming = nil
	lp.mu.Unlock()
	lp.register(incoming)
}

// flushExcept writes the round's replies so far, but c's, whose pipeline
// is mid-way: c stays in dirty for the round's own flush.
func (lp *loop) flushExcept(c *client) {
	kept := false
	for i, c2 := range lp.dirty {
		lp.dirty[i] = nil
		if c2 == c {
			kept = true
		} else if !c2.dead {
			lp.write(c2)
		}
	}
	lp.dirty = lp.dirty[:0]
	if kept {
		lp.dirty = append(lp.dirty, c)
	}
}
