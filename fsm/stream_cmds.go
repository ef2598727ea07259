package fsm

import (
	"strings"
)

// The stream commands. Each op carries the command's arguments as the
// client sent them (after the command name, the key first); the server
// checks the syntax Redis checks before it looks the key up with the same
// parsers (StreamSyntaxError), and apply parses again, deterministically,
// and answers the errors Redis finds only once it has the key. XADD and
// XTRIM carry stream-node-max-entries in Int and stream-node-max-bytes in
// Int2, as the server had them.

const (
	// OpXAdd: Args = XADD's arguments. Reply the new ID (bulk), nil
	// with NOMKSTREAM on a missing key.
	OpXAdd Op = opBaseStream + iota
	// OpXTrim: Args = XTRIM's arguments. Reply :entries removed.
	OpXTrim
	// OpXDel: Args = key, IDs. Reply :entries removed.
	OpXDel
	// OpXSetID: Args = XSETID's arguments. Reply +OK.
	OpXSetID
	// OpXLen: Args = key. A read.
	OpXLen
	// OpXRange, OpXRevRange: Args = key, start (end), end (start),
	// [COUNT n]. Reads.
	OpXRange
	OpXRevRange
	// OpXRead: Args = XREAD's arguments. A read.
	OpXRead
	// OpXGroup: Args = key, subcommand, its arguments. A write.
	OpXGroup
	// OpXReadGroup: Args = XREADGROUP's arguments. A write (the PEL).
	OpXReadGroup
	// OpXAck: Args = key, group, IDs.
	OpXAck
	// OpXPending: Args = XPENDING's arguments. A read.
	OpXPending
	// OpXClaim, OpXAutoClaim: Args = their arguments. Writes.
	OpXClaim
	OpXAutoClaim
	// OpXInfo: Args = key, subcommand, its arguments. A read.
	OpXInfo
)

// Error texts of the stream commands.
const (
	ErrStreamID          = "ERR Invalid stream ID specified as stream command argument"
	ErrStreamXAddSmaller = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
	ErrStreamXAddZero    = "ERR The ID specified in XADD must be greater than 0-0"
	ErrStreamExhausted   = "ERR The stream has exhausted the last possible ID, unable to add more items"
	ErrStreamTooLarge    = "ERR Elements are too large to be stored"
	errSyntax            = "ERR syntax error"
)

func init() {
	registerOp(OpXAdd, opSpec{name: "XADD", write: true, args: argsAtLeast(2), apply: applyXAdd, level: 4})
	registerOp(OpXTrim, opSpec{name: "XTRIM", write: true, args: argsAtLeast(1), apply: applyXTrim, level: 4})
	registerOp(OpXDel, opSpec{name: "XDEL", write: true, args: argsAtLeast(1), apply: applyXDel, level: 4})
	registerOp(OpXSetID, opSpec{name: "XSETID", write: true, args: argsAtLeast(2), apply: applyXSetID, level: 4})
	registerOp(OpXLen, opSpec{name: "XLEN", args: 1, read: readXLen, level: 4})
	registerOp(OpXRange, opSpec{name: "XRANGE", args: argsAtLeast(3), read: readXRange, level: 4})
	registerOp(OpXRevRange, opSpec{name: "XREVRANGE", args: argsAtLeast(3), read: readXRange, level: 4})
	registerOp(OpXRead, opSpec{name: "XREAD", args: argsAtLeast(1), read: readXRead, keys: xreadKeys, level: 4})

	registerKind(kindStream, kindSpec{
		name:     "stream",
		encoding: func(it *item) string { return "stream" },
		write:    writeStream,
		read:     readStream,
	})
}

// kindStream is the stream kind.
const kindStream kind = 6

// Parsing.

// parseStreamU64 is Redis's string2ull: a strict integer first, else
// strtoull's reading (spaces, a sign, leading zeros; a minus negates).
func parseStreamU64(b []byte) (uint64, bool) {
	if v, ok := parseInt(b); ok {
		return uint64(v), v >= 0
	}
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] >= '\t' && b[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	if i == len(b) {
		return 0, false
	}
	var u uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (1<<64-1)/10 || u*10 > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		u = -u
	}
	return u, true
}

// parseStreamID is streamGenericParseIDOrReply: strict refuses "-" and
// "+"; seqStar accepts "<ms>-*" (seqGiven false then).
func parseStreamID(b []byte, missingSeq uint64, strict, seqStar bool) (id streamID, seqGiven bool, ok bool) {
	if len(b) > 127 {
		return id, false, false
	}
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 1 && (b[0] == '-' || b[0] == '+') {
		if strict {
			return id, false, false
		}
		if b[0] == '-' {
			return streamIDMin, true, true
		}
		return streamIDMax, true, true
	}
	seqGiven = true
	ms, rest, dash := b, []byte(nil), false
	if i := strings.IndexByte(string(b), '-'); i >= 0 {
		ms, rest, dash = b[:i], b[i+1:], true
	}
	m, ok := parseStreamU64(ms)
	if !ok {
		return id, false, false
	}
	seq := missingSeq
	if dash {
		if seqStar && len(rest) == 1 && rest[0] == '*' {
			seq, seqGiven = 0, false
		} else if seq, ok = parseStreamU64(rest); !ok {
			return id, false, false
		}
	}
	return streamID{m, seq}, seqGiven, true
}

// parseLongLong is getLongLongFromObject.
func parseLongLong(b []byte) (int64, bool) { return parseInt(b) }

// xaddArgs are XADD's and XTRIM's parsed options.
type xaddArgs struct {
	trim       streamTrimArgs
	noMkStream bool
	idGiven    bool
	seqGiven   bool
	id         streamID
	idPos      int // index of the ID in args
}

// parseXAddTrim is streamParseAddOrTrimArgsOrReply over args (the key
// first), with maxEntries stream-node-max-entries.
func parseXAddTrim(args [][]byte, xadd bool, maxEntries int64) (a xaddArgs, e string) {
	i := 1
	limitGiven := false
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		opt := args[i]
		switch {
		case xadd && string(opt) == "*":
		case eqFold(opt, "maxlen") && more > 0, eqFold(opt, "minid") && more > 0:
			if a.trim.strategy != trimNone {
				return a, "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
			}
			a.trim.approx = false
			next := args[i+1]
			if more >= 2 && string(next) == "~" {
				a.trim.approx = true
				i++
			} else if more >= 2 && string(next) == "=" {
				i++
			}
			if eqFold(opt, "maxlen") {
				v, ok := parseLongLong(args[i+1])
				if !ok {
					return a, ErrNotInteger
				}
				if v < 0 {
					return a, "ERR The MAXLEN argument must be >= 0."
				}
				a.trim.maxlen = v
				a.trim.strategy = trimMaxLen
			} else {
				id, _, ok := parseStreamID(args[i+1], 0, true, false)
				if !ok {
					return a, ErrStreamID
				}
				a.trim.minid = id
				a.trim.strategy = trimMinID
			}
			i++
			continue
		case eqFold(opt, "limit") && more > 0:
			v, ok := parseLongLong(args[i+1])
			if !ok {
				return a, ErrNotInteger
			}
			if v < 0 {
				return a, "ERR The LIMIT argument must be >= 0."
			}
			a.trim.limit = v
			limitGiven = true
			i++
			continue
		case xadd && eqFold(opt, "nomkstream"):
			a.noMkStream = true
			continue
		case xadd:
			id, seqGiven, ok := parseStreamID(opt, 0, true, true)
			if !ok {
				return a, ErrStreamID
			}
			a.id, a.seqGiven, a.idGiven = id, seqGiven, true
		default:
			return a, errSyntax
		}
		break
	}
	a.idPos = i
	if a.trim.limit != 0 && a.trim.strategy == trimNone {
		return a, "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
	}
	if !xadd && a.trim.strategy == trimNone {
		return a, "ERR syntax error, XTRIM must be called with a trimming strategy"
	}
	if limitGiven {
		if !a.trim.approx {
			return a, "ERR syntax error, LIMIT cannot be used without the special ~ option"
		}
	} else if a.trim.approx {
		a.trim.limit = 100 * maxEntries
		if a.trim.limit <= 0 {
			a.trim.limit = 10000
		}
		if a.trim.limit > 1000000 {
			a.trim.limit = 1000000
		}
	} else {
		a.trim.limit = 0
	}
	if xadd {
		fields := len(args) - (a.idPos + 1)
		if fields < 2 || fields%2 == 1 {
			return a, "ERR wrong number of arguments for 'xadd' command"
		}
		if a.idGiven && a.seqGiven && a.id.isZero() {
			return a, ErrStreamXAddZero
		}
	}
	return a, ""
}

func eqFold(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// parseXRangeArgs parses XRANGE's (or XREVRANGE's) IDs and COUNT.
func parseXRangeArgs(args [][]byte, rev bool) (start, end streamID, count int64, e string) {
	startArg, endArg := args[1], args[2]
	if rev {
		startArg, endArg = endArg, startArg
	}
	count = -1
	var ok bool
	if start, ok = parseIntervalID(startArg, 0); !ok {
		return start, end, 0, ErrStreamID
	}
	if len(startArg) > 1 && startArg[0] == '(' {
		if start, ok = start.incr(); !ok {
			return start, end, 0, "ERR invalid start ID for the interval"
		}
	}
	if end, ok = parseIntervalID(endArg, ^uint64(0)); !ok {
		return start, end, 0, ErrStreamID
	}
	if len(endArg) > 1 && endArg[0] == '(' {
		if end, ok = end.decr(); !ok {
			return start, end, 0, "ERR invalid end ID for the interval"
		}
	}
	for j := 3; j < len(args); j++ {
		if eqFold(args[j], "count") && len(args)-j-1 >= 1 {
			v, ok := parseLongLong(args[j+1])
			if !ok {
				return start, end, 0, ErrNotInteger
			}
			count = max(v, 0)
			j++
		} else {
			return start, end, 0, errSyntax
		}
	}
	return start, end, count, ""
}

func parseIntervalID(b []byte, missingSeq uint64) (streamID, bool) {
	if len(b) > 1 && b[0] == '(' {
		id, _, ok := parseStreamID(b[1:], missingSeq, true, false)
		return id, ok
	}
	id, _, ok := parseStreamID(b, missingSeq, false, false)
	return id, ok
}

// StreamSyntaxError returns the error Redis answers a stream command
// with before it looks its keys up, or "". maxEntries is
// stream-node-max-entries.
func StreamSyntaxError(op Op, args [][]byte, maxEntries int64) string {
	switch op {
	case OpXAdd, OpXTrim:
		_, e := parseXAddTrim(args, op == OpXAdd, maxEntries)
		return e
	case OpXRange, OpXRevRange:
		_, _, _, e := parseXRangeArgs(args, op == OpXRevRange)
		return e
	case OpXRead, OpXReadGroup:
		_, e := parseXRead(args, op == OpXReadGroup)
		return e
	case OpXPending:
		_, e := parseXPending(args)
		return e
	}
	return ""
}

// Replies.

func entryReply(e streamEntry) Reply {
	pairs := make([]Reply, len(e.pairs))
	for i, p := range e.pairs {
		pairs[i] = BulkReply(p)
	}
	return Reply{Kind: ReplyArray, Array: []Reply{e.id.reply(), {Kind: ReplyArray, Array: pairs}}}
}

func (s *Store) streamLookup(now int64, key []byte) (st *stream, it item, ok, wrong bool) {
	it, ok, wrong = s.lookupLocked(now, key, kindStream)
	if ok {
		st = it.obj.(*stream)
	}
	return
}

// editStream prepares key's stream for a change (cloning it when a
// snapshot shares it).
func (s *Store) editStream(it *item) (*stream, int64) {
	before := s.editLocked(it)
	return it.obj.(*stream), before
}

func (s *Store) endStreamEdit(it item, st *stream, before int64) {
	st.recountGroups()
	s.endEditLocked(it, before)
}

// Writes.

func applyXAdd(s *Store, now int64, c *Command) Reply {
	a, e := parseXAddTrim(c.Args, true, c.Int)
	if e != "" {
		return ErrorReply(e)
	}
	key := c.Args[0]
	it, ok, wrong := s.lookupLocked(now, key, kindStream)
	if wrong {
		return replyWrongType
	}
	var st *stream
	var before int64
	if !ok {
		if a.noMkStream {
			return replyNil
		}
		st = newStream()
	} else {
		st, before = s.editStream(&it)
	}
	if st.lastID == streamIDMax {
		return ErrorReply(ErrStreamExhausted)
	}
	var id streamID
	switch {
	case a.idGiven && a.seqGiven:
		id = a.id
	case a.idGiven:
		if st.lastID.ms == a.id.ms {
			if st.lastID.seq == ^uint64(0) {
				return ErrorReply(ErrStreamXAddSmaller)
			}
			id = streamID{st.lastID.ms, st.lastID.seq + 1}
		} else {
			id = a.id
		}
	default:
		if uint64(now) > st.lastID.ms {
			id = streamID{uint64(now), 0}
		} else {
			id, _ = st.lastID.incr()
		}
	}
	if id.cmp(st.lastID) <= 0 {
		return ErrorReply(ErrStreamXAddSmaller)
	}
	pairs := c.Args[a.idPos+1:]
	tot := 0
	for _, p := range pairs {
		tot += len(p)
	}
	if tot > streamListpackMaxSize {
		return ErrorReply(ErrStreamTooLarge)
	}
	owned := make([][]byte, len(pairs))
	for i, p := range pairs {
		owned[i] = append([]byte(nil), p...)
	}
	st.append(id, owned, c.Int2, c.Int)
	s.notifyLocked(NotifyStream, "xadd", key)
	if st.trim(&a.trim) > 0 {
		s.notifyLocked(NotifyStream, "xtrim", key)
	}
	if !ok {
		st.recount()
		s.putLocked(s.newCollection(key, kindStream, nil, st, 0))
	} else {
		s.endStreamEdit(it, st, before)
	}
	s.signalReadyLocked(key)
	return id.reply()
}

func applyXTrim(s *Store, now int64, c *Command) Reply {
	a, e := parseXAddTrim(c.Args, false, c.Int)
	if e != "" {
		return ErrorReply(e)
	}
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindStream)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	st, before := s.editStream(&it)
	n := st.trim(&a.trim)
	s.endStreamEdit(it, st, before)
	if n > 0 {
		s.notifyLocked(NotifyStream, "xtrim", c.Args[0])
	}
	return IntReply(n)
}

func applyXDel(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindStream)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	ids := make([]streamID, 0, len(c.Args)-1)
	for _, b := range c.Args[1:] {
		id, _, ok := parseStreamID(b, 0, true, false)
		if !ok {
			return ErrorReply(ErrStreamID)
		}
		ids = append(ids, id)
	}
	st, before := s.editStream(&it)
	deleted := int64(0)
	first := false
	for _, id := range ids {
		if st.delete(id) {
			if id == st.firstID {
				first = true
			}
			if id.cmp(st.maxDeleted) > 0 {
				st.maxDeleted = id
			}
			deleted++
		}
	}
	if deleted > 0 {
		if st.length == 0 {
			st.firstID = streamID{}
		} else if first {
			st.firstID = st.edgeID(true)
		}
	}
	s.endStreamEdit(it, st, before)
	if deleted > 0 {
		s.notifyLocked(NotifyStream, "xdel", c.Args[0])
	}
	return IntReply(deleted)
}

// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
func applyXSetID(s *Store, now int64, c *Command) Reply {
	args := c.Args
	id, _, ok := parseStreamID(args[1], 0, true, false)
	if !ok {
		return ErrorReply(ErrStreamID)
	}
	var maxXdel streamID
	entriesAdded := int64(-1)
	for i := 2; i < len(args); i++ {
		more := len(args) - i - 1
		switch {
		case eqFold(args[i], "ENTRIESADDED") && more > 0:
			v, ok := parseLongLong(args[i+1])
			if !ok {
				return ErrorReply(ErrNotInteger)
			}
			if v < 0 {
				return ErrorReply("ERR entries_added must be positive")
			}
			entriesAdded = v
			i++
		case eqFold(args[i], "MAXDELETEDID") && more > 0:
			v, _, ok := parseStreamID(args[i+1], 0, true, false)
			if !ok {
				return ErrorReply(ErrStreamID)
			}
			if id.less(v) {
				return ErrorReply("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
			}
			maxXdel = v
			i++
		default:
			return ErrorReply(errSyntax)
		}
	}
	it, ok, wrong := s.lookupLocked(now, args[0], kindStream)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return ErrorReply(ErrNoSuchKey)
	}
	st := it.obj.(*stream)
	if st.length > 0 {
		if id.less(st.edgeID(false)) {
			return ErrorReply("ERR The ID specified in XSETID is smaller than the target stream top item")
		}
		if entriesAdded != -1 && st.length > entriesAdded {
			return ErrorReply("ERR The entries_added specified in XSETID is smaller than the target stream length")
		}
	}
	st, before := s.editStream(&it)
	st.lastID = id
	if entriesAdded != -1 {
		st.entriesAdded = entriesAdded
	}
	if !maxXdel.isZero() {
		st.maxDeleted = maxXdel
	}
	s.endStreamEdit(it, st, before)
	s.notifyLocked(NotifyStream, "xsetid", args[0])
	return replyOK
}

// Reads.

func readXLen(s *Store, now int64, c *Command) Reply {
	st, _, ok, wrong := s.streamLookup(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	return IntReply(st.length)
}

func readXRange(s *Store, now int64, c *Command) Reply {
	rev := c.Op == OpXRevRange
	start, end, count, e := parseXRangeArgs(c.Args, rev)
	if e != "" {
		return ErrorReply(e)
	}
	st, _, ok, wrong := s.streamLookup(now, c.Args[0])
	switch {
	case !ok && !wrong:
		return Reply{Kind: ReplyArray, Array: []Reply{}}
	case wrong:
		return replyWrongType
	case count == 0:
		return Reply{Kind: ReplyNilArray}
	}
	return Reply{Kind: ReplyArray, Array: streamRange(st, start, end, count, rev)}
}

// streamRange returns the entries in [start, end], at most count (0 or
// less: all).
func streamRange(st *stream, start, end streamID, count int64, rev bool) []Reply {
	out := []Reply{}
	st.rangeFn(start, end, rev, func(e streamEntry) bool {
		out = append(out, entryReply(e))
		return count <= 0 || int64(len(out)) < count
	})
	return out
}

// xreadArgs are XREAD's and XREADGROUP's parsed options.
type xreadArgs struct {
	block    int64 // -1: none
	count    int64
	streams  int // index of the first key
	nstreams int
	group    []byte
	consumer []byte
	noack    bool
}

func parseXRead(args [][]byte, group bool) (a xreadArgs, e string) {
	a.block = -1
	for i := 0; i < len(args); i++ {
		more := len(args) - i - 1
		o := args[i]
		switch {
		case eqFold(o, "BLOCK") && more > 0:
			i++
			v, ok := parseLongLong(args[i])
			if !ok {
				return a, "ERR timeout is not an integer or out of range"
			}
			if v < 0 {
				return a, "ERR timeout is negative"
			}
			a.block = v
		case eqFold(o, "COUNT") && more > 0:
			i++
			v, ok := parseLongLong(args[i])
			if !ok {
				return a, ErrNotInteger
			}
			a.count = max(v, 0)
		case eqFold(o, "STREAMS") && more > 0:
			a.streams = i + 1
			n := len(args) - a.streams
			if n%2 != 0 {
				return a, "ERR Unbalanced " + xreadName(group) + " list of streams: for each stream key an ID or '$' must be specified."
			}
			a.nstreams = n / 2
			i = len(args)
		case eqFold(o, "GROUP") && more >= 2:
			if !group {
				return a, "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
			}
			a.group, a.consumer = args[i+1], args[i+2]
			i += 2
		case eqFold(o, "NOACK"):
			if !group {
				return a, "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
			}
			a.noack = true
		default:
			return a, errSyntax
		}
	}
	if a.streams == 0 {
		return a, errSyntax
	}
	if group && a.group == nil {
		return a, "ERR Missing GROUP option for XREADGROUP"
	}
	return a, ""
}

// xreadName is how Redis's unbalanced-list error names the command: it
// always says XREAD.
func xreadName(bool) string { return "XREAD" }

// xreadKeys is the keys of XREAD and XREADGROUP.
func xreadKeys(c *Command) [][]byte {
	a, e := parseXRead(c.Args, c.Op == OpXReadGroup)
	if e != "" {
		return nil
	}
	return c.Args[a.streams : a.streams+a.nstreams]
}

// XReadKeys returns the keys of an XREAD or XREADGROUP command (its
// arguments after the name), or nil when its syntax is wrong.
func XReadKeys(op Op, args [][]byte) [][]byte {
	c := Command{Op: op, Args: args}
	return xreadKeys(&c)
}

func readXRead(s *Store, now int64, c *Command) Reply {
	a, e := parseXRead(c.Args, false)
	if e != "" {
		return ErrorReply(e)
	}
	keys := c.Args[a.streams : a.streams+a.nstreams]
	ids := make([]streamID, a.nstreams)
	ready := c.Flags&FlagStreamReady != 0
	for i, b := range c.Args[a.streams+a.nstreams:] {
		st, _, ok, wrong := s.streamLookup(now, keys[i])
		if wrong && !ready {
			return replyWrongType
		}
		switch string(b) {
		case "$":
			if ok {
				ids[i] = st.lastID
			}
			continue
		case ">":
			return ErrorReply("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
		}
		id, _, good := parseStreamID(b, 0, true, false)
		if !good {
			return ErrorReply(ErrStreamID)
		}
		ids[i] = id
	}
	var out []Reply
	for i, key := range keys {
		st, _, ok, wrong := s.streamLookup(now, key)
		if !ok || wrong || st.length == 0 {
			continue
		}
		if st.edgeID(false).cmp(ids[i]) <= 0 {
			continue
		}
		start, _ := ids[i].incr()
		entries := streamRange(st, start, streamIDMax, a.count, false)
		out = append(out, Reply{Kind: ReplyArray, Array: []Reply{BulkReply(key), {Kind: ReplyArray, Array: entries}}})
	}
	if out == nil {
		return Reply{Kind: ReplyNilArray}
	}
	return Reply{Kind: ReplyKeyed, Array: out}
}

// XReadLastIDs resolves XREAD's "$" IDs (its arguments after the name)
// to the last IDs of the streams of database db at now, for a client
// about to block: the arguments returned name them explicitly.
func (s *Store) XReadLastIDs(now int64, db uint16, args [][]byte) [][]byte {
	if db == 0 {
		s.mu.RLock()
		defer s.mu.RUnlock()
	} else {
		// Another database is read switched to, under the exclusive
		// lock, as every read of one is (db.go).
		s.mu.Lock()
		defer s.mu.Unlock()
		prev := s.cur
		s.selectLocked(db)
		defer s.selectLocked(prev)
	}
	a, e := parseXRead(args, false)
	if e != "" {
		return args
	}
	out := append([][]byte(nil), args...)
	for i := a.streams + a.nstreams; i < len(args); i++ {
		if string(args[i]) != "$" {
			continue
		}
		id := streamID{}
		if st, _, ok, _ := s.streamLookup(now, args[i-a.nstreams]); ok {
			id = st.lastID
		}
		out[i] = []byte(id.String())
	}
	return out
}

// xreadMissesLocked calls fn with each key XREAD or XREADGROUP finds
// missing as Redis's xreadCommand looks them up: each key once as its ID
// is parsed (up to an error), then each key again as it is served.
func (s *Store) xreadMissesLocked(now int64, c *Command, fn func(key []byte)) {
	group := c.Op == OpXReadGroup
	a, e := parseXRead(c.Args, group)
	if e != "" || c.Flags&FlagStreamReady != 0 {
		return
	}
	keys := c.Args[a.streams : a.streams+a.nstreams]
	for i, b := range c.Args[a.streams+a.nstreams:] {
		it, live := s.liveLocked(keys[i], now)
		if !live {
			fn(keys[i])
		} else if it.kind != kindStream {
			return
		}
		if group {
			if !live {
				return
			}
			if g, _ := it.obj.(*stream).group(a.group); g == nil {
				return
			}
		}
		switch string(b) {
		case "$":
			if group {
				return
			}
			continue
		case ">":
			if !group {
				return
			}
			continue
		}
		if _, _, ok := parseStreamID(b, 0, true, false); !ok {
			return
		}
	}
	for _, k := range keys {
		if _, live := s.liveLocked(k, now); !live {
			fn(k)
		}
	}
}
