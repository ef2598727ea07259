package server

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"kvs/fsm"
	"kvs/resp"
)

// Pub/sub: subscriptions are per node and per connection, as in Redis;
// nothing of them is replicated or written to a log.
//
// The registry (pubsubRegistry) maps channels, patterns and shard channels
// to the clients subscribed. A publisher (a connection on any event loop or
// goroutine, a peer node's KVS.PUBLISH, the store's keyspace-notification
// hook) holds the registry's read lock while it appends the message to each
// receiver's pushState; SUBSCRIBE and friends hold its write lock while they
// change the registry and queue their replies, so every message published
// after a SUBSCRIBE's reply is queued comes after that reply, and every one
// published before an UNSUBSCRIBE's reply comes before it, as in Redis.
// Lock order: registry, then a pushState's mu, then a loop's mu.
//
// A subscriber's output goes through its pushState. On an event loop the
// loop owns the socket: publishers append to pushState.buf and hand the
// client to its loop (loop.pushReady), which moves the bytes into c.out and
// writes them with the round's replies. A connection with a goroutine of its
// own is blocked reading its next request, so its first SUBSCRIBE starts a
// writer goroutine (owned by the connection's goroutine, which stops and
// waits for it); from then on the connection's replies too go through
// pushState.buf, so replies and messages keep one order on the socket.
//
// client-output-buffer-limit pubsub bounds what a subscriber may have
// pending (queued and not yet written): past the hard limit, or past the
// soft limit for soft-seconds, the publisher marks it killed, drops what is
// queued and has it closed, as Redis closes such a client, so a subscriber
// that does not read cannot make the node's memory grow without bound.

// pubsubRegistry is the node's subscriptions.
type pubsubRegistry struct {
	mu       sync.RWMutex // guards the maps
	channels map[string]map[*client]struct{}
	patterns map[string]map[*client]struct{}
	shard    map[string]map[*client]struct{}

	// subscribed is the number of channel and pattern subscriptions, for
	// the keyspace-notification switch (notify.go); changed under mu.
	subscribed atomic.Int64
}

// subKind is one of the three namespaces.
type subKind uint8

const (
	subChannel subKind = iota
	subPattern
	subShard
)

// subNames are the reply kinds per namespace: subscribe, unsubscribe.
var subNames = [3][2]string{
	subChannel: {"subscribe", "unsubscribe"},
	subPattern: {"psubscribe", "punsubscribe"},
	subShard:   {"ssubscribe", "sunsubscribe"},
}

func (r *pubsubRegistry) table(k subKind) *map[string]map[*client]struct{} {
	switch k {
	case subPattern:
		return &r.patterns
	case subShard:
		return &r.shard
	}
	return &r.channels
}

// orderedSet is a client's subscriptions of one kind, remembering the order
// they were made in, which (UN)SUBSCRIBE without arguments replies in.
type orderedSet struct {
	m   map[string]uint64
	seq uint64
}

func (o *orderedSet) add(s string) bool {
	if _, ok := o.m[s]; ok {
		return false
	}
	if o.m == nil {
		o.m = make(map[string]uint64)
	}
	o.seq++
	o.m[s] = o.seq
	return true
}

func (o *orderedSet) remove(s string) bool {
	if _, ok := o.m[s]; !ok {
		return false
	}
	delete(o.m, s)
	return true
}

func (o *orderedSet) sorted() []string {
	out := make([]string, 0, len(o.m))
	for s := range o.m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b string) int { return int(o.m[a]) - int(o.m[b]) })
	return out
}

// pushState is a subscribed client's subscriptions and pending output.
type pushState struct {
	// The client's subscriptions, changed by its own connection with the
	// registry's write lock held, read by it without.
	subs [3]orderedSet
	// proto is the client's protocol, which its messages are framed in;
	// written with the registry's write lock held (setProto), read by
	// publishers under its read lock.
	proto int

	mu sync.Mutex // guards the fields below
	// buf holds messages not yet handed to the socket's writer (and, for
	// a connection with a goroutine, its replies). inflight counts the
	// bytes the writer took and has not written yet.
	buf      []byte
	spare    []byte
	inflight int
	// softSince is when pending output first passed the soft limit (Unix
	// ns), 0 while below it.
	softSince int64
	killed    bool // over the limit: dropped, being closed
	queued    bool // handed to the loop (loop.pushReady), not yet taken

	// A connection with a goroutine of its own: its writer's signals.
	wake chan struct{} // capacity 1: buf has bytes
	stop chan struct{} // closed: write what is left and return
	done chan struct{} // closed by the writer when it returns
}

// counts are Redis's subscription counts in (un)subscribe replies: channels
// and patterns together, shard channels on their own.
func (ps *pushState) count(k subKind) int {
	if k == subShard {
		return len(ps.subs[subShard].m)
	}
	return len(ps.subs[subChannel].m) + len(ps.subs[subPattern].m)
}

func (ps *pushState) total() int {
	return len(ps.subs[0].m) + len(ps.subs[1].m) + len(ps.subs[2].m)
}

// subscribedMode reports whether c is in RESP2's subscribed mode, where only
// the pub/sub commands, PING, QUIT and RESET may run.
func (c *client) subscribedMode() bool {
	return c.proto == 2 && c.ps != nil && c.ps.total() > 0
}

// outputLimit is client-output-buffer-limit for one class: hard and soft
// are bytes (0: none), softSeconds how long the soft limit may be exceeded.
type outputLimit struct {
	hard, soft, softSeconds int64
}

// defaultPubsubLimit is Redis's default for the pubsub class.
var defaultPubsubLimit = outputLimit{hard: 32 << 20, soft: 8 << 20, softSeconds: 60}

// over reports whether pending bytes break l at now (Unix ns), updating
// *softSince: when pending first reached the soft limit, 0 while under it.
func (l *outputLimit) over(softSince *int64, pending int, now func() int64) bool {
	if l.hard > 0 && int64(pending) >= l.hard {
		return true
	}
	if l.soft == 0 || int64(pending) < l.soft {
		*softSince = 0
		return false
	}
	t := now()
	if *softSince == 0 {
		*softSince = t
		return false
	}
	return t-*softSince > l.softSeconds*int64(time.Second)
}

// setProto switches c's protocol (HELLO, RESET); a subscriber's next
// messages are framed in the new one.
func (c *client) setProto(proto int) {
	c.proto = proto
	c.protoSeen.Store(int32(proto))
	if c.ps != nil {
		c.s.pubsub.mu.Lock()
		c.ps.proto = proto
		c.s.pubsub.mu.Unlock()
	}
}

func unixNanoNow() int64 { return time.Now().UnixNano() }

// ensurePush gives c a pushState at its first subscription; a connection
// with a goroutine of its own also gets its writer.
func (c *client) ensurePush() *pushState {
	if c.ps != nil {
		return c.ps
	}
	ps := &pushState{}
	if c.fd < 0 {
		ps.wake = make(chan struct{}, 1)
		ps.stop = make(chan struct{})
		ps.done = make(chan struct{})
		go c.pushWriter(ps)
	}
	c.ps = ps
	c.s.trk.addReceiver(c)
	return ps
}

// mergeOutput puts c.out and the messages queued for c in one order: on a
// loop the messages join c.out, otherwise c.out joins the messages for the
// writer. The caller holds ps.mu.
func (c *client) mergeOutputLocked(ps *pushState) {
	if c.fd >= 0 {
		if len(ps.buf) > 0 {
			c.out = append(c.out, ps.buf...)
			ps.buf = ps.buf[:0]
			ps.inflight = c.pendingOut()
		}
		return
	}
	if len(c.out) > 0 {
		ps.buf = append(ps.buf, c.out...)
		c.out = c.out[:0]
		select {
		case ps.wake <- struct{}{}:
		default:
		}
	}
}

// mergeOutput is mergeOutputLocked taking ps.mu. While EXEC runs a
// command for its reply (runCaptured), a connection on its own goroutine
// keeps its output in c.out, since that reply is an element of EXEC's:
// the messages published meanwhile are written just before EXEC's reply,
// where on a loop they join c.out, inside EXEC's reply as in Redis.
func (c *client) mergeOutput() {
	if c.capturing && c.fd < 0 {
		return
	}
	ps := c.ps
	ps.mu.Lock()
	c.mergeOutputLocked(ps)
	ps.mu.Unlock()
}

// flushPush is flush for a connection with a goroutine and a pushState: its
// replies go to the writer. It fails once the client was killed.
func (c *client) flushPush() error {
	ps := c.ps
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.killed {
		c.out = c.out[:0]
		return errOutputLimit
	}
	c.mergeOutputLocked(ps)
	return nil
}

// pushWriter writes a goroutine-served subscriber's output; it returns when
// told to stop (after writing what is left, within pushDrainTimeout) or
// when a write fails.
func (c *client) pushWriter(ps *pushState) {
	defer close(ps.done)
	for {
		stopping := false
		select {
		case <-ps.wake:
		case <-ps.stop:
			stopping = true
			c.nc.SetWriteDeadline(time.Now().Add(pushDrainTimeout))
		}
		ps.mu.Lock()
		if ps.killed {
			ps.mu.Unlock()
			return
		}
		b := ps.buf
		ps.buf = ps.spare[:0]
		ps.spare = nil
		ps.inflight = len(b)
		ps.mu.Unlock()
		if len(b) > 0 {
			if _, err := c.nc.Write(b); err != nil {
				c.nc.Close() // the reading goroutine sees it and ends
				return
			}
		}
		ps.mu.Lock()
		ps.inflight = 0
		if cap(b) <= 1<<20 {
			ps.spare = b[:0]
		}
		ps.mu.Unlock()
		if stopping {
			return
		}
	}
}

// pushDrainTimeout bounds how long a closing connection's writer may take
// to write what is left (QUIT's reply, the last messages).
const pushDrainTimeout = 5 * time.Second

// leavePubsub takes c out of every subscription (it is closing) and, for a
// connection with a goroutine, stops its writer and waits for it.
func (c *client) leavePubsub() {
	c.leaveTracking()
	ps := c.ps
	if ps == nil {
		return
	}
	c.s.pubsub.removeAll(c)
	c.s.updateNotify()
	if ps.stop != nil {
		select {
		case <-ps.stop:
		default:
			close(ps.stop)
		}
		<-ps.done
	}
}

// removeAll drops every subscription of c, without replies.
func (r *pubsubRegistry) removeAll(c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range c.ps.subs {
		for s := range c.ps.subs[k].m {
			r.removeLocked(subKind(k), s, c)
		}
		c.ps.subs[k] = orderedSet{}
	}
}

func (r *pubsubRegistry) addLocked(k subKind, name string, c *client) bool {
	if !c.ps.subs[k].add(name) {
		return false
	}
	t := r.table(k)
	if *t == nil {
		*t = make(map[string]map[*client]struct{})
	}
	set := (*t)[name]
	if set == nil {
		set = make(map[*client]struct{})
		(*t)[name] = set
	}
	set[c] = struct{}{}
	c.subCounts[k].Add(1)
	if k != subShard {
		r.subscribed.Add(1)
	}
	return true
}

func (r *pubsubRegistry) removeLocked(k subKind, name string, c *client) {
	t := *r.table(k)
	set := t[name]
	if _, ok := set[c]; !ok {
		return
	}
	delete(set, c)
	c.subCounts[k].Add(-1)
	if len(set) == 0 {
		delete(t, name)
	}
	if k != subShard {
		r.subscribed.Add(-1)
	}
}

// message is one published message, framed once per protocol on first use.
type message struct {
	kind    string // "message" or "smessage"
	channel []byte
	payload []byte
	framed  [2][]byte // RESP2, RESP3
}

func (m *message) frame(proto int) []byte {
	i := 0
	if proto == 3 {
		i = 1
	}
	if m.framed[i] == nil {
		m.framed[i] = appendPushHeader(nil, 3, proto)
		m.framed[i] = appendBulkString(m.framed[i], m.kind)
		m.framed[i] = appendBulk(m.framed[i], m.channel)
		m.framed[i] = appendBulk(m.framed[i], m.payload)
	}
	return m.framed[i]
}

// appendPushHeader begins a pub/sub frame of n elements: a push in RESP3,
// an array in RESP2.
func appendPushHeader(b []byte, n, proto int) []byte {
	return resp.AppendPushLen(b, n, proto)
}

// publish delivers a message to this node's subscribers of channel (and, for
// a plain channel, of the patterns that match it) and returns how many
// receivers there were, as PUBLISH counts them.
func (s *Server) publish(shard bool, channel, payload []byte) int {
	r := &s.pubsub
	m := message{kind: "message", channel: channel, payload: payload}
	if shard {
		m.kind = "smessage"
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	if shard {
		for c := range r.shard[string(channel)] {
			s.deliver(c, m.frame(c.ps.proto))
			n++
		}
		return n
	}
	for c := range r.channels[string(channel)] {
		s.deliver(c, m.frame(c.ps.proto))
		n++
	}
	if len(r.patterns) == 0 {
		return n
	}
	var framed [2][]byte
	for pat, set := range r.patterns {
		if !fsm.MatchGlob(pat, string(channel)) {
			continue
		}
		framed = [2][]byte{}
		for c := range set {
			i := 0
			if c.ps.proto == 3 {
				i = 1
			}
			if framed[i] == nil {
				b := appendPushHeader(nil, 4, c.ps.proto)
				b = appendBulkString(b, "pmessage")
				b = appendBulkString(b, pat)
				b = appendBulk(b, channel)
				framed[i] = appendBulk(b, payload)
			}
			s.deliver(c, framed[i])
			n++
		}
	}
	return n
}

// deliver queues frame for c and tells c's owner; the caller holds the
// registry's read lock, so c is still subscribed and not yet closed.
func (s *Server) deliver(c *client, frame []byte) {
	ps := c.ps
	ps.mu.Lock()
	if ps.killed {
		ps.mu.Unlock()
		return
	}
	ps.buf = append(ps.buf, frame...)
	limit := s.pubsubLimit.Load()
	if !c.subscribed() {
		// A tracking client's invalidations: its class is normal.
		limit = s.normalLimit.Load()
	}
	kill := limit != nil && limit.over(&ps.softSince, len(ps.buf)+ps.inflight, unixNanoNow)
	if kill {
		ps.killed = true
		ps.buf, ps.spare = nil, nil
		s.stats.outputLimitKills.Add(1)
	}
	queued := ps.queued
	if c.fd >= 0 {
		ps.queued = true
	}
	ps.mu.Unlock()
	if kill {
		s.cfg.Logger.Warn("server: client closed for overcoming of output buffer limits",
			"client", c.addr, "id", c.id)
	}
	switch {
	case c.fd >= 0:
		if !queued || kill {
			c.lp.pushReady(c)
		}
	case kill:
		c.nc.Close()
	default:
		select {
		case ps.wake <- struct{}{}:
		default:
		}
	}
}

// errOutputLimit ends a connection killed for its output buffer.
var errOutputLimit = errorString("server: client output buffer limit reached")

type errorString string

func (e errorString) Error() string { return string(e) }
