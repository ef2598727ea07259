package fsm

import (
	"strconv"
)

// Consumer groups: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM,
// XAUTOCLAIM, and XINFO. Delivery and claim times are the entry's now,
// so every replica keeps the same PEL.

func init() {
	registerOp(OpXGroup, opSpec{name: "XGROUP", write: true, args: argsAtLeast(2), apply: applyXGroup, level: 4})
	registerOp(OpXReadGroup, opSpec{name: "XREADGROUP", write: true, args: argsAtLeast(1), apply: applyXReadGroup,
		flags: FlagStreamReady, keys: xreadKeys, level: 4})
	registerOp(OpXAck, opSpec{name: "XACK", write: true, args: argsAtLeast(2), apply: applyXAck, level: 4})
	registerOp(OpXPending, opSpec{name: "XPENDING", args: argsAtLeast(2), read: readXPending, level: 4})
	registerOp(OpXClaim, opSpec{name: "XCLAIM", write: true, args: argsAtLeast(4), apply: applyXClaim, level: 4})
	registerOp(OpXAutoClaim, opSpec{name: "XAUTOCLAIM", write: true, args: argsAtLeast(4), apply: applyXAutoClaim, level: 4})
	registerOp(OpXInfo, opSpec{name: "XINFO", args: argsAtLeast(2), read: readXInfo, level: 4})
	registerOp(OpXReadBlocked, opSpec{name: "XREAD", write: true, args: argsAtLeast(1), apply: applyXReadBlocked,
		flags: FlagStreamReady, keys: xreadKeys, level: 4})
}

// OpXReadBlocked is XREAD's try for a blocked client: XREAD run through
// the write path (it changes nothing), so that it sees the writes in the
// order the log has them.
const OpXReadBlocked = OpXInfo + 1

// FlagStreamReady marks the try of a client woken because a key it waits
// on was signalled (XREAD and XREADGROUP with BLOCK): a key that holds
// another type by then, or none, is passed over, as Redis serves a
// blocked client only from a stream, and a group destroyed meanwhile
// answers the error Redis gives its blocked readers.
const FlagStreamReady Flags = 1 << 0

func subcommandSyntaxError(cmd string, sub []byte) Reply {
	return ErrorReply("ERR unknown subcommand or wrong number of arguments for '" + string(sub) + "'. Try " + cmd + " HELP.")
}

func noGroupReply(key, group []byte) Reply {
	return ErrorReply("NOGROUP No such key '" + string(key) + "' or consumer group '" + string(group) + "'")
}

// streamGroupLookup looks up key's stream and its group: g is nil when
// either is missing or key holds another type, and e is then the answer
// (NOGROUP, or WRONGTYPE).
func (s *Store) streamGroupLookup(now int64, key, group []byte) (st *stream, it item, g *streamGroup, e Reply) {
	st, it, ok, wrong := s.streamLookup(now, key)
	if wrong {
		return nil, it, nil, replyWrongType
	}
	if ok {
		g, _ = st.group(group)
	}
	if g == nil {
		return st, it, nil, noGroupReply(key, group)
	}
	return st, it, g, Reply{}
}

// editStreamGroup is editStream, with the group of the (possibly cloned)
// stream.
func (s *Store) editStreamGroup(it *item, group []byte) (*stream, *streamGroup, int64) {
	st, before := s.editStream(it)
	g, _ := st.group(group)
	return st, g, before
}

// XGROUP: Args = key, subcommand, group, more (as after the key in Redis).
func applyXGroup(s *Store, now int64, c *Command) Reply {
	key, sub := c.Args[0], c.Args[1]
	argc := len(c.Args) + 1 // Redis's argc
	mkstream := false
	entriesRead := int64(-1)
	var st *stream
	var it item
	var ok bool
	var g *streamGroup
	if argc >= 4 {
		create, setid := eqFold(sub, "CREATE"), eqFold(sub, "SETID")
		for i := 4; i < len(c.Args); {
			switch {
			case create && eqFold(c.Args[i], "MKSTREAM"):
				mkstream = true
				i++
			case (create || setid) && eqFold(c.Args[i], "ENTRIESREAD") && i+1 < len(c.Args):
				v, good := parseLongLong(c.Args[i+1])
				if !good {
					return ErrorReply(ErrNotInteger)
				}
				if v < 0 && v != -1 {
					return ErrorReply("ERR value for ENTRIESREAD must be positive or -1")
				}
				entriesRead = v
				i += 2
			default:
				return subcommandSyntaxError("XGROUP", sub)
			}
		}
		var wrong bool
		st, it, ok, wrong = s.streamLookup(now, key)
		if wrong {
			return replyWrongType
		}
	}
	grp := []byte(nil)
	if len(c.Args) > 2 {
		grp = c.Args[2]
	}
	if argc >= 4 && !mkstream {
		if !ok {
			return ErrorReply("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
		}
		if g, _ = st.group(grp); g == nil && (eqFold(sub, "SETID") || eqFold(sub, "CREATECONSUMER") || eqFold(sub, "DELCONSUMER")) {
			return ErrorReply("NOGROUP No such consumer group '" + string(grp) + "' for key name '" + string(key) + "'")
		}
	}
	switch {
	case eqFold(sub, "CREATE") && argc >= 5 && argc <= 8:
		var id streamID
		if string(c.Args[3]) == "$" {
			if ok {
				id = st.lastID
			}
		} else {
			var good bool
			if id, _, good = parseStreamID(c.Args[3], 0, true, false); !good {
				return ErrorReply(ErrStreamID)
			}
		}
		var before int64
		if !ok {
			st = newStream()
		} else {
			st, before = s.editStream(&it)
		}
		if g, i := st.group(grp); g != nil {
			if !ok {
				// not reachable: a new stream has no groups
				return ErrorReply("BUSYGROUP Consumer Group name already exists")
			}
			s.endStreamEdit(it, st, before)
			return ErrorReply("BUSYGROUP Consumer Group name already exists")
		} else {
			ng := &streamGroup{name: string(grp), lastID: id, entriesRead: entriesRead, pel: newPEL()}
			st.groups = append(st.groups, nil)
			copy(st.groups[i+1:], st.groups[i:])
			st.groups[i] = ng
		}
		if !ok {
			st.recount()
			s.putLocked(s.newCollection(key, kindStream, nil, st, 0))
		} else {
			s.endStreamEdit(it, st, before)
		}
		s.notifyLocked(NotifyStream, "xgroup-create", key)
		return replyOK
	case eqFold(sub, "SETID") && (argc == 5 || argc == 7):
		var id streamID
		if string(c.Args[3]) == "$" {
			id = st.lastID
		} else {
			var good bool
			if id, _, good = parseStreamID(c.Args[3], 0, false, false); !good {
				return ErrorReply(ErrStreamID)
			}
		}
		st, g, before := s.editStreamGroup(&it, grp)
		g.lastID = id
		g.entriesRead = entriesRead
		s.endStreamEdit(it, st, before)
		s.notifyLocked(NotifyStream, "xgroup-setid", key)
		return replyOK
	case eqFold(sub, "DESTROY") && argc == 4:
		if g == nil {
			return replyZero
		}
		st, before := s.editStream(&it)
		_, i := st.group(grp)
		st.groups = append(st.groups[:i], st.groups[i+1:]...)
		s.endStreamEdit(it, st, before)
		s.notifyLocked(NotifyStream, "xgroup-destroy", key)
		s.signalReadyLocked(key)
		return replyOne
	case eqFold(sub, "CREATECONSUMER") && argc == 5:
		if cs, _ := g.consumer(c.Args[3]); cs != nil {
			return replyZero
		}
		st, g, before := s.editStreamGroup(&it, grp)
		g.createConsumer(c.Args[3], now)
		s.endStreamEdit(it, st, before)
		s.notifyLocked(NotifyStream, "xgroup-createconsumer", key)
		return replyOne
	case eqFold(sub, "DELCONSUMER") && argc == 5:
		cs, _ := g.consumer(c.Args[3])
		if cs == nil {
			return replyZero
		}
		st, g, before := s.editStreamGroup(&it, grp)
		cs, i := g.consumer(c.Args[3])
		pending := int64(cs.pel.Len())
		cs.pel.Scan(func(id streamID) bool {
			g.pel.Delete(streamNack{id: id})
			return true
		})
		g.consumers = append(g.consumers[:i], g.consumers[i+1:]...)
		s.endStreamEdit(it, st, before)
		s.notifyLocked(NotifyStream, "xgroup-delconsumer", key)
		return IntReply(pending)
	}
	return subcommandSyntaxError("XGROUP", sub)
}

// lookupConsumer is streamLookupConsumer with refresh, or
// streamCreateConsumer when there is none (announcing it).
func (s *Store) lookupConsumer(g *streamGroup, name, key []byte, now int64) *streamConsumer {
	if cs, _ := g.consumer(name); cs != nil {
		cs.seen = now
		return cs
	}
	s.notifyLocked(NotifyStream, "xgroup-createconsumer", key)
	return g.createConsumer(name, now)
}

// deliver is streamReplyWithRange for a group: the entries from start
// on, at most count (0: all), added to the consumer's PEL unless noack.
func (s *Store) deliver(st *stream, g *streamGroup, cs *streamConsumer, start streamID, count int64, noack bool, now int64) []Reply {
	out := []Reply{}
	var ids []streamID
	st.rangeFn(start, streamIDMax, false, func(e streamEntry) bool {
		out = append(out, entryReply(e))
		ids = append(ids, e.id)
		return count <= 0 || int64(len(out)) < count
	})
	for _, id := range ids {
		if id.cmp(g.lastID) > 0 {
			if g.entriesRead != -1 && !st.rangeHasTombstones(id, streamIDMax) {
				g.entriesRead++
			} else if st.entriesAdded != 0 {
				g.entriesRead = st.estimateDistance(id)
			}
			g.lastID = id
		}
		if noack {
			continue
		}
		if old, had := g.pel.Get(streamNack{id: id}); had {
			if oc, _ := g.consumer([]byte(old.consumer)); oc != nil {
				oc.pel.Delete(id)
			}
		}
		g.pel.Set(streamNack{id: id, time: now, count: 1, consumer: cs.name})
		cs.pel.Set(id)
	}
	return out
}

// deliverHistory is streamReplyWithRangeFromConsumerPEL.
func deliverHistory(st *stream, g *streamGroup, cs *streamConsumer, start streamID, count int64, now int64) []Reply {
	out := []Reply{}
	var ids []streamID
	cs.pel.Ascend(start, func(id streamID) bool {
		if count > 0 && int64(len(ids)) >= count {
			return false
		}
		ids = append(ids, id)
		return true
	})
	for _, id := range ids {
		e, ok := st.lookup(id)
		if !ok {
			out = append(out, Reply{Kind: ReplyArray, Array: []Reply{id.reply(), {Kind: ReplyNilArray}}})
			continue
		}
		out = append(out, entryReply(e))
		n, _ := g.pel.Get(streamNack{id: id})
		n.time = now
		n.count++
		g.pel.Set(n)
	}
	return out
}

func applyXReadGroup(s *Store, now int64, c *Command) Reply {
	a, e := parseXRead(c.Args, true)
	if e != "" {
		return ErrorReply(e)
	}
	keys := c.Args[a.streams : a.streams+a.nstreams]
	ids := make([]streamID, a.nstreams)
	ready := c.Flags&FlagStreamReady != 0
	for i, b := range c.Args[a.streams+a.nstreams:] {
		st, _, ok, wrong := s.streamLookup(now, keys[i])
		if ready && (wrong || !ok) {
			return ErrorReply("UNBLOCKED the stream key no longer exists")
		}
		if wrong {
			return replyWrongType
		}
		var g *streamGroup
		if ok {
			g, _ = st.group(a.group)
		}
		if g == nil && ready {
			return ErrorReply("NOGROUP the consumer group this client was blocked on no longer exists")
		}
		if g == nil {
			return ErrorReply("NOGROUP No such key '" + string(keys[i]) + "' or consumer group '" + string(a.group) + "' in XREADGROUP with GROUP option")
		}
		switch string(b) {
		case "$":
			return ErrorReply("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")
		case ">":
			ids[i] = streamIDMax
			continue
		}
		id, _, good := parseStreamID(b, 0, true, false)
		if !good {
			return ErrorReply(ErrStreamID)
		}
		ids[i] = id
	}
	var out []Reply
	for i, key := range keys {
		it, ok := s.liveLocked(key, now)
		if !ok {
			continue
		}
		st := it.obj.(*stream)
		g, _ := st.group(a.group)
		gt := ids[i]
		history := gt != streamIDMax
		if !history {
			if st.length == 0 || st.edgeID(false).cmp(g.lastID) <= 0 {
				continue
			}
			gt = g.lastID
		}
		st, before := s.editStream(&it)
		g, _ = st.group(a.group)
		start, _ := gt.incr()
		cs := s.lookupConsumer(g, a.consumer, key, now)
		var entries []Reply
		if history {
			entries = deliverHistory(st, g, cs, start, a.count, now)
		} else {
			entries = s.deliver(st, g, cs, start, a.count, a.noack, now)
		}
		s.endStreamEdit(it, st, before)
		out = append(out, Reply{Kind: ReplyArray, Array: []Reply{BulkReply(key), {Kind: ReplyArray, Array: entries}}})
	}
	if out == nil {
		return Reply{Kind: ReplyNilArray}
	}
	return Reply{Kind: ReplyKeyed, Array: out}
}

func applyXReadBlocked(s *Store, now int64, c *Command) Reply { return readXRead(s, now, c) }

// XACK key group id...
func applyXAck(s *Store, now int64, c *Command) Reply {
	st, it, ok, wrong := s.streamLookup(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	if !ok {
		return replyZero
	}
	if g, _ := st.group(c.Args[1]); g == nil {
		return replyZero
	}
	ids := make([]streamID, 0, len(c.Args)-2)
	for _, b := range c.Args[2:] {
		id, _, good := parseStreamID(b, 0, true, false)
		if !good {
			return ErrorReply(ErrStreamID)
		}
		ids = append(ids, id)
	}
	st, before := s.editStream(&it)
	g, _ := st.group(c.Args[1])
	n := int64(0)
	for _, id := range ids {
		if old, had := g.pel.Delete(streamNack{id: id}); had {
			if cs, _ := g.consumer([]byte(old.consumer)); cs != nil {
				cs.pel.Delete(id)
			}
			n++
		}
	}
	s.endStreamEdit(it, st, before)
	return IntReply(n)
}

// xpendingArgs are XPENDING's parsed arguments.
type xpendingArgs struct {
	justinfo       bool
	start, end     streamID
	count, minidle int64
	consumer       []byte
}

// parseXPending parses XPENDING's arguments, as Redis does before it
// looks the key up.
func parseXPending(args [][]byte) (a xpendingArgs, e string) {
	argc := len(args) + 1
	a.justinfo = argc == 3
	if argc != 3 && (argc < 6 || argc > 9) {
		return a, errSyntax
	}
	if argc >= 6 {
		si := 2
		if eqFold(args[2], "IDLE") {
			v, ok := parseLongLong(args[3])
			if !ok {
				return a, ErrNotInteger
			}
			a.minidle = v
			if argc < 8 {
				return a, errSyntax
			}
			si += 2
		}
		v, ok := parseLongLong(args[si+2])
		if !ok {
			return a, ErrNotInteger
		}
		a.count = max(v, 0)
		if a.start, ok = parseIntervalID(args[si], 0); !ok {
			return a, ErrStreamID
		}
		if len(args[si]) > 1 && args[si][0] == '(' {
			if a.start, ok = a.start.incr(); !ok {
				return a, "ERR invalid start ID for the interval"
			}
		}
		if a.end, ok = parseIntervalID(args[si+1], ^uint64(0)); !ok {
			return a, ErrStreamID
		}
		if len(args[si+1]) > 1 && args[si+1][0] == '(' {
			if a.end, ok = a.end.decr(); !ok {
				return a, "ERR invalid end ID for the interval"
			}
		}
		if si+3 < len(args) {
			a.consumer = args[si+3]
		}
	}
	return a, ""
}

// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
func readXPending(s *Store, now int64, c *Command) Reply {
	args := c.Args
	a, e := parseXPending(args)
	if e != "" {
		return ErrorReply(e)
	}
	justinfo, start, end, count, minidle, consumer := a.justinfo, a.start, a.end, a.count, a.minidle, a.consumer
	_, _, g, refusal := s.streamGroupLookup(now, args[0], args[1])
	if g == nil {
		return refusal
	}
	if justinfo {
		if g.pel.Len() == 0 {
			return Reply{Kind: ReplyArray, Array: []Reply{replyZero, replyNil, replyNil, {Kind: ReplyNilArray}}}
		}
		first, _ := g.pel.Min()
		last, _ := g.pel.Max()
		cons := []Reply{}
		for _, cs := range g.consumers {
			if cs.pel.Len() == 0 {
				continue
			}
			cons = append(cons, Reply{Kind: ReplyArray, Array: []Reply{BulkReply([]byte(cs.name)),
				BulkReply(strconv.AppendInt(nil, int64(cs.pel.Len()), 10))}})
		}
		return Reply{Kind: ReplyArray, Array: []Reply{IntReply(int64(g.pel.Len())), first.id.reply(), last.id.reply(),
			{Kind: ReplyArray, Array: cons}}}
	}
	out := []Reply{}
	emit := func(n streamNack) bool {
		if count == 0 || end.less(n.id) {
			return false
		}
		if minidle != 0 && now-n.time < minidle {
			return true
		}
		count--
		elapsed := max(now-n.time, 0)
		out = append(out, Reply{Kind: ReplyArray, Array: []Reply{n.id.reply(), BulkReply([]byte(n.consumer)),
			IntReply(elapsed), IntReply(n.count)}})
		return true
	}
	if consumer != nil {
		cs, _ := g.consumer(consumer)
		if cs == nil {
			return Reply{Kind: ReplyArray, Array: []Reply{}}
		}
		cs.pel.Ascend(start, func(id streamID) bool {
			n, _ := g.pel.Get(streamNack{id: id})
			return emit(n)
		})
	} else {
		g.pel.Ascend(streamNack{id: start}, emit)
	}
	return Reply{Kind: ReplyArray, Array: out}
}

// claimTo moves the nack of id in g to cs.
func claimTo(g *streamGroup, n streamNack, cs *streamConsumer) streamNack {
	if n.consumer != cs.name {
		if old, _ := g.consumer([]byte(n.consumer)); old != nil {
			old.pel.Delete(n.id)
		}
		n.consumer = cs.name
		cs.pel.Set(n.id)
	}
	return n
}

// dropNack removes the nack of id from g.
func dropNack(g *streamGroup, id streamID) {
	if old, had := g.pel.Delete(streamNack{id: id}); had {
		if cs, _ := g.consumer([]byte(old.consumer)); cs != nil {
			cs.pel.Delete(id)
		}
	}
}

// XCLAIM key group consumer min-idle-time id... [IDLE ms] [TIME ms]
// [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]
func applyXClaim(s *Store, now int64, c *Command) Reply {
	args := c.Args
	st, it, g, refusal := s.streamGroupLookup(now, args[0], args[1])
	if g == nil {
		return refusal
	}
	minidle, good := parseLongLong(args[3])
	if !good {
		return ErrorReply("ERR Invalid min-idle-time argument for XCLAIM")
	}
	minidle = max(minidle, 0)
	var ids []streamID
	j := 4
	for ; j < len(args); j++ {
		id, _, good := parseStreamID(args[j], 0, true, false)
		if !good {
			break
		}
		ids = append(ids, id)
	}
	retrycount, deliverytime := int64(-1), int64(-1)
	force, justid := false, false
	var lastID streamID
	for ; j < len(args); j++ {
		more := len(args) - 1 - j
		opt := args[j]
		switch {
		case eqFold(opt, "FORCE"):
			force = true
		case eqFold(opt, "JUSTID"):
			justid = true
		case eqFold(opt, "IDLE") && more > 0:
			j++
			v, good := parseLongLong(args[j])
			if !good {
				return ErrorReply("ERR Invalid IDLE option argument for XCLAIM")
			}
			deliverytime = now - v
		case eqFold(opt, "TIME") && more > 0:
			j++
			v, good := parseLongLong(args[j])
			if !good {
				return ErrorReply("ERR Invalid TIME option argument for XCLAIM")
			}
			deliverytime = v
		case eqFold(opt, "RETRYCOUNT") && more > 0:
			j++
			v, good := parseLongLong(args[j])
			if !good {
				return ErrorReply("ERR Invalid RETRYCOUNT option argument for XCLAIM")
			}
			retrycount = v
		case eqFold(opt, "LASTID") && more > 0:
			j++
			id, _, good := parseStreamID(args[j], 0, true, false)
			if !good {
				return ErrorReply(ErrStreamID)
			}
			lastID = id
		default:
			return ErrorReply("ERR Unrecognized XCLAIM option '" + string(opt) + "'")
		}
	}
	st, g, before := s.editStreamGroup(&it, args[1])
	if lastID.cmp(g.lastID) > 0 {
		g.lastID = lastID
	}
	if deliverytime != -1 {
		if deliverytime < 0 || deliverytime > now {
			deliverytime = now
		}
	} else {
		deliverytime = now
	}
	var cs *streamConsumer
	out := []Reply{}
	for _, id := range ids {
		n, had := g.pel.Get(streamNack{id: id})
		e, exists := st.lookup(id)
		if !exists {
			if had {
				dropNack(g, id)
			}
			continue
		}
		if force && !had {
			n, had = streamNack{id: id, time: now, count: 1}, true
		}
		if !had {
			continue
		}
		if n.consumer != "" && minidle != 0 && now-n.time < minidle {
			continue
		}
		if cs == nil {
			cs = s.lookupConsumer(g, args[2], args[0], now)
		}
		if n.consumer == "" {
			n.consumer = cs.name
			cs.pel.Set(id)
		}
		n = claimTo(g, n, cs)
		n.time = deliverytime
		if retrycount >= 0 {
			n.count = retrycount
		} else if !justid {
			n.count++
		}
		g.pel.Set(n)
		if justid {
			out = append(out, id.reply())
		} else {
			out = append(out, entryReply(e))
		}
	}
	s.endStreamEdit(it, st, before)
	return Reply{Kind: ReplyArray, Array: out}
}

// xautoclaimArgs are XAUTOCLAIM's parsed arguments.
type xautoclaimArgs struct {
	minidle, count int64
	start          streamID
	justid         bool
}

// parseXAutoClaim parses XAUTOCLAIM's arguments, as Redis does after it
// looked the key up and before it checks its type.
func parseXAutoClaim(args [][]byte) (a xautoclaimArgs, e string) {
	minidle, good := parseLongLong(args[3])
	if !good {
		return a, "ERR Invalid min-idle-time argument for XAUTOCLAIM"
	}
	a.minidle = max(minidle, 0)
	start, ok := parseIntervalID(args[4], 0)
	if !ok {
		return a, ErrStreamID
	}
	if len(args[4]) > 1 && args[4][0] == '(' {
		if start, ok = start.incr(); !ok {
			return a, "ERR invalid start ID for the interval"
		}
	}
	a.start, a.count = start, 100
	for j := 5; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case eqFold(args[j], "COUNT") && more > 0:
			v, good := parseLongLong(args[j+1])
			if !good || v < 1 || v > (1<<63-1)/16 {
				return a, "ERR COUNT must be > 0"
			}
			a.count = v
			j++
		case eqFold(args[j], "JUSTID"):
			a.justid = true
		default:
			return a, errSyntax
		}
	}
	return a, ""
}

// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
func applyXAutoClaim(s *Store, now int64, c *Command) Reply {
	args := c.Args
	a, e := parseXAutoClaim(args)
	if e != "" {
		return ErrorReply(e)
	}
	minidle, start, count, justid := a.minidle, a.start, a.count, a.justid
	st, it, g, refusal := s.streamGroupLookup(now, args[0], args[1])
	if g == nil {
		return refusal
	}
	st, g, before := s.editStreamGroup(&it, args[1])
	attempts := count * 10
	var nacks []streamNack
	g.pel.Ascend(streamNack{id: start}, func(n streamNack) bool {
		nacks = append(nacks, n)
		return int64(len(nacks)) <= attempts
	})
	var cs *streamConsumer
	out := []Reply{}
	deleted := []Reply{}
	i := 0
	for ; attempts > 0 && count > 0 && i < len(nacks); i++ {
		attempts--
		n := nacks[i]
		e, exists := st.lookup(n.id)
		if !exists {
			dropNack(g, n.id)
			deleted = append(deleted, n.id.reply())
			count--
			continue
		}
		if minidle != 0 && now-n.time < minidle {
			continue
		}
		if cs == nil {
			cs = s.lookupConsumer(g, args[2], args[0], now)
		}
		n = claimTo(g, n, cs)
		n.time = now
		if !justid {
			n.count++
		}
		g.pel.Set(n)
		if justid {
			out = append(out, n.id.reply())
		} else {
			out = append(out, entryReply(e))
		}
		count--
	}
	end := streamID{}
	if i < len(nacks) {
		end = nacks[i].id
	}
	s.endStreamEdit(it, st, before)
	return Reply{Kind: ReplyArray, Array: []Reply{end.reply(), {Kind: ReplyArray, Array: out}, {Kind: ReplyArray, Array: deleted}}}
}

// XINFO: Args = key, subcommand, more.
func readXInfo(s *Store, now int64, c *Command) Reply {
	key, sub := c.Args[0], c.Args[1]
	argc := len(c.Args) + 1
	st, _, ok, wrong := s.streamLookup(now, key)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return ErrorReply(ErrNoSuchKey)
	}
	bulk := func(s string) Reply { return BulkReply([]byte(s)) }
	switch {
	case eqFold(sub, "CONSUMERS") && argc == 4:
		g, _ := st.group(c.Args[2])
		if g == nil {
			return ErrorReply("NOGROUP No such consumer group '" + string(c.Args[2]) + "' for key name '" + string(key) + "'")
		}
		out := make([]Reply, 0, len(g.consumers))
		for _, cs := range g.consumers {
			out = append(out, Reply{Kind: ReplyMap, Array: []Reply{
				bulk("name"), bulk(cs.name),
				bulk("pending"), IntReply(int64(cs.pel.Len())),
				bulk("idle"), IntReply(max(now-cs.seen, 0)),
			}})
		}
		return Reply{Kind: ReplyArray, Array: out}
	case eqFold(sub, "GROUPS") && argc == 3:
		out := make([]Reply, 0, len(st.groups))
		for _, g := range st.groups {
			out = append(out, Reply{Kind: ReplyMap, Array: []Reply{
				bulk("name"), bulk(g.name),
				bulk("consumers"), IntReply(int64(len(g.consumers))),
				bulk("pending"), IntReply(int64(g.pel.Len())),
				bulk("last-delivered-id"), g.lastID.reply(),
				bulk("entries-read"), entriesReadReply(g),
				bulk("lag"), lagReply(st, g),
			}})
		}
		return Reply{Kind: ReplyArray, Array: out}
	case eqFold(sub, "STREAM"):
		return xinfoStream(st, c.Args[2:], sub)
	}
	return subcommandSyntaxError("XINFO", sub)
}

func entriesReadReply(g *streamGroup) Reply {
	if g.entriesRead == -1 {
		return replyNil
	}
	return IntReply(g.entriesRead)
}

func lagReply(st *stream, g *streamGroup) Reply {
	if lag, ok := st.lag(g); ok {
		return IntReply(lag)
	}
	return replyNil
}

// radixNodes estimates rax->numnodes for the node keys of a stream:
// Redis's radix tree of 128-bit keys has nodes kvs does not, so this is
// the count for keys that share nothing but their root.
func (st *stream) radixNodes() int64 {
	if len(st.nodes) == 0 {
		return 1
	}
	return int64(len(st.nodes)) + 1
}

func xinfoStream(st *stream, opts [][]byte, sub []byte) Reply {
	full := len(opts) > 0
	count := int64(10)
	if full {
		if len(opts) != 1 && len(opts) != 3 || !eqFold(opts[0], "FULL") {
			return subcommandSyntaxError("XINFO", sub)
		}
		if len(opts) == 3 {
			if !eqFold(opts[1], "COUNT") {
				return subcommandSyntaxError("XINFO", sub)
			}
			v, ok := parseLongLong(opts[2])
			if !ok {
				return ErrorReply(ErrNotInteger)
			}
			if v < 0 {
				v = 10
			}
			count = v
		}
	}
	bulk := func(s string) Reply { return BulkReply([]byte(s)) }
	m := []Reply{
		bulk("length"), IntReply(st.length),
		bulk("radix-tree-keys"), IntReply(int64(len(st.nodes))),
		bulk("radix-tree-nodes"), IntReply(st.radixNodes()),
		bulk("last-generated-id"), st.lastID.reply(),
		bulk("max-deleted-entry-id"), st.maxDeleted.reply(),
		bulk("entries-added"), IntReply(st.entriesAdded),
		bulk("recorded-first-entry-id"), st.firstID.reply(),
	}
	if !full {
		first, last := replyNil, replyNil
		st.rangeFn(streamIDMin, streamIDMax, false, func(e streamEntry) bool { first = entryReply(e); return false })
		st.rangeFn(streamIDMin, streamIDMax, true, func(e streamEntry) bool { last = entryReply(e); return false })
		m = append(m, bulk("groups"), IntReply(int64(len(st.groups))), bulk("first-entry"), first, bulk("last-entry"), last)
		return Reply{Kind: ReplyMap, Array: m}
	}
	m = append(m, bulk("entries"), Reply{Kind: ReplyArray, Array: streamRange(st, streamIDMin, streamIDMax, count, false)})
	groups := make([]Reply, 0, len(st.groups))
	for _, g := range st.groups {
		pending := []Reply{}
		g.pel.Scan(func(n streamNack) bool {
			if count != 0 && int64(len(pending)) >= count {
				return false
			}
			pending = append(pending, Reply{Kind: ReplyArray, Array: []Reply{n.id.reply(), bulk(n.consumer),
				IntReply(n.time), IntReply(n.count)}})
			return true
		})
		cons := make([]Reply, 0, len(g.consumers))
		for _, cs := range g.consumers {
			cp := []Reply{}
			cs.pel.Scan(func(id streamID) bool {
				if count != 0 && int64(len(cp)) >= count {
					return false
				}
				n, _ := g.pel.Get(streamNack{id: id})
				cp = append(cp, Reply{Kind: ReplyArray, Array: []Reply{id.reply(), IntReply(n.time), IntReply(n.count)}})
				return true
			})
			cons = append(cons, Reply{Kind: ReplyMap, Array: []Reply{
				bulk("name"), bulk(cs.name),
				bulk("seen-time"), IntReply(cs.seen),
				bulk("pel-count"), IntReply(int64(cs.pel.Len())),
				bulk("pending"), {Kind: ReplyArray, Array: cp},
			}})
		}
		groups = append(groups, Reply{Kind: ReplyMap, Array: []Reply{
			bulk("name"), bulk(g.name),
			bulk("last-delivered-id"), g.lastID.reply(),
			bulk("entries-read"), entriesReadReply(g),
			bulk("lag"), lagReply(st, g),
			bulk("pel-count"), IntReply(int64(g.pel.Len())),
			bulk("pending"), {Kind: ReplyArray, Array: pending},
			bulk("consumers"), {Kind: ReplyArray, Array: cons},
		}})
	}
	m = append(m, bulk("groups"), Reply{Kind: ReplyArray, Array: groups})
	return Reply{Kind: ReplyMap, Array: m}
}
