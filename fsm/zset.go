package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"unsafe"
)

// Sorted sets: the value's two forms, the snapshot encoding and the kind
// row. The commands are in zset_cmds.go.
//
// A sorted set is ordered by (score, member), scores compared as float64
// (so -0 equals 0, as in Redis) and members bytewise. NaN is never stored.
//
// While it holds at most zset-max-listpack-entries members, none longer
// than zset-max-listpack-value, a sorted set is packed in item.val (OBJECT
// ENCODING "listpack"):
//
//	packed = count:uvarint (len:uvarint member score:8 bytes LE)*count
//
// entries in (score, member) order. A write builds a new buffer. Past the
// thresholds (or sorted by SORT ... STORE, as Redis's SORT converts it) it
// becomes a zsetObj ("skiplist"): a B+tree of (score,
// member) whose counted nodes give ranks in O(log n), and a B+tree of
// (memberHash, member) -> score for ZSCORE and ZSCAN's cursor. Both are
// ztrees (zset_tree.go): copy-on-write, so a snapshot shares them, and
// holding members in flat buffers, so a big set costs the garbage
// collector a few objects per node rather than one per member. Like
// Redis, a sorted set never goes back to the packed form, except when a
// command rewrites the whole key (ZUNIONSTORE, ZRANGESTORE, ...).

// Op numbers are part of the log format: append only.
const (
	// OpZAdd (ZADD, ZINCRBY): Args[0]=key, then pairs of score (8 bytes,
	// little-endian float64 bits, not NaN) and member. Flags: FlagZNX,
	// FlagZXX, FlagZGT, FlagZLT, FlagZCH, FlagZIncr (one pair). Reply
	// :added (or added+updated with CH); with INCR the new score or nil.
	OpZAdd Op = opBaseZSet + iota
	// OpZRem: Args[0]=key, Args[1:]=members. Reply :removed.
	OpZRem
	// OpZRemRange (ZREMRANGEBYRANK/SCORE/LEX): Args[0]=key; the range as
	// in OpZRange (FlagZByScore, FlagZByLex, or ranks). Reply :removed.
	OpZRemRange
	// OpZPop (ZPOPMIN, ZPOPMAX): Args[0]=key; FlagZMax pops the highest;
	// FlagZCount: Int=count (>= 0) and a pairs reply; else one element,
	// replied [member, score].
	OpZPop
	// OpZMPop (ZMPOP, and the non-blocking form of BZMPOP, BZPOPMIN and
	// BZPOPMAX): Args=keys, Int=count (>= 1), FlagZMax. Reply [key,
	// [[member, score]...]] from the first non-empty key (with FlagZBPop,
	// BZPOPMIN's [key, member, score]), or a nil array (FlagZReady: keys
	// of another type count as missing).
	OpZMPop
	// OpZRangeStore: Args[0]=dst, Args[1]=src, then the range as in
	// OpZRange (shifted by one). Reply :stored count.
	OpZRangeStore
	// OpZSetOpStore (ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE): Args[0]=dst,
	// then the sources as in OpZSetOp. Reply :stored count.
	OpZSetOpStore

	// OpZCard: Args[0]=key. Reply :count.
	OpZCard
	// OpZScore: Args[0]=key, Args[1]=member. Reply double or nil.
	OpZScore
	// OpZMScore: Args[0]=key, Args[1:]=members. Reply array of double or nil.
	OpZMScore
	// OpZRank (ZRANK, ZREVRANK with FlagZRev): Args[0]=key, Args[1]=member.
	// With FlagZWithScores (Redis 7.2's WITHSCORE) the reply is [rank,
	// score], and a nil array when there is no such member.
	OpZRank
	// OpZCount (ZCOUNT, ZLEXCOUNT with FlagZByLex): Args[0]=key, the range
	// as in OpZRange. Reply :count.
	OpZCount
	// OpZRange (ZRANGE and its older forms): Args[0]=key. Ranks: Int=start,
	// Int2=end. FlagZByScore: Float=min, Float2=max, FlagZMinEx and
	// FlagZMaxEx for exclusive ends. FlagZByLex: Args[1]=min, Args[2]=max
	// as the client wrote them ("-", "+", "[a", "(a"). With either, Int is
	// the LIMIT offset (negative: nothing) and Int2 the count (negative: no
	// limit). FlagZRev: from the highest; min and max are as stored, not
	// swapped. FlagZWithScores: a pairs reply.
	OpZRange
	// OpZRandMember: Args[0]=key. FlagZCount: Int=count (negative: with
	// repeats), FlagZWithScores. Random choice is a read.
	OpZRandMember
	// OpZSetOp (ZUNION, ZINTER, ZDIFF, ZINTERCARD): Args=keys, then with
	// FlagZWeights one weight per key (8 bytes, float64 bits). Int2 is the
	// kind: zsetUnion, zsetInter, zsetDiff, zsetInterCard. FlagZAggMin,
	// FlagZAggMax; FlagZWithScores; Int=ZINTERCARD's LIMIT (0: none).
	// Sets count as sorted sets of score 1.
	OpZSetOp
	// OpZScan: Args[0]=key, Args[1]=match pattern ("": all), Int=cursor
	// (-1: past every cursor), Int2=count.
	OpZScan
	// OpZCheck: Args[0]=an error text ("ERR ..."), Args[1:]=keys. The
	// answer to a command whose options are wrong but which Redis checks
	// its keys for first: WRONGTYPE if a key holds something else
	// (Int=zsetCheckSetOp: neither a sorted set nor a set; zsetCheckScan:
	// not a sorted set), ZSCAN's empty page for a missing key with
	// zsetCheckScan, else the error.
	OpZCheck
)

// Sorted set command flags. Bits 0-3 are the shared NX/XX/GT/LT; the
// rest are fresh bits so no op accepts a meaning it does not have.
const (
	FlagZNX         = FlagNX
	FlagZXX         = FlagXX
	FlagZGT         = FlagGT
	FlagZLT         = FlagLT
	FlagZCH   Flags = 1 << 8
	FlagZIncr Flags = 1 << 9

	FlagZRev        Flags = 1 << 10
	FlagZWithScores Flags = 1 << 11
	FlagZByScore    Flags = 1 << 12
	FlagZByLex      Flags = 1 << 13
	FlagZMinEx      Flags = 1 << 14
	FlagZMaxEx      Flags = 1 << 15
	FlagZMax        Flags = 1 << 16
	FlagZCount      Flags = 1 << 17
	FlagZAggMin     Flags = 1 << 18
	FlagZAggMax     Flags = 1 << 19
	FlagZWeights    Flags = 1 << 20
	FlagZBPop       Flags = 1 << 21
	// FlagZReady: OpZMPop for a client woken because its key was made
	// ready; a key that holds another type by then is passed over as if
	// missing (FlagListReady's rule).
	FlagZReady Flags = 1 << 22
)

// OpZSetOp kinds (Int2).
const (
	ZSetUnion     = 0
	ZSetInter     = 1
	ZSetDiff      = 2
	ZSetInterCard = 3
)

// OpZCheck modes (Int).
const (
	ZCheckSetOp = 0
	ZCheckScan  = 1
)

// Error texts of sorted sets that depend on the data.
const (
	ErrZSetNaN = "ERR resulting score is not a number (NaN)"
)

// zent is one member and its score.
type zent struct {
	score  float64
	member string
}

func zentLess(a, b zent) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.member < b.member
}

// zentCompare is zentLess as a comparison, for package slices.
func zentCompare(a, b zent) int {
	switch {
	case zentLess(a, b):
		return -1
	case zentLess(b, a):
		return 1
	}
	return 0
}

// zsetObj is a sorted set's large form: two ztrees, byScore of
// (scoreKey(score), member) -> whether the score is -0 (see scoreOf),
// whose counts give ranks, and byMember of (memberHash, member) -> score
// bits, for ZSCORE and ZSCAN's cursor. Both hold the member's bytes themselves, in their nodes'
// buffers.
type zsetObj struct {
	byScore  *ztree
	byMember *ztree
	bytes    int64 // the entries' share of size()
	gen      uint64
}

func newZSetObj() *zsetObj {
	return &zsetObj{byScore: newZTree(false), byMember: newZTree(true)}
}

// negZero is byScore's value for a score: 1 for -0, which the large form
// keeps (as Redis's skiplist does) though it orders it as 0.
func negZero(f float64) uint64 {
	if f == 0 && math.Signbit(f) {
		return 1
	}
	return 0
}

// scoreOf is the score of a byScore entry.
func scoreOf(k, neg uint64) float64 {
	if neg != 0 {
		return math.Copysign(0, -1)
	}
	return keyScore(k)
}

// scoreKey maps a score to a uint64 of the same order (-0 as 0); NaN is
// never stored.
func scoreKey(f float64) uint64 {
	b := math.Float64bits(packedScore0(f))
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// keyScore is scoreKey's inverse (-0 comes back as 0).
func keyScore(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// Per-entry memory of the large form, estimated: a slot in a node of
// each tree (a 1024-byte node with a member buffer of at least zminAlloc
// bytes, and in the member index a zminAlloc-byte array of values, hold
// ztreeFan slots and are about 70% full), and the member's bytes in each,
// with the slack of append-only buffers.
const (
	zsetSlotBytes = (2*(1024+zminAlloc) + zminAlloc) / 2 / (ztreeFan * 7 / 10)
	zsetObjBytes  = int64(unsafe.Sizeof(zsetObj{})) + 2*int64(unsafe.Sizeof(ztree{}))
)

func zentBytes(m string) int64 { return 2*zsetSlotBytes + 5*int64(len(m))/2 }

func (z *zsetObj) clone() object {
	return &zsetObj{byScore: z.byScore.copy(), byMember: z.byMember.copy(), bytes: z.bytes}
}
func (z *zsetObj) size() int64     { return zsetObjBytes + z.bytes }
func (z *zsetObj) cowGen() *uint64 { return &z.gen }
func (z *zsetObj) freeEffort() int { return z.card() }
func (z *zsetObj) card() int       { return z.byScore.len() }

func (z *zsetObj) score(m string) (float64, bool) {
	v, ok := z.byMember.get(memberHashString(m), m)
	return math.Float64frombits(v), ok
}

// insert adds a member that is not there (the trees copy its bytes).
func (z *zsetObj) insert(m string, s float64) {
	z.byScore.set(scoreKey(s), negZero(s), m)
	z.byMember.set(memberHashString(m), math.Float64bits(s), m)
	z.bytes += zentBytes(m)
}

// setScore moves member m, whose score is old, to score s.
func (z *zsetObj) setScore(m string, old, s float64) {
	z.byScore.deletePresent(scoreKey(old), m)
	z.byScore.set(scoreKey(s), negZero(s), m)
	z.byMember.set(memberHashString(m), math.Float64bits(s), m)
}

// remove deletes member m, whose score is s.
func (z *zsetObj) remove(m string, s float64) {
	z.byScore.deletePresent(scoreKey(s), m)
	z.byMember.deletePresent(memberHashString(m), m)
	z.bytes -= zentBytes(m)
}

// removeAt deletes the member of rank i.
func (z *zsetObj) removeAt(i int) {
	_, _, m := z.byScore.deleteAt(i)
	z.byMember.deletePresent(memberHashString(m), m)
	z.bytes -= zentBytes(m)
}

// at returns the entry of rank i; its member aliases the tree.
func (z *zsetObj) at(i int) zent {
	k, neg, m := z.byScore.at(i)
	return zent{scoreOf(k, neg), m}
}

// zview reads a sorted set in either form by rank: a packed set decoded
// into ents (members aliasing the packed buffer), or the large form.
type zview struct {
	ents []zent
	obj  *zsetObj
}

func (v zview) card() int {
	if v.obj != nil {
		return v.obj.card()
	}
	return len(v.ents)
}

func (v zview) at(i int) zent {
	if v.obj != nil {
		return v.obj.at(i)
	}
	return v.ents[i]
}

// search returns the first rank whose entry before reports false, before
// being true for a prefix of the order and false after it: O(log n) on
// either form. before sees a score of -0 as 0.
func (v zview) search(before func(zent) bool) int {
	if v.obj != nil {
		return v.obj.byScore.search(func(k uint64, m string) bool { return before(zent{keyScore(k), m}) })
	}
	lo, hi := 0, v.card()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if before(v.at(mid)) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (v zview) score(m string) (float64, bool) {
	if v.obj != nil {
		return v.obj.score(m)
	}
	for _, e := range v.ents {
		if e.member == m {
			return e.score, true
		}
	}
	return 0, false
}

// each calls fn for the entries from rank i on, upwards, or downwards when
// rev, until fn returns false.
func (v zview) each(i int, rev bool, fn func(zent) bool) {
	n := v.card()
	if i < 0 || i >= n {
		return
	}
	if v.obj == nil {
		if rev {
			for ; i >= 0 && fn(v.ents[i]); i-- {
			}
		} else {
			for ; i < n && fn(v.ents[i]); i++ {
			}
		}
		return
	}
	v.obj.byScore.walk(i, rev, func(k, neg uint64, m string) bool {
		return fn(zent{scoreOf(k, neg), m})
	})
}

// zsetView returns the view of a sorted set item.
func zsetView(it *item) zview {
	if it.obj != nil {
		return zview{obj: it.obj.(*zsetObj)}
	}
	return zview{ents: decodePacked(it.val, nil)}
}

// decodePacked appends the entries of a packed set (validated when it was
// built or restored) to dst; members alias b.
func decodePacked(b []byte, dst []zent) []zent {
	n, k := binary.Uvarint(b)
	b = b[k:]
	if dst == nil {
		dst = make([]zent, 0, n)
	}
	for range n {
		l, k := binary.Uvarint(b)
		b = b[k:]
		m := unsafeString(b[:l])
		b = b[l:]
		dst = append(dst, zent{math.Float64frombits(binary.LittleEndian.Uint64(b)), m})
		b = b[8:]
	}
	return dst
}

// packedScore finds m in a packed set without decoding it.
func packedScore(b []byte, m []byte) (float64, bool) {
	n, k := binary.Uvarint(b)
	b = b[k:]
	for range n {
		l, k := binary.Uvarint(b)
		b = b[k:]
		if int(l) == len(m) && string(b[:l]) == string(m) {
			return math.Float64frombits(binary.LittleEndian.Uint64(b[l:])), true
		}
		b = b[int(l)+8:]
	}
	return 0, false
}

func packedCard(b []byte) int {
	n, _ := binary.Uvarint(b)
	return int(n)
}

// encodePacked builds the packed form of ents, which are in order (a -0
// score is written as 0, see packedScore0).
func encodePacked(ents []zent) []byte {
	n := binary.MaxVarintLen64
	for _, e := range ents {
		n += binary.MaxVarintLen64 + len(e.member) + 8
	}
	b := make([]byte, 0, n)
	b = binary.AppendUvarint(b, uint64(len(ents)))
	for _, e := range ents {
		b = binary.AppendUvarint(b, uint64(len(e.member)))
		b = append(b, e.member...)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(packedScore0(e.score)))
	}
	return slices.Clip(b)
}

// buildZSetObj builds the large form of ents, which are in order; the
// members are copied. In order, each tree fills its nodes.
func buildZSetObj(ents []zent) *zsetObj {
	z := newZSetObj()
	type hashed struct {
		hash uint64
		zent
	}
	mems := make([]hashed, len(ents))
	for i, e := range ents {
		z.byScore.set(scoreKey(e.score), negZero(e.score), e.member)
		mems[i] = hashed{memberHashString(e.member), e}
		z.bytes += zentBytes(e.member)
	}
	slices.SortFunc(mems, func(a, b hashed) int {
		if zkeyLess(a.hash, a.member, b.hash, b.member) {
			return -1
		}
		return 1
	})
	for _, e := range mems {
		z.byMember.set(e.hash, math.Float64bits(e.score), e.member)
	}
	return z
}

// fitsPacked reports whether a set of n members, the longest maxLen bytes,
// is packed under l.
func fitsPacked(l *Limits, n int, maxLen int) bool {
	return int64(n) <= l.ZSetMaxListpackEntries && int64(maxLen) <= l.ZSetMaxListpackValue
}

// formatScore is a score as Redis 7.0 prints it: "%.17g", and "inf" and
// "-inf".
func formatScore(f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return []byte("inf")
	case math.IsInf(f, -1):
		return []byte("-inf")
	}
	return strconv.AppendFloat(make([]byte, 0, 24), f, 'g', 17, 64)
}

func scoreReply(f float64) Reply { return Reply{Kind: ReplyDouble, Bulk: formatScore(f)} }

// memberReply aliases a stored member: members are never modified.
func memberReply(m string) Reply {
	return Reply{Kind: ReplyBulk, Bulk: unsafe.Slice(unsafe.StringData(m), len(m))}
}

func init() {
	registerKind(kindZSet, kindSpec{
		name: "zset",
		encoding: func(it *item) string {
			if it.obj != nil {
				return "skiplist"
			}
			return "listpack"
		},
		write:    writeZSet,
		read:     readZSet,
		elements: zsetElements,
	})
}

// Snapshot value of a sorted set:
//
//	zset   = form:byte(0) packed:bytes | form:byte(1) count:uvarint (member:bytes score:8 bytes)*count
//
// where packed is item.val as above and the large form's entries are in
// (score, member) order. The form is kept so that OBJECT ENCODING (and
// ZSCAN's paging) are the same after a restart.
func writeZSet(w *snapWriter, it *item) {
	if it.obj == nil {
		w.buf = append(w.buf, 0)
		w.bytes(it.val)
		return
	}
	z := it.obj.(*zsetObj)
	w.buf = append(w.buf, 1)
	w.uvarint(uint64(z.card()))
	i := 0
	z.byScore.walk(0, false, func(k, neg uint64, m string) bool {
		w.string(m)
		w.float(scoreOf(k, neg))
		if i++; i%zsetWriteYield == 0 {
			runtime.Gosched()
		}
		return w.ok()
	})
}

// zsetWriteYield is how many members writeZSet writes between yields of
// its goroutine (see writeZSet).
const zsetWriteYield = 1024

// maxZSetCount bounds a restored sorted set's member count.
const maxZSetCount = 1 << 32

func readZSet(r *snapReader, it *item) {
	switch form := r.byte(); {
	case r.err != nil:
	case form == 0:
		b := r.bytes(nil)
		if r.err != nil {
			return
		}
		if err := checkPacked(b); err != nil {
			r.fail(err)
			return
		}
		it.val = slices.Clip(b)
	case form == 1:
		n := r.count(maxZSetCount)
		z := newZSetObj()
		var prev zent
		var buf, prevBuf []byte
		for i := uint64(0); i < n && r.err == nil; i++ {
			buf = r.bytes(buf[:0])
			m := unsafeString(buf) // the trees copy it
			s := r.float()
			e := zent{s, m}
			switch {
			case r.err != nil:
				return
			case math.IsNaN(s):
				r.fail(fmt.Errorf("%w: sorted set member %d has a NaN score", ErrCorrupt, i))
				return
			case i > 0 && !zentLess(prev, e):
				r.fail(fmt.Errorf("%w: sorted set member %d out of order", ErrCorrupt, i))
				return
			}
			if z.byMember.set(memberHashString(m), math.Float64bits(s), m) {
				r.fail(fmt.Errorf("%w: sorted set member %d repeated", ErrCorrupt, i))
				return
			}
			z.byScore.set(scoreKey(s), negZero(s), m)
			z.bytes += zentBytes(m)
			prev, buf, prevBuf = e, prevBuf, buf
		}
		it.obj = z
	default:
		r.fail(fmt.Errorf("%w: sorted set form %d", ErrCorrupt, form))
	}
}

// checkPacked validates a packed set from a snapshot: its framing, at
// least one member, order, no NaN, no repeated member.
func checkPacked(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: packed sorted set: %s", ErrCorrupt, what) }
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > uint64(len(b)) {
		return bad("bad count")
	}
	rest := b[k:]
	seen := make(map[string]bool, n)
	var prev zent
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) || uint64(len(rest)-k)-l < 8 {
			return bad("truncated entry")
		}
		rest = rest[k:]
		e := zent{math.Float64frombits(binary.LittleEndian.Uint64(rest[l:])), string(rest[:l])}
		rest = rest[l+8:]
		switch {
		case math.IsNaN(e.score):
			return bad("NaN score")
		case math.Signbit(e.score) && e.score == 0:
			return bad("negative zero score")
		case i > 0 && !zentLess(prev, e):
			return bad("members out of order")
		case seen[e.member]:
			return bad("repeated member")
		}
		seen[e.member] = true
		prev = e
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	return nil
}

func zsetElements(it *item, fn func(elem []byte) bool) {
	zsetView(it).each(0, false, func(e zent) bool {
		return fn(unsafe.Slice(unsafe.StringData(e.member), len(e.member)))
	})
}
