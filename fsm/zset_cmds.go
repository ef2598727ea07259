package fsm

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// The sorted set commands, as Redis 7.0's t_zset.c runs them.

func init() {
	registerOp(OpZAdd, opSpec{name: "ZADD", write: true, args: argsAtLeast(3), first: 1, step: 2,
		flags: FlagZNX | FlagZXX | FlagZGT | FlagZLT | FlagZCH | FlagZIncr, check: checkZAdd, apply: applyZAdd})
	registerOp(OpZRem, opSpec{name: "ZREM", write: true, args: argsAtLeast(2), apply: applyZRem})
	registerOp(OpZRemRange, opSpec{name: "ZREMRANGE", write: true, args: argsAtLeast(1),
		flags: FlagZByScore | FlagZByLex | FlagZMinEx | FlagZMaxEx, check: checkRangeAt(0), apply: applyZRemRange})
	registerOp(OpZPop, opSpec{name: "ZPOP", write: true, args: 1, flags: FlagZMax | FlagZCount,
		check: func(c *Command) error {
			if c.Int < 0 {
				return errorString("negative count")
			}
			return nil
		}, apply: applyZPop})
	registerOp(OpZMPop, opSpec{name: "ZMPOP", write: true, args: argsAtLeast(1), flags: FlagZMax | FlagZBPop | FlagZReady, keys: keysAll,
		check: func(c *Command) error {
			if c.Int < 1 {
				return errorString("count below 1")
			}
			return nil
		}, apply: applyZMPop})
	registerOp(OpZRangeStore, opSpec{name: "ZRANGESTORE", write: true, args: argsAtLeast(2), keys: keysFirst(2),
		flags: zrangeFlags &^ FlagZWithScores, check: checkRangeAt(1), apply: applyZRangeStore})
	registerOp(OpZSetOpStore, opSpec{name: "ZSETOPSTORE", write: true, args: argsAtLeast(2),
		flags: FlagZAggMin | FlagZAggMax | FlagZWeights, check: checkSetOpAt(1), apply: applyZSetOpStore,
		keys: func(c *Command) [][]byte {
			n := len(c.Args)
			if c.Flags&FlagZWeights != 0 {
				n = 1 + (n-1)/2
			}
			return c.Args[:n]
		}})

	registerOp(OpZCard, opSpec{name: "ZCARD", args: 1, read: readZCard})
	registerOp(OpZScore, opSpec{name: "ZSCORE", args: 2, read: readZScore})
	registerOp(OpZMScore, opSpec{name: "ZMSCORE", args: argsAtLeast(2), read: readZMScore})
	registerOp(OpZRank, opSpec{name: "ZRANK", args: 2, flags: FlagZRev | FlagZWithScores, read: readZRank})
	registerOp(OpZCount, opSpec{name: "ZCOUNT", args: argsAtLeast(1),
		flags: FlagZByScore | FlagZByLex | FlagZMinEx | FlagZMaxEx, check: checkRangeAt(0), read: readZCount})
	registerOp(OpZRange, opSpec{name: "ZRANGE", args: argsAtLeast(1), flags: zrangeFlags,
		check: checkRangeAt(0), read: readZRange})
	registerOp(OpZRandMember, opSpec{name: "ZRANDMEMBER", args: 1, flags: FlagZCount | FlagZWithScores,
		read: readZRandMember})
	registerOp(OpZSetOp, opSpec{name: "ZSETOP", args: argsAtLeast(1),
		flags: FlagZAggMin | FlagZAggMax | FlagZWeights | FlagZWithScores, check: checkSetOpAt(0), read: readZSetOp,
		keys: func(c *Command) [][]byte {
			n := len(c.Args)
			if c.Flags&FlagZWeights != 0 {
				n /= 2
			}
			return c.Args[:n]
		}})
	registerOp(OpZScan, opSpec{name: "ZSCAN", args: 2, flags: FlagScanMatch, read: readZScan,
		check: func(c *Command) error {
			if c.Int < -1 {
				return errorString("bad cursor")
			}
			return nil
		}})
	registerOp(OpZCheck, opSpec{name: "ZCHECK", args: argsAtLeast(2), read: readZCheck, keys: keysFrom(1),
		check: func(c *Command) error {
			if len(c.Args[0]) < 4 || string(c.Args[0][:4]) != "ERR " {
				return errorString("not an error text")
			}
			return nil
		}})
}

const zrangeFlags = FlagZByScore | FlagZByLex | FlagZMinEx | FlagZMaxEx | FlagZRev | FlagZWithScores

func checkZAdd(c *Command) error {
	for i := 1; i < len(c.Args); i += 2 {
		if !validScoreArg(c.Args[i]) {
			return errorString("bad score")
		}
	}
	if c.Flags&FlagZIncr != 0 && len(c.Args) != 3 {
		return errorString("INCR with more than one pair")
	}
	return nil
}

// checkRangeAt returns the check of a command whose key is Args[at],
// followed by the range of OpZRange.
func checkRangeAt(at int) func(c *Command) error {
	return func(c *Command) error {
		n := len(c.Args) - at
		switch f := c.Flags; {
		case f&FlagZByScore != 0 && f&FlagZByLex != 0:
			return errorString("both BYSCORE and BYLEX")
		case f&FlagZByLex != 0:
			if n != 3 || !ValidLexBound(c.Args[at+1]) || !ValidLexBound(c.Args[at+2]) {
				return errorString("bad lex range")
			}
		case f&FlagZByScore != 0:
			if n != 1 || math.IsNaN(c.Float) || math.IsNaN(c.Float2) {
				return errorString("bad score range")
			}
		default:
			if n != 1 || f&(FlagZMinEx|FlagZMaxEx) != 0 {
				return errorString("bad rank range")
			}
		}
		return nil
	}
}

// checkSetOpAt checks the keys from Args[at] on and their weights.
func checkSetOpAt(at int) func(c *Command) error {
	return func(c *Command) error {
		n := len(c.Args) - at
		if c.Flags&FlagZWeights != 0 {
			if n%2 != 0 || n == 0 {
				return errorString("weights do not pair with keys")
			}
			for _, w := range c.Args[at+n/2:] {
				if !validScoreArg(w) {
					return errorString("bad weight")
				}
			}
		}
		if c.Int2 < ZSetUnion || c.Int2 > ZSetInterCard || (at > 0 && c.Int2 == ZSetInterCard) || c.Int < 0 {
			return errorString("bad set operation")
		}
		if c.Flags&(FlagZAggMin|FlagZAggMax) == FlagZAggMin|FlagZAggMax {
			return errorString("two aggregates")
		}
		return nil
	}
}

func applyZAdd(s *Store, now int64, c *Command) Reply {
	f := c.Flags
	incr := f&FlagZIncr != 0
	e, wrong := s.openZSetLocked(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	if !e.exists && f&FlagZXX != 0 {
		if incr {
			return replyNil
		}
		return replyZero
	}
	var added, updated, processed int64
	var last float64
	for i := 1; i < len(c.Args); i += 2 {
		score, m := scoreOfArg(c.Args[i]), c.Args[i+1]
		cur, found := e.score(m)
		switch {
		case found:
			if f&FlagZNX != 0 {
				continue
			}
			if incr {
				score += cur
				if math.IsNaN(score) {
					e.commit()
					return ErrorReply(ErrZSetNaN)
				}
			}
			if (f&FlagZLT != 0 && score >= cur) || (f&FlagZGT != 0 && score <= cur) {
				continue
			}
			processed++
			last = score
			// -0 equals 0: Redis keeps the old score then.
			if score != cur {
				e.update(m, cur, score)
				updated++
			}
		case f&FlagZXX == 0:
			e.add(m, score)
			added++
			processed++
			last = score
		}
	}
	e.commit()
	s.reportDirtyLocked(added + updated)
	s.notifyChangedLocked(added+updated > 0)
	if added > 0 && !e.exists {
		// Redis signals the keys it adds, not those it adds to: a client
		// blocked on a sorted set that exists waits for it to be made
		// anew.
		s.signalReadyLocked(c.Args[0])
	}
	switch {
	case incr && processed > 0:
		return scoreReply(last)
	case incr:
		return replyNil
	case f&FlagZCH != 0:
		return IntReply(added + updated)
	}
	return IntReply(added)
}

func applyZRem(s *Store, now int64, c *Command) Reply {
	e, wrong := s.openZSetLocked(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	var n int64
	for _, m := range c.Args[1:] {
		if !e.exists || e.card() == 0 {
			break
		}
		if cur, ok := e.score(m); ok {
			e.remove(m, cur)
			n++
		}
	}
	e.commit()
	return IntReply(n)
}

// zrange is the range of OpZRange and its relatives.
type zrange struct {
	byScore, byLex bool
	start, end     int64 // ranks
	min, max       float64
	minEx, maxEx   bool
	lmin, lmax     lexBound
	offset, limit  int64 // skip and count (negative limit: all)
	rev            bool
}

// rangeOf reads the range of c whose key is Args[at].
func rangeOf(c *Command, at int) zrange {
	f := c.Flags
	r := zrange{byScore: f&FlagZByScore != 0, byLex: f&FlagZByLex != 0, rev: f&FlagZRev != 0}
	switch {
	case r.byScore:
		r.min, r.max, r.minEx, r.maxEx = c.Float, c.Float2, f&FlagZMinEx != 0, f&FlagZMaxEx != 0
		r.offset, r.limit = c.Int, c.Int2
	case r.byLex:
		r.lmin, r.lmax = parseLexBound(c.Args[at+1]), parseLexBound(c.Args[at+2])
		r.offset, r.limit = c.Int, c.Int2
	default:
		r.start, r.end, r.limit = c.Int, c.Int2, -1
	}
	return r
}

// span returns the ranks [from, to) of the range in ascending order,
// before any LIMIT.
func (r *zrange) span(v zview) (from, to int) {
	n := int64(v.card())
	switch {
	case r.byScore:
		from = v.search(func(e zent) bool { return e.score < r.min || (r.minEx && e.score == r.min) })
		to = v.search(func(e zent) bool { return e.score < r.max || (!r.maxEx && e.score == r.max) })
	case r.byLex:
		from = v.search(func(e zent) bool { return !r.lmin.gteMin(e.member) })
		to = v.search(func(e zent) bool { return r.lmax.lteMax(e.member) })
	default:
		start, end, ok := rankRange(r.start, r.end, n)
		if !ok {
			return 0, 0
		}
		if r.rev {
			return int(n - 1 - end), int(n - start)
		}
		return int(start), int(end + 1)
	}
	return from, max(from, to)
}

// collect returns the range's entries in reply order, LIMIT applied.
func (r *zrange) collect(v zview) []zent {
	from, to := r.span(v)
	if r.offset < 0 || int64(to-from) <= r.offset {
		return nil
	}
	n := int64(to-from) - r.offset
	if r.limit >= 0 && r.limit < n {
		n = r.limit
	}
	if n == 0 {
		return nil
	}
	out := make([]zent, 0, n)
	start := from + int(r.offset)
	if r.rev {
		start = to - 1 - int(r.offset)
	}
	v.each(start, r.rev, func(e zent) bool {
		out = append(out, e)
		return int64(len(out)) < n
	})
	return out
}

// entriesReply is a range reply: members, or pairs of member and score.
func entriesReply(ents []zent, withScores bool) Reply {
	out := make([]Reply, len(ents))
	for i, e := range ents {
		if withScores {
			out[i] = Reply{Kind: ReplyArray, Array: []Reply{memberReply(e.member), scoreReply(e.score)}}
		} else {
			out[i] = memberReply(e.member)
		}
	}
	if withScores {
		return Reply{Kind: ReplyPairs, Array: out}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

var replyEmptyArray = Reply{Kind: ReplyArray, Array: []Reply{}}

func applyZRemRange(s *Store, now int64, c *Command) Reply {
	e, wrong := s.openZSetLocked(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	if !e.exists {
		return replyZero
	}
	r := rangeOf(c, 0)
	from, to := r.span(e.view())
	e.removeRange(from, to)
	e.commit()
	return IntReply(int64(to - from))
}

// pop pops up to n members of the set at e, lowest or highest first.
func (e *zedit) pop(n int, highest bool) []zent {
	card := e.card()
	n = min(n, card)
	v := e.view()
	out := make([]zent, 0, n)
	start := 0
	if highest {
		start = card - 1
	}
	v.each(start, highest, func(x zent) bool {
		out = append(out, x)
		return len(out) < n
	})
	if highest {
		e.removeRange(card-n, card)
	} else {
		e.removeRange(0, n)
	}
	e.commit()
	return out
}

func pairArrays(ents []zent) []Reply {
	out := make([]Reply, len(ents))
	for i, x := range ents {
		out[i] = Reply{Kind: ReplyArray, Array: []Reply{memberReply(x.member), scoreReply(x.score)}}
	}
	return out
}

func applyZPop(s *Store, now int64, c *Command) Reply {
	e, wrong := s.openZSetLocked(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !e.exists || (c.Flags&FlagZCount != 0 && c.Int == 0):
		return replyEmptyArray
	case c.Flags&FlagZCount == 0:
		x := e.pop(1, c.Flags&FlagZMax != 0)[0]
		return Reply{Kind: ReplyArray, Array: []Reply{memberReply(x.member), scoreReply(x.score)}}
	}
	n := int(min(c.Int, math.MaxInt32))
	return Reply{Kind: ReplyPairs, Array: pairArrays(e.pop(n, c.Flags&FlagZMax != 0))}
}

func applyZMPop(s *Store, now int64, c *Command) Reply {
	for _, key := range c.Args {
		e, wrong := s.openZSetLocked(now, key)
		if wrong && c.Flags&FlagZReady == 0 {
			return replyWrongType
		}
		if !e.exists {
			continue
		}
		name := e.it.key
		popped := e.pop(int(min(c.Int, math.MaxInt32)), c.Flags&FlagZMax != 0)
		if c.Flags&FlagZBPop != 0 {
			return Reply{Kind: ReplyArray, Array: []Reply{memberReply(name), memberReply(popped[0].member), scoreReply(popped[0].score)}}
		}
		return Reply{Kind: ReplyArray, Array: []Reply{memberReply(name), {Kind: ReplyArray, Array: pairArrays(popped)}}}
	}
	return Reply{Kind: ReplyNilArray}
}

func applyZRangeStore(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[1], kindZSet)
	if wrong {
		return replyWrongType
	}
	var ents []zent
	if ok {
		r := rangeOf(c, 1)
		ents = r.collect(zsetView(&it))
		if r.rev {
			slices.Reverse(ents) // stored in order, whatever the reply order
		}
	}
	s.storeZSetLocked(now, c.Args[0], ents)
	return IntReply(int64(len(ents)))
}

func readZCard(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	case it.obj != nil:
		return IntReply(int64(it.obj.(*zsetObj).card()))
	}
	return IntReply(int64(packedCard(it.val)))
}

// zscoreOf is the score of member m of the set at it.
func zscoreOf(it *item, m []byte) (float64, bool) {
	if it.obj != nil {
		return it.obj.(*zsetObj).score(unsafeString(m))
	}
	return packedScore(it.val, m)
}

func readZScore(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyNil
	}
	if f, ok := zscoreOf(&it, c.Args[1]); ok {
		return scoreReply(f)
	}
	return replyNil
}

func readZMScore(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	if wrong {
		return replyWrongType
	}
	out := make([]Reply, len(c.Args)-1)
	for i, m := range c.Args[1:] {
		if ok {
			if f, found := zscoreOf(&it, m); found {
				out[i] = scoreReply(f)
			}
		}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

func readZRank(s *Store, now int64, c *Command) Reply {
	none := replyNil
	if c.Flags&FlagZWithScores != 0 {
		none = Reply{Kind: ReplyNilArray}
	}
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return none
	}
	score, found := zscoreOf(&it, c.Args[1])
	if !found {
		return none
	}
	v := zsetView(&it)
	x := zent{score, unsafeString(c.Args[1])}
	rank := v.search(func(e zent) bool { return zentLess(e, x) })
	if c.Flags&FlagZRev != 0 {
		rank = v.card() - 1 - rank
	}
	if c.Flags&FlagZWithScores != 0 {
		return Reply{Kind: ReplyArray, Array: []Reply{IntReply(int64(rank)), scoreReply(score)}}
	}
	return IntReply(int64(rank))
}

func readZCount(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	r := rangeOf(c, 0)
	from, to := r.span(zsetView(&it))
	return IntReply(int64(to - from))
}

func readZRange(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyEmptyArray
	}
	r := rangeOf(c, 0)
	return entriesReply(r.collect(zsetView(&it)), c.Flags&FlagZWithScores != 0)
}

// readZRandMember picks at random: a read, so it need not be
// deterministic. A count at least the size answers the whole set in
// order, as Redis does.
func readZRandMember(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	withScores := c.Flags&FlagZWithScores != 0
	switch {
	case wrong:
		return replyWrongType
	case !ok && c.Flags&FlagZCount == 0:
		return replyNil
	case !ok || c.Int == 0 && c.Flags&FlagZCount != 0:
		return replyEmptyArray
	}
	v := zsetView(&it)
	n := v.card()
	if c.Flags&FlagZCount == 0 {
		return memberReply(v.at(rand.IntN(n)).member)
	}
	count := c.Int
	var ents []zent
	switch {
	case count < 0:
		// With repeats; the reply grows as it is built, as Redis's does.
		ents = make([]zent, 0, min(-count, 1<<16))
		for range uint64(-count) {
			ents = append(ents, v.at(rand.IntN(n)))
		}
	case count >= int64(n):
		ents = make([]zent, 0, n)
		v.each(0, false, func(e zent) bool { ents = append(ents, e); return true })
	default:
		var ranks []int
		if count*3 <= int64(n) {
			ranks = sampleRanks(n, int(count))
		} else {
			ranks = rand.Perm(n)[:count]
		}
		ents = make([]zent, len(ranks))
		for i, rk := range ranks {
			ents[i] = v.at(rk)
		}
	}
	return entriesReply(ents, withScores)
}

// sampleRanks draws k distinct ranks below n, k much smaller than n.
func sampleRanks(n, k int) []int {
	seen := make(map[int]bool, k)
	out := make([]int, 0, k)
	for len(out) < k {
		if r := rand.IntN(n); !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// readZScan is ZSCAN: a packed set all at once with cursor 0, as Redis
// answers for a listpack; the large form by SCAN's rule over the member
// index (the cursor is the hash of the next member, and a page never ends
// inside a run of equal hashes).
func readZScan(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindZSet)
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return zsetScanPage(0, []Reply{})
	}
	pattern := string(c.Args[1])
	all := pattern == "*" || (pattern == "" && c.Flags&FlagScanMatch == 0)
	match := func(m string) bool { return all || matchGlob(pattern, m) }
	out := []Reply{}
	if it.obj == nil {
		for _, e := range decodePacked(it.val, nil) {
			if match(e.member) {
				out = append(out, memberReply(e.member), BulkReply(listpackScore(e.score)))
			}
		}
		return zsetScanPage(0, out)
	}
	if c.Int < 0 {
		return zsetScanPage(0, out)
	}
	count := max(c.Int2, 1)
	var visited int64
	var last, next uint64
	idx := it.obj.(*zsetObj).byMember
	from := idx.search(func(h uint64, _ string) bool { return h < uint64(c.Int) })
	idx.walk(from, false, func(h, s uint64, m string) bool {
		if visited >= count && h != last {
			next = h
			return false
		}
		visited++
		last = h
		if match(m) {
			out = append(out, memberReply(m), BulkReply(formatScore(math.Float64frombits(s))))
		}
		return true
	})
	return zsetScanPage(next, out)
}

func zsetScanPage(cursor uint64, elems []Reply) Reply {
	return Reply{Kind: ReplyArray, Array: []Reply{
		BulkReply(strconv.AppendUint(nil, cursor, 10)), {Kind: ReplyArray, Array: elems}}}
}

func readZCheck(s *Store, now int64, c *Command) Reply {
	for _, key := range c.Args[1:] {
		it, ok := s.liveLocked(key, now)
		switch {
		case !ok && c.Int == ZCheckScan:
			return zsetScanPage(0, []Reply{})
		case !ok:
		case it.kind == kindZSet:
		case it.kind == kindSet && c.Int == ZCheckSetOp:
		default:
			return replyWrongType
		}
	}
	return ErrorReply(string(c.Args[0]))
}

// zsrc is one input of a set operation: a sorted set, or a set whose
// members all score 1.
type zsrc struct {
	n      int
	weight float64
	view   zview    // a sorted set
	set    []string // a set's members
	index  map[string]float64
}

func (z *zsrc) each(fn func(zent) bool) {
	if z.set == nil {
		z.view.each(0, false, fn)
		return
	}
	for _, m := range z.set {
		if !fn(zent{1, m}) {
			return
		}
	}
}

func (z *zsrc) score(m string) (float64, bool) {
	if z.set == nil && z.view.obj != nil {
		return z.view.obj.score(m)
	}
	if z.index == nil {
		z.index = make(map[string]float64, z.n)
		z.each(func(e zent) bool { z.index[e.member] = e.score; return true })
	}
	f, ok := z.index[m]
	return f, ok
}

// zsetSources reads the inputs of a set operation; wrong reports a key
// holding neither a sorted set nor a set.
func (s *Store) zsetSources(now int64, keys, weights [][]byte) (srcs []zsrc, wrong bool) {
	srcs = make([]zsrc, len(keys))
	for i, key := range keys {
		srcs[i].weight = 1
		if weights != nil {
			srcs[i].weight = scoreOfArg(weights[i])
		}
		it, ok := s.liveLocked(key, now)
		switch {
		case !ok:
		case it.kind == kindZSet:
			srcs[i].view = zsetView(&it)
			srcs[i].n = srcs[i].view.card()
		case it.kind == kindSet:
			set := []string{}
			kindTable[kindSet].elements(&it, func(m []byte) bool { set = append(set, string(m)); return true })
			srcs[i].set, srcs[i].n = set, len(set)
		default:
			return nil, true
		}
	}
	return srcs, false
}

// weighted is weight*score, with Redis's rule that a NaN (0 * inf) is 0.
func weighted(w, f float64) float64 {
	if x := w * f; !math.IsNaN(x) {
		return x
	}
	return 0
}

// aggregate combines two scores as AGGREGATE says, as Redis's
// zunionInterAggregate does: a NaN sum (inf + -inf, or a NaN v) is 0,
// and MIN and MAX keep acc unless v compares below or above it, so a
// NaN v changes nothing and -0 does not replace 0.
func aggregate(f Flags, acc, v float64) float64 {
	switch {
	case f&FlagZAggMin != 0:
		if v < acc {
			return v
		}
		return acc
	case f&FlagZAggMax != 0:
		if v > acc {
			return v
		}
		return acc
	}
	if x := acc + v; !math.IsNaN(x) {
		return x
	}
	return 0
}

// zsetOpLocked computes ZUNION, ZINTER or ZDIFF over keys (with weights),
// the result in order, or for ZINTERCARD just its size up to limit.
func (s *Store) zsetOpLocked(now int64, op int64, f Flags, keys, weights [][]byte, limit int64) ([]zent, int64, bool) {
	srcs, wrong := s.zsetSources(now, keys, weights)
	if wrong {
		return nil, 0, true
	}
	// Smallest first, as Redis orders its inputs (ties in key order);
	// the order decides how float sums round. ZDIFF keeps its first.
	first := 0
	if op == ZSetDiff {
		first = 1
	}
	slices.SortStableFunc(srcs[first:], func(a, b zsrc) int { return a.n - b.n })
	var out []zent
	var card int64
	switch op {
	case ZSetUnion:
		acc := map[string]float64{}
		for i := range srcs {
			src := &srcs[i]
			src.each(func(e zent) bool {
				v := weighted(src.weight, e.score)
				if cur, ok := acc[e.member]; ok {
					acc[e.member] = aggregate(f, cur, v)
				} else {
					acc[e.member] = v
				}
				return true
			})
		}
		out = make([]zent, 0, len(acc))
		for m, v := range acc {
			out = append(out, zent{v, m})
		}
	case ZSetInter, ZSetInterCard:
		if srcs[0].n == 0 {
			break
		}
		srcs[0].each(func(e zent) bool {
			score := weighted(srcs[0].weight, e.score)
			for j := 1; j < len(srcs); j++ {
				v, ok := srcs[j].score(e.member)
				if !ok {
					return true
				}
				// Redis resets a NaN product only for the first
				// input's score; here 0 * inf reaches aggregate as NaN.
				score = aggregate(f, score, srcs[j].weight*v)
			}
			if op == ZSetInterCard {
				card++
				return limit == 0 || card < limit
			}
			out = append(out, zent{score, e.member})
			return true
		})
	case ZSetDiff:
		srcs[0].each(func(e zent) bool {
			for j := 1; j < len(srcs); j++ {
				if _, ok := srcs[j].score(e.member); ok {
					return true
				}
			}
			out = append(out, e)
			return true
		})
	}
	slices.SortFunc(out, func(a, b zent) int {
		if zentLess(a, b) {
			return -1
		}
		return 1
	})
	return out, card, false
}

// setOpArgs splits the keys and weights of an OpZSetOp from Args[at] on.
func setOpArgs(c *Command, at int) (keys, weights [][]byte) {
	keys = c.Args[at:]
	if c.Flags&FlagZWeights != 0 {
		n := len(keys) / 2
		keys, weights = keys[:n], keys[n:]
	}
	return keys, weights
}

func readZSetOp(s *Store, now int64, c *Command) Reply {
	keys, weights := setOpArgs(c, 0)
	out, card, wrong := s.zsetOpLocked(now, c.Int2, c.Flags, keys, weights, c.Int)
	switch {
	case wrong:
		return replyWrongType
	case c.Int2 == ZSetInterCard:
		return IntReply(card)
	}
	return entriesReply(out, c.Flags&FlagZWithScores != 0)
}

func applyZSetOpStore(s *Store, now int64, c *Command) Reply {
	keys, weights := setOpArgs(c, 1)
	out, _, wrong := s.zsetOpLocked(now, c.Int2, c.Flags, keys, weights, 0)
	if wrong {
		return replyWrongType
	}
	s.storeZSetLocked(now, c.Args[0], out)
	return IntReply(int64(len(out)))
}
