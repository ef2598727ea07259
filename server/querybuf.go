package server

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

// A connection's buffers as CLIENT LIST shows them (qbuf, qbuf-free,
// argv-mem, rbs, rbp, tot-mem), and the query buffer's resizing, as
// Redis's clientsCronResizeQueryBuffer does it: the read buffer
// (resp.Reader) gives back the room it no longer needs, all of it once
// the client has been idle for over two seconds.
//
// The buffers belong to the connection's goroutine or loop; another
// client's CLIENT LIST reads the figures the owner last published
// (noteBuffers: after each pipeline, each partial read and each resize),
// a few atomic stores per pipeline. A connection describing itself reads
// its buffers directly, its running command included, as Redis does.
//
// On an event loop the cron resizes a connection between pipelines; a
// connection with a goroutine of its own (cluster mode, TLS) resizes
// before each read, so its buffer shrinks while it is busy but not while
// it is idle: its read waits in the buffer.

// queryBufIdle is how long a client must send nothing for its query
// buffer to be emptied (Redis: more than 2 seconds, counted in whole
// seconds).
const queryBufIdle = 3 * time.Second

// replyPeakReset is how often the reply buffer's peak (rbp) starts over:
// Redis's reply-buffer-peak-reset-time default.
const replyPeakReset = 5 * time.Second

// bufFigures are a connection's buffer figures as its owner last
// published them.
type bufFigures struct {
	qbuf, qbufFree, rbs, rbp atomic.Int64
}

// noteBuffers publishes c's buffer figures for other clients' CLIENT
// LIST; c is between pipelines or waiting for input.
func (c *client) noteBuffers() {
	if c.rd == nil {
		return
	}
	used, free := c.rd.QueryBuf(false)
	c.bufs.qbuf.Store(int64(used))
	c.bufs.qbufFree.Store(int64(free))
	c.outPeak = max(c.outPeak, len(c.out))
	c.bufs.rbs.Store(int64(cap(c.out)))
	c.bufs.rbp.Store(int64(c.outPeak))
}

// resizeBuffers is the cron's work on c between pipelines (Redis's
// clientsCronResizeQueryBuffer, and the reset of the reply buffer's peak).
func (c *client) resizeBuffers(now time.Time) {
	if c.rd == nil {
		return
	}
	idle := now.Sub(time.Unix(0, c.lastActive.Load())) >= queryBufIdle
	c.rd.Resize(idle)
	if now.Sub(c.outPeakAt) >= replyPeakReset {
		c.outPeak, c.outPeakAt = len(c.out), now
	}
	c.lastResize = now
	c.noteBuffers()
}

// appendBufferFields appends CLIENT LIST's buffer fields, from qbuf to
// tot-mem. self: c describes itself, while running the command that asks,
// which counts as buffered as in Redis.
func (c *client) appendBufferFields(b *strings.Builder, self bool) {
	var qbuf, free, argv, argc, rbs, rbp int64
	if self && c.rd != nil {
		u, f := c.rd.QueryBuf(c.pipe != nil)
		qbuf, free = int64(u), int64(f)
		if c.pipeAt < len(c.pipe) {
			for _, a := range c.pipe[c.pipeAt] {
				argv += int64(len(a))
			}
			argc = int64(len(c.pipe[c.pipeAt]))
		}
		rbs, rbp = int64(cap(c.out)), int64(max(c.outPeak, len(c.out)))
	} else {
		qbuf, free = c.bufs.qbuf.Load(), c.bufs.qbufFree.Load()
		rbs, rbp = c.bufs.rbs.Load(), c.bufs.rbp.Load()
	}
	// Redis's tot-mem: the buffers, the client structure and the
	// arguments (with a pointer each).
	total := qbuf + free + rbs + argv + 8*argc + int64(unsafe.Sizeof(client{}))
	b.WriteString(" qbuf=" + strconv.FormatInt(qbuf, 10))
	b.WriteString(" qbuf-free=" + strconv.FormatInt(free, 10))
	b.WriteString(" argv-mem=" + strconv.FormatInt(argv, 10))
	b.WriteString(" multi-mem=0")
	b.WriteString(" rbs=" + strconv.FormatInt(rbs, 10))
	b.WriteString(" rbp=" + strconv.FormatInt(rbp, 10))
	b.WriteString(" obl=0 oll=0 omem=0")
	b.WriteString(" tot-mem=" + strconv.FormatInt(total, 10))
}
