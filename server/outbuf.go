package server

import (
	"errors"
	"time"

	"kvs/resp"
)

// Output buffer limits for normal clients (client-output-buffer-limit
// normal; the pubsub class is pubsub.go's), with Redis's semantics: a
// client whose pending output (produced, not yet taken by its socket)
// reaches the hard limit is closed at once; one that stays at or over the
// soft limit for soft-seconds is closed then. Redis's default for normal
// clients is no limit; kvs's is defaultNormalLimit.
//
// On an event loop (loop_linux.go) a pipeline runs in slices: once a slice
// has produced outFlushSize bytes the loop tries to write them, and if the
// socket does not take them all it sets the output aside in blocks
// (outBuf.q, so later replies never copy earlier ones), checks the limit,
// and pauses the pipeline until its next round, serving the other clients
// in between. A client that asks for large values and never reads thus
// grows its output one slice per round until the hard limit closes it,
// without holding up anyone else for more than a slice. The cron loop also
// has each loop check its clients whose output waits, every tick
// (checkOutputLimits), for a soft limit's seconds to run out on a client
// that adds no more output.
//
// A connection with a goroutine of its own writes as it goes (client.go
// resume) and blocks when its socket is full, so its pending output is at
// most the replies of one slice: the hard limit closes it only when one
// slice's output is over it, and a blocked write of at least the soft
// limit gets soft-seconds to finish (a write deadline).
//
// A client closed for its output buffer is logged as Redis logs it,
// counted (INFO stats client_output_buffer_limit_disconnections, Redis
// 7.4's name), and its buffers are dropped; when they were large the cron
// loop hands the freed memory back to the OS (memory.go's collectFreed).
//
// A client that must authenticate and has not is closed as soon as its
// pending output passes unauthOutputLimit, as in Redis (the
// CVE-2025-21605 fix), whatever the class limits say: such a client could
// otherwise have the server hold replies it never reads.

// defaultNormalLimit is kvs's client-output-buffer-limit normal: Redis's
// own bound for its largest legitimate reader, a replica (256 MiB hard,
// 64 MiB for 60 s). A normal client needs more only to read a single
// reply larger than that, or pipelines of them it never reads.
var defaultNormalLimit = outputLimit{hard: 256 << 20, soft: 64 << 20, softSeconds: 60}

// largeRelease is the size of dropped buffers past which the memory is
// returned to the OS at the next cron tick.
const largeRelease = 16 << 20

// unauthOutputLimit is the pending output an unauthenticated client may
// have: Redis closes one whose replies no longer fit its 16 KiB reply
// buffer (checkClientOutputBufferLimits: more than 1 KiB in the reply list
// that follows the buffer, whose first block is 16 KiB).
const unauthOutputLimit = 16 << 10

// outBuf is a client's output set aside, and its limit's state; only the
// connection's loop or goroutine uses it.
type outBuf struct {
	q      [][]byte // blocks written before c.out, oldest first
	qBytes int      // their total length
	qPos   int      // what of q[0] is written
	// softSince is when pending output reached the soft limit (Unix ns),
	// 0 while under it. deadline says a soft-limit write deadline is set.
	softSince int64
	deadline  bool
	// paused: the pipeline stopped after a slice; the loop resumes it.
	paused bool
}

// pendingOut is c's output not yet written.
func (c *client) pendingOut() int {
	return c.ob.qBytes - c.ob.qPos + len(c.out) - c.outPos
}

// setAside moves c.out's unwritten part to the queue of blocks.
func (c *client) setAside() {
	if c.outPos < len(c.out) {
		b := c.out[c.outPos:]
		c.ob.q = append(c.ob.q, b)
		c.ob.qBytes += len(b)
	}
	c.out, c.outPos = nil, 0
}

// normalLimit is the limit c's pending output is held to, nil for none:
// subscribers, and connections with a goroutine whose output goes through
// their pushState, are held where their messages are queued (deliver).
// A loop client that only may be sent invalidations (tracking.go) is a
// normal client, as in Redis.
func (c *client) normalLimit() *outputLimit {
	if c.ps != nil && (c.fd < 0 || c.subscribed()) {
		return nil
	}
	return c.s.normalLimit.Load()
}

// overOutputLimit reports whether c's pending output breaks its limit now.
func (c *client) overOutputLimit() bool {
	l := c.normalLimit()
	return l != nil && l.over(&c.ob.softSince, c.pendingOut(), unixNanoNow)
}

// overUnauthLimit reports whether c must authenticate and has more output
// pending than unauthOutputLimit. It is checked before the output is
// written, as Redis checks it as replies are added.
func (c *client) overUnauthLimit() bool {
	return c.pendingOut() > unauthOutputLimit && c.authRequired()
}

// dropOutput forgets c's output (it is being closed for it), logs and
// counts the disconnection and, if it held much, has the memory returned.
func (c *client) dropOutput() {
	n := c.pendingOut() + cap(c.out)
	c.out, c.outPos = nil, 0
	clear(c.ob.q)
	c.ob = outBuf{}
	c.pipe = nil
	c.s.stats.outputLimitKills.Add(1)
	c.s.cfg.Logger.Warn("server: client scheduled to be closed ASAP for overcoming of output buffer limits",
		"client", c.addr, "id", c.id, "pending_bytes", n)
	c.s.mem.noteFreed(n, false)
}

// checkOutputLimits is the cron loop's: it has every event loop check the
// limits of its clients whose output waits, for a soft limit's seconds.
func (s *Server) checkOutputLimits() {
	if l := s.normalLimit.Load(); l == nil || l.soft == 0 {
		return
	}
	for _, lp := range s.loops {
		lp.checkLimitsSoon()
	}
}

// queryLimitHit logs and counts the close of a client whose request grew
// past client-query-buffer-limit, if err says that is why it is closed.
// Redis sends no reply; neither does kvs.
func (c *client) queryLimitHit(err error) {
	if !errors.Is(err, resp.ErrQueryBufferLimit) {
		return
	}
	c.s.stats.queryLimitKills.Add(1)
	c.s.cfg.Logger.Warn("server: closing client that reached max query buffer length",
		"client", c.addr, "id", c.id, "limit", c.s.maxQuery.Load())
}

// outputGuard is the check a goroutine-served connection makes before it
// writes c.out (flush): it reports false when c must be closed for its
// output buffer, and sets or clears the soft limit's write deadline.
func (c *client) outputGuard() bool {
	if c.overUnauthLimit() {
		c.dropOutput()
		return false
	}
	l := c.normalLimit()
	if l == nil {
		return true
	}
	n := len(c.out)
	if l.hard > 0 && int64(n) >= l.hard {
		c.dropOutput()
		return false
	}
	soft := l.soft > 0 && int64(n) >= l.soft
	switch {
	case soft:
		c.nc.SetWriteDeadline(time.Now().Add(time.Duration(l.softSeconds) * time.Second))
		c.ob.deadline = true
	case c.ob.deadline:
		c.nc.SetWriteDeadline(time.Time{})
		c.ob.deadline = false
	}
	return true
}
