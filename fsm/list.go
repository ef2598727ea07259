package fsm

import "encoding/binary"

// Lists: LPUSH and RPUSH and their X forms, LPOP and RPOP (with a count),
// LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE (and
// RPOPLPUSH), LMPOP, and the non-blocking forms the server runs for BLPOP,
// BRPOP, BLMOVE, BRPOPLPUSH and BLMPOP. The two forms of a list are drawn
// in list_quicklist.go. A push that creates its list signals the key
// ready for blocked clients (Redis signals the keys it adds).

// List ops. Their numbers are part of the log format: append only.
const (
	// OpLPush, OpRPush, OpLPushX, OpRPushX: Args[0]=key, Args[1:]=
	// elements. The X forms push only onto an existing list. Reply
	// :length (:0 for an X form on a missing key).
	OpLPush Op = opBaseList + iota
	OpRPush
	OpLPushX
	OpRPushX
	// OpLPop, OpRPop: Args[0]=key. With FlagListCount, Int=count (>= 0)
	// and the reply is an array (null array for a missing key); without,
	// a bulk or nil.
	OpLPop
	OpRPop
	// OpLLen: Args[0]=key. Reply :length. A read.
	OpLLen
	// OpLRange: Args[0]=key, Int=start, Int2=stop. A read.
	OpLRange
	// OpLIndex: Args[0]=key, Int=index. FlagListBadIndex: the index was
	// not an integer, which Redis reports only once it found a list. A read.
	OpLIndex
	// OpLSet: Args[0]=key, Args[1]=element, Int=index; FlagListBadIndex
	// as for OpLIndex. Reply +OK.
	OpLSet
	// OpLInsert: Args = key, pivot, element; FlagListAfter inserts after
	// the pivot. Reply :length, :-1 without the pivot, :0 without the key.
	OpLInsert
	// OpLRem: Args[0]=key, Args[1]=element, Int=count (Redis's sign
	// rules). Reply :removed.
	OpLRem
	// OpLTrim: Args[0]=key, Int=start, Int2=stop. Reply +OK.
	OpLTrim
	// OpLPos: Args[0]=key, Args[1]=element, Int=rank (not 0; negative
	// from the tail), Int2=count (with FlagListCount; 0: all), Float=
	// maxlen (0: all; a whole number). A read.
	OpLPos
	// OpLMove (LMOVE, RPOPLPUSH, and BLMOVE's non-blocking form):
	// Args[0]=source, Args[1]=destination; FlagListRight pops the
	// source's tail, FlagListToRight pushes at the destination's tail.
	// Reply the element, or nil when the source is missing (or, with
	// FlagListReady, not a list). Int2, when not 0, is a result token (see
	// NoteResult).
	OpLMove
	// OpLMPop (LMPOP, and the non-blocking form of BLMPOP, BLPOP and
	// BRPOP): Args = keys; FlagListRight pops tails; FlagListCount:
	// Int=count (> 0), else 1. Pops from the first non-empty list. Reply
	// [key, [elements]], or with FlagListBPop [key, element] (BLPOP's
	// shape); a null array when every key is missing (with
	// FlagListReady, missing or not a list). Int2, when not 0, is a result
	// token (see NoteResult).
	OpLMPop
)

// List flags (the bits are the list ops' own; see Flags).
const (
	FlagListRight Flags = 1 << iota
	FlagListToRight
	FlagListCount
	FlagListBadIndex
	FlagListAfter
	FlagListBPop
	// FlagListReady marks the pop of a client woken because its key was
	// made ready: a key that holds another type by then is passed over as
	// if missing, as Redis serves a blocked client only from a key of the
	// type it waits for (the destination's type is checked as ever).
	FlagListReady
)

// Error texts only lists give.
const (
	ErrIndexOutOfRange = "ERR index out of range"
)

func init() {
	for _, op := range []Op{OpLPush, OpRPush, OpLPushX, OpRPushX} {
		registerOp(op, opSpec{name: map[Op]string{OpLPush: "LPUSH", OpRPush: "RPUSH", OpLPushX: "LPUSHX",
			OpRPushX: "RPUSHX"}[op], write: true, args: argsAtLeast(2), apply: applyPush})
	}
	registerOp(OpLPop, opSpec{name: "LPOP", write: true, args: 1, flags: FlagListCount, check: nonNegativeInt,
		apply: applyPop})
	registerOp(OpRPop, opSpec{name: "RPOP", write: true, args: 1, flags: FlagListCount, check: nonNegativeInt,
		apply: applyPop})
	registerOp(OpLLen, opSpec{name: "LLEN", args: 1, read: readLLen})
	registerOp(OpLRange, opSpec{name: "LRANGE", args: 1, read: readLRange})
	registerOp(OpLIndex, opSpec{name: "LINDEX", args: 1, flags: FlagListBadIndex, read: readLIndex})
	registerOp(OpLSet, opSpec{name: "LSET", write: true, args: 2, flags: FlagListBadIndex, apply: applyLSet})
	registerOp(OpLInsert, opSpec{name: "LINSERT", write: true, args: 3, flags: FlagListAfter, apply: applyLInsert})
	registerOp(OpLRem, opSpec{name: "LREM", write: true, args: 2, apply: applyLRem})
	registerOp(OpLTrim, opSpec{name: "LTRIM", write: true, args: 1, apply: applyLTrim})
	registerOp(OpLPos, opSpec{name: "LPOS", args: 2, flags: FlagListCount, check: listLPosCheck, read: readLPos})
	registerOp(OpLMove, opSpec{name: "LMOVE", write: true, args: 2, flags: FlagListRight | FlagListToRight | FlagListReady,
		keys: keysAll, apply: withResultToken(applyLMove)})
	registerOp(OpLMPop, opSpec{name: "LMPOP", write: true, args: argsAtLeast(1),
		flags: FlagListRight | FlagListCount | FlagListBPop | FlagListReady, keys: keysAll, check: listLMPopCheck, apply: withResultToken(applyLMPop)})

	registerKind(kindList, kindSpec{
		name: "list",
		// Redis 7.0 keeps every list in a quicklist (7.2 added listpack
		// lists) and OBJECT ENCODING says so whatever the size; kvs's
		// packed form is its own business.
		encoding: func(it *item) string { return "quicklist" },
		write:    writeList,
		read:     readList,
		elements: listElements,
	})
}

func listLPosCheck(c *Command) error {
	switch {
	case c.Int == 0:
		return errorString("rank 0")
	case c.Int2 < 0:
		return errorString("negative count")
	case !(c.Float >= 0 && c.Float <= 1<<53) || c.Float != float64(int64(c.Float)):
		return errorString("bad maxlen")
	}
	return nil
}

func listLMPopCheck(c *Command) error {
	if c.Flags&FlagListCount != 0 && c.Int <= 0 {
		return errorString("count not positive")
	}
	return nil
}

// The packed form.

func listPackedLen(val []byte) int64 {
	n, _ := binary.Uvarint(val)
	return int64(n)
}

func listUnpack(val []byte) [][]byte {
	n, k := binary.Uvarint(val)
	return listEntries(make([][]byte, 0, n), val[k:], int(n))
}

func listPack(elems [][]byte) []byte {
	buf := make([]byte, 0, listUvarintLen(uint64(len(elems)))+listEntriesBytes(elems))
	buf = binary.AppendUvarint(buf, uint64(len(elems)))
	for _, e := range elems {
		buf = listAppendEntry(buf, e)
	}
	return buf
}

// listFits reports whether a list of n elements taking bytes bytes of
// listEntries stays packed under l (Redis's list-max-listpack-size: a
// positive value counts listEntries, with an 8 KiB safety limit; -1 to -5 are
// 4 to 64 KiB). shrunk asks whether a large list is small enough to be
// packed again: half the limits, so a list near the limit does not convert
// back and forth.
func (l *Limits) listFits(n int64, bytes int, shrunk bool) bool {
	div := 1
	if shrunk {
		div = 2
	}
	if f := l.ListMaxListpackSize; f > 0 {
		return n <= f/int64(div) && bytes <= 8192/div
	}
	shift := min(max(-l.ListMaxListpackSize-1, 0), 4)
	return bytes <= (4096<<shift)/div
}

// listLen returns the length of a list item.
func listLen(it *item) int64 {
	if q, ok := it.obj.(*quicklist); ok {
		return q.n
	}
	return listPackedLen(it.val)
}

// putListLocked stores elems as key's list with deadline exp, packed or
// large as the limits say, or deletes key when elems is empty.
func (s *Store) putListLocked(key []byte, elems [][]byte, exp int64) {
	if len(elems) == 0 {
		s.deleteLocked(key)
		return
	}
	if s.limits.listFits(int64(len(elems)), listEntriesBytes(elems), false) {
		s.putLocked(s.newCollection(key, kindList, listPack(elems), nil, exp))
		return
	}
	s.putLocked(s.newCollection(key, kindList, nil, quicklistOf(elems), exp))
}

// restoreListLocked is putListLocked for the existing item it, keeping
// its key (no new allocation or hash) and deadline.
func (s *Store) restoreListLocked(it item, elems [][]byte) {
	if len(elems) == 0 {
		s.deleteLocked([]byte(it.key))
		return
	}
	if s.limits.listFits(int64(len(elems)), listEntriesBytes(elems), false) {
		it.val, it.obj = listPack(elems), nil
	} else {
		it.val, it.obj = nil, quicklistOf(elems)
		*it.obj.cowGen() = s.keys.gen
	}
	s.putLocked(it)
}

// endListEditLocked stores it after its large form q changed in place
// (begun with editLocked, which returned before): deleted when empty,
// packed again when small.
func (s *Store) endListEditLocked(it item, q *quicklist, before int64) {
	s.endEditLocked(it, before)
	switch {
	case q.n == 0:
		s.deleteLocked([]byte(it.key))
	case q.n <= 1024 && s.limits.listFits(q.n, int(q.bytes), true):
		elems := q.elementsOf()
		if s.limits.listFits(q.n, listEntriesBytes(elems), true) {
			s.putLocked(s.newCollection([]byte(it.key), kindList, listPack(elems), nil, it.exp))
		}
	}
}

// editListLocked runs fn on it's elements as a slice (packed form) or on
// its large form, and stores the result. fn on the slice returns the new
// elements.
func (s *Store) editListLocked(it item, packed func(elems [][]byte) [][]byte, large func(q *quicklist)) {
	if it.obj == nil {
		s.restoreListLocked(it, packed(listUnpack(it.val)))
		return
	}
	before := s.editLocked(&it)
	q := it.obj.(*quicklist)
	large(q)
	s.endListEditLocked(it, q, before)
}

// Pushes.

func applyPush(s *Store, now int64, c *Command) Reply {
	key, elems := c.Args[0], c.Args[1:]
	head := c.Op == OpLPush || c.Op == OpLPushX
	it, ok, wrong := s.lookupLocked(now, key, kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok && (c.Op == OpLPushX || c.Op == OpRPushX):
		return replyZero
	case !ok:
		s.putListLocked(key, listPushed(nil, elems, head), 0)
		s.signalReadyLocked(key)
		return IntReply(int64(len(elems)))
	}
	// A push onto a list that exists signals nothing, as in Redis, which
	// signals only the keys it adds.
	n := listLen(&it) + int64(len(elems))
	s.pushLocked(it, elems, head)
	return IntReply(n)
}

// listPushed returns list with elems listPushed at its head (each in turn, so
// they end up reversed, as in Redis) or tail.
func listPushed(list, elems [][]byte, head bool) [][]byte {
	out := make([][]byte, 0, len(list)+len(elems))
	if head {
		for i := len(elems) - 1; i >= 0; i-- {
			out = append(out, elems[i])
		}
		return append(out, list...)
	}
	out = append(out, list...)
	return append(out, elems...)
}

// pushLocked pushes elems onto the existing list it.
func (s *Store) pushLocked(it item, elems [][]byte, head bool) {
	if it.obj == nil {
		n := listPackedLen(it.val) + int64(len(elems))
		if s.limits.listFits(n, len(it.val)+listEntriesBytes(elems), false) {
			s.restoreListLocked(it, listPushed(listUnpack(it.val), elems, head))
			return
		}
		// Past the packed limits: convert, then push onto the large form.
		s.putLocked(s.newCollection([]byte(it.key), kindList, nil, quicklistOf(listUnpack(it.val)), it.exp))
		it, _ = s.getLocked([]byte(it.key))
	}
	before := s.editLocked(&it)
	q := it.obj.(*quicklist)
	for _, e := range elems {
		if head {
			q.pushHead(e)
		} else {
			q.pushTail(e)
		}
	}
	s.endEditLocked(it, before)
}

// Pops.

// popLocked removes up to n elements from the head (or tail) of the list
// it and returns them in the order popped.
func (s *Store) popLocked(it item, n int64, tail bool) [][]byte {
	n = min(n, listLen(&it))
	out := make([][]byte, 0, n)
	s.editListLocked(it, func(elems [][]byte) [][]byte {
		if tail {
			for i := int64(0); i < n; i++ {
				out = append(out, elems[len(elems)-1-int(i)])
			}
			return elems[:len(elems)-int(n)]
		}
		out = append(out, elems[:n]...)
		return elems[n:]
	}, func(q *quicklist) {
		for range n {
			if tail {
				out = append(out, q.popTail())
			} else {
				out = append(out, q.popHead())
			}
		}
	})
	return out
}

func applyPop(s *Store, now int64, c *Command) Reply {
	counted := c.Flags&FlagListCount != 0
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok && counted:
		return listNilArray
	case !ok:
		return replyNil
	case counted && c.Int == 0:
		return Reply{Kind: ReplyArray, Array: []Reply{}}
	}
	n := int64(1)
	if counted {
		n = c.Int
	}
	popped := s.popLocked(it, n, c.Op == OpRPop)
	if !counted {
		return BulkReply(popped[0])
	}
	return listBulkArray(popped)
}

var listNilArray = Reply{Kind: ReplyNilArray}

// listBulkArray is the array reply of elems: one flat buffer (ReplyBulks).
func listBulkArray(elems [][]byte) Reply {
	if len(elems) == 0 {
		return Reply{Kind: ReplyArray, Array: []Reply{}}
	}
	buf := make([]byte, 0, listEntriesBytes(elems)+6*len(elems))
	for _, e := range elems {
		buf = AppendBulks(buf, e)
	}
	return BulksReply(buf, len(elems))
}

func applyLMPop(s *Store, now int64, c *Command) Reply {
	n := int64(1)
	if c.Flags&FlagListCount != 0 {
		n = c.Int
	}
	for _, key := range c.Args {
		it, ok, wrong := s.lookupLocked(now, key, kindList)
		if wrong && c.Flags&FlagListReady == 0 {
			return replyWrongType
		}
		if !ok {
			continue
		}
		popped := s.popLocked(it, n, c.Flags&FlagListRight != 0)
		k := BulkReply([]byte(it.key))
		if c.Flags&FlagListBPop != 0 {
			return Reply{Kind: ReplyArray, Array: []Reply{k, BulkReply(popped[0])}}
		}
		return Reply{Kind: ReplyArray, Array: []Reply{k, listBulkArray(popped)}}
	}
	return listNilArray
}

func applyLMove(s *Store, now int64, c *Command) Reply {
	src, dst := c.Args[0], c.Args[1]
	it, ok, wrong := s.lookupLocked(now, src, kindList)
	switch {
	case wrong && c.Flags&FlagListReady == 0:
		return replyWrongType
	case !ok:
		return replyNil
	}
	if _, _, wrong := s.lookupLocked(now, dst, kindList); wrong {
		return replyWrongType
	}
	fromTail, toTail := c.Flags&FlagListRight != 0, c.Flags&FlagListToRight != 0
	var e []byte
	if string(src) == string(dst) {
		// A rotation: the list never becomes empty, so it keeps its TTL
		// (Redis pushes before it would delete the source).
		s.editListLocked(it, func(elems [][]byte) [][]byte {
			if fromTail {
				e, elems = elems[len(elems)-1], elems[:len(elems)-1]
			} else {
				e, elems = elems[0], elems[1:]
			}
			return listPushed(elems, [][]byte{e}, !toTail)
		}, func(q *quicklist) {
			if fromTail {
				e = q.popTail()
			} else {
				e = q.popHead()
			}
			if toTail {
				q.pushTail(e)
			} else {
				q.pushHead(e)
			}
		})
	} else {
		e = s.popLocked(it, 1, fromTail)[0]
		if d, ok, _ := s.lookupLocked(now, dst, kindList); ok {
			s.pushLocked(d, [][]byte{e}, !toTail)
		} else {
			s.putListLocked(dst, [][]byte{e}, 0)
			s.signalReadyLocked(dst)
		}
	}
	return BulkReply(e)
}

// Reads and edits by position.

func readLLen(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	if wrong {
		return replyWrongType
	}
	if !ok {
		return replyZero
	}
	return IntReply(listLen(&it))
}

func readLRange(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	if wrong {
		return replyWrongType
	}
	empty := Reply{Kind: ReplyArray, Array: []Reply{}}
	if !ok {
		return empty
	}
	start, stop, inRange := rankRange(c.Int, c.Int2, listLen(&it))
	if !inRange {
		return empty
	}
	return listRangeReply(&it, start, stop)
}

// listRangeReply is the reply to LRANGE of elements start..stop (valid
// indexes, start <= stop) of it, in one flat buffer (ReplyBulks).
func listRangeReply(it *item, start, stop int64) Reply {
	n := int(stop - start + 1)
	q, ok := it.obj.(*quicklist)
	if !ok {
		_, off := binary.Uvarint(it.val)
		for range start {
			_, off = listNextEntry(it.val, off)
		}
		buf := make([]byte, 0, len(it.val)-off+6*n)
		for range n {
			var e []byte
			e, off = listNextEntry(it.val, off)
			buf = AppendBulks(buf, e)
		}
		return BulksReply(buf, n)
	}
	// Room for elements of the list's average size (chunks are nearly
	// full of entries) and their framing, so the buffer seldom grows.
	avg := q.bytes / max(q.n, 1)
	buf := make([]byte, 0, int64(n)*min(avg+6, 256)+16)
	i := start
	q.rangeFrom(start, func(e []byte) bool {
		buf = AppendBulks(buf, e)
		i++
		return i <= stop
	})
	return BulksReply(buf, n)
}

// listIndex returns element i of it, or false when i is out of range
// (negative counts from the tail).
func listIndex(it *item, i int64) ([]byte, bool) {
	n := listLen(it)
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return nil, false
	}
	if q, ok := it.obj.(*quicklist); ok {
		return q.index(i), true
	}
	return listUnpack(it.val)[i], true
}

func readLIndex(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyNil
	case c.Flags&FlagListBadIndex != 0:
		return ErrorReply(ErrNotInteger)
	}
	e, ok := listIndex(&it, c.Int)
	if !ok {
		return replyNil
	}
	return BulkReply(e)
}

func applyLSet(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return ErrorReply(ErrNoSuchKey)
	case c.Flags&FlagListBadIndex != 0:
		return ErrorReply(ErrNotInteger)
	}
	i, n := c.Int, listLen(&it)
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return ErrorReply(ErrIndexOutOfRange)
	}
	v := c.Args[1]
	s.editListLocked(it, func(elems [][]byte) [][]byte {
		elems[i] = v
		return elems
	}, func(q *quicklist) { q.set(i, v) })
	return replyOK
}

func applyLInsert(s *Store, now int64, c *Command) Reply {
	pivot, v := c.Args[1], c.Args[2]
	after := c.Flags&FlagListAfter != 0
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	at := int64(-1)
	if it.obj == nil {
		for i, e := range listUnpack(it.val) {
			if string(e) == string(pivot) {
				at = int64(i)
				break
			}
		}
	} else {
		q := it.obj.(*quicklist)
		i := int64(0)
		q.rangeFrom(0, func(e []byte) bool {
			if string(e) == string(pivot) {
				at = i
				return false
			}
			i++
			return true
		})
	}
	if at < 0 {
		return IntReply(-1)
	}
	if after {
		at++
	}
	n := listLen(&it)
	s.editListLocked(it, func(elems [][]byte) [][]byte {
		return listInsertAt(elems, int(at), v)
	}, func(q *quicklist) {
		if at == q.n {
			q.pushTail(v)
			return
		}
		ch, j := q.locate(at)
		q.replace(ch, listInsertAt(ch.entries(nil), j, v))
	})
	return IntReply(n + 1)
}

func listInsertAt(elems [][]byte, i int, v []byte) [][]byte {
	out := make([][]byte, 0, len(elems)+1)
	out = append(out, elems[:i]...)
	out = append(out, v)
	return append(out, elems[i:]...)
}

func applyLRem(s *Store, now int64, c *Command) Reply {
	v, count := c.Args[1], c.Int
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	// limit is how many to remove (0: all); from the tail when count < 0.
	limit, fromTail := count, count < 0
	if fromTail {
		limit = -count // -MinInt64 stays negative: below any removed count
	}
	var removed int64
	filter := func(elems [][]byte, reverse bool) [][]byte {
		out := make([][]byte, 0, len(elems))
		keep := make([]bool, len(elems))
		for k := range elems {
			i := k
			if reverse {
				i = len(elems) - 1 - k
			}
			if string(elems[i]) == string(v) && (limit <= 0 || removed < limit) {
				removed++
				continue
			}
			keep[i] = true
		}
		for i, e := range elems {
			if keep[i] {
				out = append(out, e)
			}
		}
		return out
	}
	if limit < 0 {
		limit = 0 // -MinInt64: no limit
	}
	s.editListLocked(it, func(elems [][]byte) [][]byte {
		return filter(elems, fromTail)
	}, func(q *quicklist) {
		type change struct {
			c     *qchunk
			elems [][]byte
		}
		var changes []change
		visit := func(ch *qchunk) bool {
			if limit > 0 && removed >= limit {
				return false
			}
			was := removed
			elems := filter(ch.entries(nil), fromTail)
			if removed != was {
				changes = append(changes, change{ch, elems})
			}
			return true
		}
		if fromTail {
			q.chunks.Reverse(visit)
		} else {
			q.chunks.Scan(visit)
		}
		for _, ch := range changes {
			q.replace(ch.c, ch.elems)
		}
	})
	return IntReply(removed)
}

func applyLTrim(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyOK
	}
	n := listLen(&it)
	ltrim, rtrim := n, int64(0) // an empty range trims everything
	if start, stop, inRange := rankRange(c.Int, c.Int2, n); inRange {
		ltrim, rtrim = start, n-stop-1
	}
	if ltrim == 0 && rtrim == 0 {
		return replyOK
	}
	s.editListLocked(it, func(elems [][]byte) [][]byte {
		return elems[ltrim : int64(len(elems))-rtrim]
	}, func(q *quicklist) { q.trim(ltrim, rtrim) })
	s.reportDirtyLocked(ltrim + rtrim)
	return replyOK
}

func readLPos(s *Store, now int64, c *Command) Reply {
	v, rank := c.Args[1], c.Int
	counted := c.Flags&FlagListCount != 0
	count, maxlen := c.Int2, int64(c.Float)
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindList)
	switch {
	case wrong:
		return replyWrongType
	case !ok && counted:
		return Reply{Kind: ReplyArray, Array: []Reply{}}
	case !ok:
		return replyNil
	}
	tail := rank < 0
	if tail {
		rank = -rank // -MinInt64 stays negative, as in Redis: every match ranks
	}
	n := listLen(&it)
	var out []Reply
	var index, matches int64
	found := int64(-1)
	visit := func(e []byte) bool {
		if maxlen != 0 && index >= maxlen {
			return false
		}
		if string(e) == string(v) {
			matches++
			if matches >= rank {
				at := index
				if tail {
					at = n - index - 1
				}
				if !counted {
					found = at
					return false
				}
				out = append(out, IntReply(at))
				if count != 0 && matches-rank+1 >= count {
					return false
				}
			}
		}
		index++
		return true
	}
	if q, ok := it.obj.(*quicklist); ok {
		if tail {
			q.reverseFrom(n-1, visit)
		} else {
			q.rangeFrom(0, visit)
		}
	} else {
		elems := listUnpack(it.val)
		for k := range elems {
			i := k
			if tail {
				i = len(elems) - 1 - k
			}
			if !visit(elems[i]) {
				break
			}
		}
	}
	if counted {
		if out == nil {
			out = []Reply{}
		}
		return Reply{Kind: ReplyArray, Array: out}
	}
	if found < 0 {
		return replyNil
	}
	return IntReply(found)
}

// Snapshots: a list is its length and its elements, head to tail, in
// either form, so the bytes do not depend on how the list is held.

func writeList(w *snapWriter, it *item) {
	w.uvarint(uint64(listLen(it)))
	listElements(it, func(e []byte) bool {
		w.bytes(e)
		return w.ok()
	})
}

// listMaxLen bounds the length a snapshot may announce.
const listMaxLen = 1 << 40

func readList(r *snapReader, it *item) {
	n := r.count(listMaxLen)
	limits := DefaultLimits()
	var elems [][]byte
	var q *quicklist
	var scratch []byte
	for i := uint64(0); i < n && r.err == nil; i++ {
		scratch = r.bytes(scratch[:0])
		if r.err != nil {
			return
		}
		if q == nil && !limits.listFits(int64(i+1), listEntriesBytes(elems)+listEntrySize(scratch), false) {
			q = quicklistOf(elems)
			elems = nil
		}
		if q != nil {
			q.pushTail(scratch)
		} else {
			elems = append(elems, append([]byte(nil), scratch...))
		}
	}
	if r.err != nil {
		return
	}
	if q != nil {
		it.obj = q
	} else {
		it.val = listPack(elems)
	}
}

func listElements(it *item, fn func(elem []byte) bool) {
	if q, ok := it.obj.(*quicklist); ok {
		if q.n > 0 {
			q.rangeFrom(0, fn)
		}
		return
	}
	for _, e := range listUnpack(it.val) {
		if !fn(e) {
			return
		}
	}
}

// Result tokens. A blocked client's pop on a cluster may be committed and
// its reply lost with the leader; the server then learns the reply from
// its own replica's apply. A pop carrying a token (a random number the
// server drew) reports its reply through the ready hook under a key no
// client can name, which ResultOf decodes; every replica reports it, since
// every replica applies the entry.

const resultKeyPrefix = "\x00kvs-result\x00"

// withResultToken wraps a pop's apply so that a token in Int2 reports the
// reply.
func withResultToken(apply func(s *Store, now int64, c *Command) Reply) func(s *Store, now int64, c *Command) Reply {
	return func(s *Store, now int64, c *Command) Reply {
		r := apply(s, now, c)
		if c.Int2 != 0 {
			s.noteResultLocked(c.Int2, r)
		}
		return r
	}
}

// noteResultLocked reports r as the reply of the command with token.
func (s *Store) noteResultLocked(token int64, r Reply) {
	if s.readyHook == nil {
		return
	}
	key := binary.BigEndian.AppendUint64([]byte(resultKeyPrefix), uint64(token))
	s.signalReadyLocked(AppendReplies(key, []Reply{r}))
}

// ResultOf decodes a key the ready hook received: if it reports a
// command's reply (see withResultToken), it returns the command's token
// and reply.
func ResultOf(key string) (token int64, r Reply, ok bool) {
	if len(key) < len(resultKeyPrefix)+8 || key[:len(resultKeyPrefix)] != resultKeyPrefix {
		return 0, Reply{}, false
	}
	b := []byte(key[len(resultKeyPrefix):])
	replies, err := DecodeReplies(b[8:])
	if err != nil || len(replies) != 1 {
		return 0, Reply{}, false
	}
	return int64(binary.BigEndian.Uint64(b)), replies[0], true
}
