package server

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Used memory: what INFO memory's used_memory reports and what maxmemory,
// eviction and the OOM error are held to. Redis counts the bytes its
// allocator has handed out and not taken back, so memory a client lets go
// stops counting at once. Go's heap holds what was let go until a
// collection finds it; the collector may not run for minutes when nothing
// allocates, and until then "heap in use" counts garbage. kvs therefore
// adds up three parts:
//
//   - the live heap as of the last collection (runtime/metrics
//     /gc/heap/live:bytes): everything the process held then, and no
//     garbage;
//   - what the store's data grew or shrank by since (fsm.Store.DataBytes,
//     moved by every write and eviction);
//   - what the clients' read buffers (the query buffers) grew or shrank by
//     since, counted exactly by their resp.Readers as they allocate, grow,
//     drop and release them.
//
// Data and read buffers, the two parts that clients make large, so follow
// writes and disconnections at once, as Redis's counters do; the rest
// (output buffers, scripts, Raft's log cache) is as of the last
// collection.
//
// A sample of all three must be taken as close to the collection as can
// be: the data counted in the live heap is the data as the collection
// found it, and keys deleted between the collection and the sample would
// be counted twice over (in the live heap, and no longer in the change
// since), until the next collection, which an idle server may not run for
// minutes; "SET after DEL" would be refused with OOM. So the sample is
// taken by a finalizer that the runtime runs right after each collection
// (gcSentinel). The cron loop samples itself only before the first
// collection, and when the finalizer has fallen behind for a second. The figure counts on the write path only an
// atomic add when a read buffer changes size (rarely: it grows for a large
// request and shrinks when idle) and the loads of the OOM check.
//
// Garbage left in the live part: buffers that were live at the last
// collection and are gone since. For read buffers the correction above
// takes them out. Output set aside for a client closed over its output
// buffer limit is not counted as it is built, so its bytes are noted when
// it is dropped (unaccounted); until a collection has run, the evictor
// does not count them as used, so no key is evicted for them. Whenever
// large buffers let go add up to largeRelease and a quarter of the live
// heap, the cron loop runs a collection and returns the freed pages to the
// OS (debug.FreeOSMemory), at most once per collectInterval, so that RSS
// follows too and the next sample is clean. The quarter keeps a workload
// of large values, whose connections let go of large buffers all the time,
// from paying a collection of a large heap every second: it collects no
// more often than Go's own pacing would.

// largeBuffer is the size from which a buffer let go is noted as freed.
const largeBuffer = 1 << 20

// collectInterval is the least time between two collections kvs forces.
const collectInterval = time.Second

// memGauge computes used memory; see the file comment.
type memGauge struct {
	// clients is the bytes the clients' read buffers hold now.
	clients atomic.Int64
	// freed is the bytes of large buffers let go since the last forced
	// collection; unaccounted is the part of them the figure did not
	// take out when they went (see the file comment).
	freed       atomic.Int64
	unaccounted atomic.Int64
	// unaccountedGC is the collections completed when unaccounted last
	// grew. The next one may have begun before the bytes went, and count
	// them as live; the one after began later and does not.
	unaccountedGC atomic.Uint64
	// cur is the latest sample; nil until the first.
	cur atomic.Pointer[memSample]
	// startup is used memory when the server was made (INFO's
	// used_memory_startup).
	startup atomic.Int64

	// watching is set while a gcSentinel samples after each collection.
	watching atomic.Bool

	mu         sync.Mutex // serialises sampling and collect; guards the fields below
	samples    []metrics.Sample
	lastForced time.Time
	// behind counts the cron ticks that saw a collection the finalizer
	// has not sampled yet.
	behind int
}

// behindTicks is how many cron ticks refresh waits for the finalizer's
// sample of a collection before taking one itself.
const behindTicks = 10

// memSample is the live heap after one collection, with the data and
// read-buffer bytes taken at the same time. Immutable.
type memSample struct {
	cycles  uint64
	live    int64
	data    int64
	clients int64
}

// refresh is the cron loop's, every tick: it samples before the first
// collection (the heap in use, so that what the process allocates as it
// starts counts), and when the finalizer has not sampled the latest
// collection for behindTicks ticks (its goroutine is shared with every
// other finalizer in the process).
func (g *memGauge) refresh(data func() int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cycles, live := g.readLocked()
	cur := g.cur.Load()
	switch {
	case cur != nil && cur.cycles == cycles && live != 0:
		g.behind = 0
		return
	case cur != nil && live != 0 && cur.live != 0 && g.watching.Load():
		if g.behind++; g.behind < behindTicks {
			return
		}
	}
	if live == 0 {
		// No collection yet: the heap in use now.
		live = int64(uint64Sample(g.samples[2]))
	}
	g.storeLocked(cycles, live, data)
}

// afterCollection is the finalizer's: it samples the collection that has
// just run. When a refresh or a forced collection holds the gauge, that
// one samples instead.
func (g *memGauge) afterCollection(data func() int64) {
	if !g.mu.TryLock() {
		return
	}
	defer g.mu.Unlock()
	if cycles, live := g.readLocked(); live != 0 {
		if cur := g.cur.Load(); cur == nil || cur.live == 0 || cycles > cur.cycles {
			g.storeLocked(cycles, live, data)
		}
	}
}

// readLocked reads the collections completed and the live heap of the
// last one (0 before the first).
func (g *memGauge) readLocked() (cycles uint64, live int64) {
	if g.samples == nil {
		g.samples = []metrics.Sample{
			{Name: "/gc/cycles/total:gc-cycles"},
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
		}
	}
	metrics.Read(g.samples)
	return uint64Sample(g.samples[0]), int64(uint64Sample(g.samples[1]))
}

func (g *memGauge) storeLocked(cycles uint64, live int64, data func() int64) {
	g.behind = 0
	g.cur.Store(&memSample{cycles: cycles, live: live, data: data(), clients: g.clients.Load()})
	if cycles >= g.unaccountedGC.Load()+2 {
		// A collection began after the unaccounted buffers went: they
		// are not in this sample's live part.
		g.unaccounted.Store(0)
	}
}

// gcSentinel is an object nothing refers to, whose finalizer the runtime
// runs once the next collection has found it unreachable: it arms a new
// sentinel and samples that collection, until the server stops. The
// sample misses by what is deleted while the collection marks and before
// the finalizer runs, milliseconds rather than a cron tick. A sentinel
// armed while a collection marks outlives it; the next collection is
// sampled, and the cron loop's refresh covers a long gap.
type gcSentinel struct {
	g    *memGauge
	data func() int64
}

// watch starts sampling after every collection; unwatch stops it.
func (g *memGauge) watch(data func() int64) {
	g.watching.Store(true)
	armSentinel(g, data)
}

func (g *memGauge) unwatch() { g.watching.Store(false) }

func armSentinel(g *memGauge, data func() int64) {
	runtime.SetFinalizer(&gcSentinel{g: g, data: data}, func(s *gcSentinel) {
		if !s.g.watching.Load() {
			return
		}
		armSentinel(s.g, s.data)
		s.g.afterCollection(s.data)
	})
}

// used is the figure as of now.
func (g *memGauge) used(data func() int64) int64 {
	cur := g.cur.Load()
	if cur == nil {
		g.refresh(data)
		cur = g.cur.Load()
	}
	return max(0, cur.live+data()-cur.data+g.clients.Load()-cur.clients)
}

// noteFreed records that a buffer of n bytes was let go; accounted says
// whether the figure took it out already.
func (g *memGauge) noteFreed(n int, accounted bool) {
	if n < largeBuffer {
		return
	}
	g.freed.Add(int64(n))
	if !accounted {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		g.unaccountedGC.Store(uint64Sample(s[0]))
		g.unaccounted.Add(int64(n))
	}
}

// collect runs a collection, returns the freed pages to the OS and takes
// a new sample, unless it did so less than collectInterval ago. It
// reports whether it ran.
func (g *memGauge) collect(data func() int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.lastForced) < collectInterval {
		return false
	}
	g.collectLocked(data)
	return true
}

// purge is collect without its interval: MEMORY PURGE.
func (g *memGauge) purge(data func() int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.collectLocked(data)
}

func (g *memGauge) collectLocked(data func() int64) {
	g.freed.Store(0)
	// What was let go before the collection began is not in its live
	// heap.
	gone := g.unaccounted.Load()
	debug.FreeOSMemory()
	g.unaccounted.Add(-gone)
	g.lastForced = time.Now()
	cycles, live := g.readLocked()
	g.storeLocked(cycles, live, data)
}

func uint64Sample(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// runMemoryPurge answers MEMORY PURGE, which in Redis has the allocator
// release dirty pages: a collection, the freed pages returned to the OS,
// and used memory sampled anew. It runs on the connection's loop or
// goroutine, as Redis runs it on its one thread.
func runMemoryPurge(c *client) {
	c.s.mem.purge(c.s.dataBytes)
	c.out = appendStatus(c.out, "OK")
}

// usedMemory is INFO's used_memory and what maxmemory is held to.
func (s *Server) usedMemory() int64 { return s.mem.used(s.dataBytes) }

// accountReadBuffer is every client's resp.Reader buffer account.
func (s *Server) accountReadBuffer(delta int) {
	s.mem.clients.Add(int64(delta))
	if delta < 0 {
		s.mem.noteFreed(-delta, true)
	}
}

// collectFreed is the cron loop's: once large buffers let go add up to
// largeRelease and a quarter of the live heap, it collects, so used
// memory's sample is clean and RSS falls as soon as the memory is free
// rather than minutes later.
func (s *Server) collectFreed() {
	freed := s.mem.freed.Load()
	if freed < largeRelease {
		return
	}
	if cur := s.mem.cur.Load(); cur != nil && freed < cur.live/4 {
		return
	}
	s.mem.collect(s.dataBytes)
}
