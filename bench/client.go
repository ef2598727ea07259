package bench

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"kvs/resp"
)

// One benchClient is one connection and everything its hot path touches:
// the next request is encoded straight into a bufio.Writer from prebuilt
// pieces and a reused digit buffer, replies are parsed in place in the
// bufio.Reader's buffer (resp.SkipReply), and latencies go into
// preallocated histograms, so a request allocates nothing
// (TestBenchClientAllocs holds it to that).

// opKind is a request's command; it indexes benchClient.stats.
type opKind int

const (
	opSet opKind = iota
	opGet
	numOpKinds
)

// Histogram range: latencies are recorded in microseconds, from 1µs to an
// hour (longer ones are clamped), to three significant digits, as memtier
// does.
const (
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigFigs   = 3
)

// opStats are one client's counts for one command. Only the client's own
// goroutine touches them while it runs.
type opStats struct {
	hist               *hdrhistogram.Histogram // latency, µs
	ops, hits, misses  int64                   // replies other than errors; GET nil is a miss
	errors             int64                   // error replies
	latNs              int64                   // sum of latencies, for the exact average
	txBytes, rxBytes   int64                   // request and reply bytes
	minLatNs, maxLatNs int64
	hasLat             bool
}

func (s *opStats) reset() {
	h := s.hist
	h.Reset()
	*s = opStats{hist: h}
}

// liveCounters are read once a second by the progress line while the
// client runs, hence atomic. They are padded so that two clients' counters
// never share a cache line.
type liveCounters struct {
	ops, latNs, bytes atomic.Int64
	_                 [40]byte
}

// benchClient is one connection's workload and measurements.
type benchClient struct {
	cfg  *benchConfig
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	rng  *rand.Rand
	base time.Time // latencies are differences of time.Since(base)

	// The workload: prefilling writes keys [nextKey[opSet], prefillEnd);
	// otherwise remaining requests are left (-1: until stopped), cycle is
	// the position in the SET:GET cycle and nextKey the sequential pattern's
	// next key per command.
	prefilling bool
	prefillEnd uint64
	depth      int
	remaining  int64
	cycle      int
	nextKey    [numOpKinds]uint64

	// The requests in flight, oldest first, in a ring of depth slots.
	inflightKind []opKind
	inflightSent []int64
	head, n      int

	stats    [numOpKinds]opStats
	live     liveCounters
	connErr  error  // why the connection stopped early; nil after a clean end
	firstErr string // text of the first error reply or connection error

	// Prebuilt request pieces and reused buffers for the key's digits and
	// its length's.
	setHead, getHead, keyPrefix, value []byte
	digits, lenDigits                  []byte
}

const benchBufSize = 16 << 10

func newBenchClient(cfg *benchConfig, conn net.Conn, seed uint64) *benchClient {
	c := &benchClient{
		cfg:       cfg,
		conn:      conn,
		r:         bufio.NewReaderSize(conn, benchBufSize),
		w:         bufio.NewWriterSize(conn, benchBufSize),
		rng:       rand.New(rand.NewPCG(seed, 0x6b7673)),
		base:      time.Now(),
		setHead:   []byte("*3\r\n$3\r\nSET\r\n"),
		getHead:   []byte("*2\r\n$3\r\nGET\r\n"),
		keyPrefix: []byte(cfg.KeyPrefix),
		value:     requestValue(cfg.DataSize),
		digits:    make([]byte, 0, 24),
		lenDigits: make([]byte, 0, 24),
	}
	depth := max(cfg.Pipeline, prefillDepth)
	c.inflightKind = make([]opKind, depth)
	c.inflightSent = make([]int64, depth)
	for k := range c.stats {
		c.stats[k].hist = hdrhistogram.New(1, histMaxMicros, histSigFigs)
	}
	return c
}

// requestValue returns a SET's whole value argument, "$size\r\n...\r\n",
// with printable bytes as memtier sends.
func requestValue(size int) []byte {
	b := fmt.Appendf(nil, "$%d\r\n", size)
	for i := 0; i < size; i++ {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, '\r', '\n')
}

// startPrefill sets the client to write keys [lo, hi) once each.
func (c *benchClient) startPrefill(lo, hi uint64) {
	c.prefilling, c.prefillEnd, c.depth = true, hi, prefillDepth
	c.nextKey[opSet] = lo
}

// startRun sets the client to the measured workload, forgetting what the
// prefill counted.
func (c *benchClient) startRun() {
	c.prefilling, c.depth = false, c.cfg.Pipeline
	c.remaining = -1
	if c.cfg.TestTime == 0 {
		c.remaining = int64(c.cfg.Requests)
	}
	c.cycle = 0
	c.nextKey = [numOpKinds]uint64{c.cfg.KeyMin, c.cfg.KeyMin}
	for k := range c.stats {
		c.stats[k].reset()
	}
	c.live.ops.Store(0)
	c.live.latNs.Store(0)
	c.live.bytes.Store(0)
}

func (c *benchClient) close() { c.conn.Close() }

// errorCount is the number of error replies plus one for a connection that
// failed.
func (c *benchClient) errorCount() int64 {
	var n int64
	for k := range c.stats {
		n += c.stats[k].errors
	}
	if c.connErr != nil {
		n++
	}
	return n
}

// run is the client's loop: keep depth requests in flight until the
// workload is done or stopping is set, then read the replies still in
// flight. Writes are flushed only when no reply is left in the read buffer,
// so every reply that arrived together is answered by one write.
func (c *benchClient) run(stopping *atomic.Bool) {
	for {
		for c.n < c.depth && !stopping.Load() && c.issue() {
		}
		if c.n == 0 {
			if err := c.w.Flush(); err != nil {
				c.fail(err)
			}
			return
		}
		if c.r.Buffered() == 0 {
			if err := c.w.Flush(); err != nil {
				c.fail(err)
				return
			}
		}
		if err := c.complete(); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *benchClient) fail(err error) {
	c.connErr = err
	if c.firstErr == "" {
		c.firstErr = err.Error()
	}
}

// next returns the next request's command and key, or false when the
// workload has no more.
func (c *benchClient) next() (opKind, uint64, bool) {
	if c.prefilling {
		k := c.nextKey[opSet]
		if k >= c.prefillEnd {
			return 0, 0, false
		}
		c.nextKey[opSet] = k + 1
		return opSet, k, true
	}
	if c.remaining == 0 {
		return 0, 0, false
	}
	if c.remaining > 0 {
		c.remaining--
	}
	kind := opGet
	if c.cycle < c.cfg.SetRatio {
		kind = opSet
	}
	if c.cycle++; c.cycle == c.cfg.SetRatio+c.cfg.GetRatio {
		c.cycle = 0
	}
	return kind, c.key(kind), true
}

// key returns the next key index for kind under its pattern.
func (c *benchClient) key(kind opKind) uint64 {
	pattern := c.cfg.GetPattern
	if kind == opSet {
		pattern = c.cfg.SetPattern
	}
	lo, hi := c.cfg.KeyMin, c.cfg.KeyMax
	if pattern == patternRandom {
		if span := hi - lo + 1; span != 0 {
			return lo + c.rng.Uint64N(span)
		}
		return c.rng.Uint64() // the whole uint64 range
	}
	k := c.nextKey[kind]
	if k >= hi {
		c.nextKey[kind] = lo
	} else {
		c.nextKey[kind] = k + 1
	}
	return k
}

// issue writes the next request to the buffer and records it in flight.
func (c *benchClient) issue() bool {
	kind, key, ok := c.next()
	if !ok {
		return false
	}
	c.digits = strconv.AppendUint(c.digits[:0], key, 10)
	var tx int
	if kind == opSet {
		tx = c.write(c.setHead) + c.writeKey() + c.write(c.value)
	} else {
		tx = c.write(c.getHead) + c.writeKey()
	}
	c.stats[kind].txBytes += int64(tx)
	c.live.bytes.Add(int64(tx))
	i := (c.head + c.n) % len(c.inflightKind)
	c.inflightKind[i], c.inflightSent[i] = kind, int64(time.Since(c.base))
	c.n++
	return true
}

func (c *benchClient) write(b []byte) int {
	c.w.Write(b) // a write error is sticky and surfaces at Flush
	return len(b)
}

// writeKey writes "$len\r\nPREFIXdigits\r\n".
func (c *benchClient) writeKey() int {
	n := len(c.keyPrefix) + len(c.digits)
	c.w.WriteByte('$')
	c.lenDigits = strconv.AppendInt(c.lenDigits[:0], int64(n), 10)
	l := c.lenDigits
	c.w.Write(l)
	c.w.WriteString("\r\n")
	c.w.Write(c.keyPrefix)
	c.w.Write(c.digits)
	c.w.WriteString("\r\n")
	return 1 + len(l) + 2 + n + 2
}

// complete reads the reply to the oldest request in flight and records it.
func (c *benchClient) complete() error {
	ri, err := resp.SkipReply(c.r, resp.Limits{})
	if err != nil {
		return fmt.Errorf("bench: reading reply: %w", err)
	}
	kind, sent := c.inflightKind[c.head], c.inflightSent[c.head]
	c.head = (c.head + 1) % len(c.inflightKind)
	c.n--
	lat := int64(time.Since(c.base)) - sent
	s := &c.stats[kind]
	s.rxBytes += int64(ri.Size)
	c.live.bytes.Add(int64(ri.Size))
	if ri.IsError() {
		s.errors++
		if c.firstErr == "" {
			c.firstErr = string(ri.Text)
		}
		return nil
	}
	s.ops++
	if kind == opGet {
		if ri.Null {
			s.misses++
		} else {
			s.hits++
		}
	}
	s.latNs += lat
	if !s.hasLat || lat < s.minLatNs {
		s.minLatNs = lat
	}
	if lat > s.maxLatNs {
		s.maxLatNs = lat
	}
	s.hasLat = true
	s.hist.RecordValue(min(max((lat+500)/1000, 1), histMaxMicros))
	c.live.ops.Add(1)
	c.live.latNs.Add(lat)
	return nil
}
