package fsm

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/tidwall/btree"
)

// Sets: SADD SREM SCARD SISMEMBER SMISMEMBER SMEMBERS SPOP SRANDMEMBER
// SMOVE SINTER SINTERSTORE SINTERCARD SUNION SUNIONSTORE SDIFF SDIFFSTORE
// SSCAN, following Redis 7.0's t_set.c. The value's two forms are in
// set_repr.go. Every set iterates in member order, so the results of the
// set algebra come out in that order too and are stored without sorting.

// Set ops. The numbers are part of the log format: never renumber.
const (
	// OpSAdd: Args[0]=key, Args[1:]=members. Reply :members added.
	OpSAdd Op = opBaseSet + iota
	// OpSRem: Args[0]=key, Args[1:]=members. Reply :members removed.
	OpSRem
	// OpSPop: Args[0]=key, Int2=seed of the picks. Without FlagSetCount
	// one member: reply bulk or nil. With it, Int=count (>= 0): reply a
	// set of up to count members.
	OpSPop
	// OpSMove: Args = source, destination, member. Reply :1 moved, :0 not.
	OpSMove
	// OpSInterStore, OpSUnionStore, OpSDiffStore: Args[0]=destination,
	// Args[1:]=keys. Reply :size of the stored set (destination deleted
	// when empty).
	OpSInterStore
	OpSUnionStore
	OpSDiffStore

	// OpSCard: Args[0]=key. Reply :size.
	OpSCard
	// OpSIsMember: Args = key, member. Reply :1 or :0.
	OpSIsMember
	// OpSMIsMember: Args[0]=key, Args[1:]=members. Reply array of :1/:0.
	OpSMIsMember
	// OpSMembers: Args[0]=key. Reply set.
	OpSMembers
	// OpSRandMember: Args[0]=key. Without FlagSetCount one random member:
	// reply bulk or nil. With it, Int=count (Redis's rules: negative
	// allows repeats): reply array.
	OpSRandMember
	// OpSInter, OpSUnion, OpSDiff: Args = keys. Reply set.
	OpSInter
	OpSUnion
	OpSDiff
	// OpSInterCard: Args = keys, Int=limit (0: none). Reply :cardinality.
	OpSInterCard
	// OpSScan: Args = key, pattern ("" for all), Int=cursor (the uint64
	// cursor's bits), Int2=count (>= 1). FlagSetScanSyntax or
	// FlagSetScanNotInt: the options were bad, which Redis reports only
	// when the key holds a set (a missing key answers an empty page).
	// Reply [bulk cursor, array members].
	OpSScan
)

// Flags of the set ops.
const (
	FlagSetCount      = FlagNX // SPOP, SRANDMEMBER: a count was given
	FlagSetScanSyntax = FlagNX // SSCAN: reply ERR syntax error
	FlagSetScanNotInt = FlagXX // SSCAN: reply ERR value is not an integer
)

// Error texts only sets use.
const (
	// ErrSetRandCount is kvs's own limit on a repeating SRANDMEMBER
	// (Redis would try to send the reply).
	ErrSetRandCount = "ERR count is out of range, its absolute value must be at most 16777216"
)

// SetMaxRandCount bounds SRANDMEMBER's negative count: the reply is
// built in memory before it is sent.
const SetMaxRandCount = 1 << 24

func init() {
	registerOp(OpSAdd, opSpec{name: "SADD", write: true, args: argsAtLeast(2), apply: applySAdd})
	registerOp(OpSRem, opSpec{name: "SREM", write: true, args: argsAtLeast(2), apply: applySRem})
	registerOp(OpSPop, opSpec{name: "SPOP", write: true, args: 1, flags: FlagSetCount, check: nonNegativeInt,
		apply: applySPop})
	registerOp(OpSMove, opSpec{name: "SMOVE", write: true, args: 3, keys: keysFirst(2), apply: applySMove})
	for op, name := range map[Op]string{OpSInterStore: "SINTERSTORE", OpSUnionStore: "SUNIONSTORE",
		OpSDiffStore: "SDIFFSTORE"} {
		registerOp(op, opSpec{name: name, write: true, args: argsAtLeast(2), keys: keysAll, apply: applySetStore})
	}

	registerOp(OpSCard, opSpec{name: "SCARD", args: 1, read: readSCard})
	registerOp(OpSIsMember, opSpec{name: "SISMEMBER", args: 2, read: readSIsMember})
	registerOp(OpSMIsMember, opSpec{name: "SMISMEMBER", args: argsAtLeast(2), read: readSMIsMember})
	registerOp(OpSMembers, opSpec{name: "SMEMBERS", args: 1, read: readSetAlgebra})
	registerOp(OpSRandMember, opSpec{name: "SRANDMEMBER", args: 1, flags: FlagSetCount, check: randCountCheck,
		read: readSRandMember})
	for op, name := range map[Op]string{OpSInter: "SINTER", OpSUnion: "SUNION", OpSDiff: "SDIFF"} {
		registerOp(op, opSpec{name: name, args: argsAtLeast(1), read: readSetAlgebra, keys: keysAll})
	}
	registerOp(OpSInterCard, opSpec{name: "SINTERCARD", args: argsAtLeast(1), check: nonNegativeInt, keys: keysAll,
		read: readSInterCard})
	registerOp(OpSScan, opSpec{name: "SSCAN", args: 2, flags: FlagSetScanSyntax | FlagSetScanNotInt | FlagScanMatch,
		check: func(c *Command) error {
			if c.Int2 < 1 {
				return errorString("count below 1")
			}
			return nil
		},
		read: readSScan})
}

// randCountCheck rejects the one count Redis refuses to negate.
func randCountCheck(c *Command) error {
	if c.Int == math.MinInt64 {
		return errorString("count out of range")
	}
	return nil
}

// lookupSet is the typed lookup of the set commands.
func (s *Store) lookupSet(now int64, key []byte) (it item, ok, wrong bool) {
	return s.lookupLocked(now, key, kindSet)
}

// lookupSets looks up every key as Redis's SINTER, SUNION and SDIFF do:
// a missing key is an empty set, and any key of another type, wherever
// it is, makes the command fail.
func (s *Store) lookupSets(now int64, keys [][]byte) (views []setView, wrong bool) {
	views = make([]setView, len(keys))
	for i, k := range keys {
		it, ok, w := s.lookupSet(now, k)
		if w {
			return nil, true
		}
		if ok {
			views[i] = viewOf(&it)
		}
	}
	return views, false
}

// storeSet replaces key with the set b built (deleting it when empty),
// without a TTL, as Redis's setKey does, and returns the set's size.
func (s *Store) storeSet(key []byte, b *setBuilder) int {
	p, o := b.finish()
	if p == nil && o == nil {
		s.deleteLocked(key)
		return 0
	}
	var obj object
	if o != nil {
		obj = o
	}
	n := b.len()
	s.putLocked(s.newCollection(key, kindSet, p, obj, 0))
	return n
}

func applySAdd(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	if !ok {
		b := newSetBuilder(&s.limits)
		members := sortedMembers(c.Args[1:])
		for _, m := range members {
			b.add(m.hash, m.b)
		}
		n := s.storeSet(c.Args[0], b)
		return IntReply(int64(n))
	}
	if it.obj != nil {
		before := s.editLocked(&it)
		o := asSetObj(it.obj)
		var added int64
		for _, m := range c.Args[1:] {
			if o.add(memberHash(m), m) {
				added++
			}
		}
		if added == 0 {
			// No write, as in the packed form: the key's version (and a
			// move's record of it) must not depend on the form.
			return replyZero
		}
		s.endEditLocked(it, before)
		return IntReply(added)
	}
	var add []hashed
	for _, m := range sortedMembers(c.Args[1:]) {
		if _, found := setPackedFind(it.val, m.hash, m.b); !found {
			add = append(add, m)
		}
	}
	if len(add) == 0 {
		return replyZero
	}
	s.addPacked(it, add)
	return IntReply(int64(len(add)))
}

// addPacked stores it with the members add (in member order, none in the
// set) merged into its packed form, or in the large form when the result
// no longer fits.
func (s *Store) addPacked(it item, add []hashed) {
	p := it.val
	n := setPackedLen(p)
	total := n + len(add)
	flags := p[0]
	data := len(p) - setPackedHeader - 4*n
	long := false
	for _, m := range add {
		data += len(m.b)
		if _, isInt := parseInt(m.b); !isInt {
			flags &^= setIntset
		}
		if int64(len(m.b)) > s.limits.SetMaxListpackValue {
			long = true
		}
	}
	if flags&setIntset != 0 && int64(total) > s.limits.SetMaxIntsetEntries {
		flags &^= setIntset
	}
	merged := func(fn func(h uint64, m []byte)) {
		i, j := 0, 0
		for i < n || j < len(add) {
			if i < n {
				e := packedAt(p, i)
				h := memberHash(e)
				if j == len(add) || memberLess(h, e, add[j].hash, add[j].b) {
					fn(h, e)
					i++
					continue
				}
			}
			fn(add[j].hash, add[j].b)
			j++
		}
	}
	fitsPacked := flags&setIntset != 0 ||
		!long && int64(total) <= s.limits.SetMaxListpackEntries && !packedHasLong(p, s.limits.SetMaxListpackValue)
	if fitsPacked {
		it.val = buildPacked(flags, total, data, func(fn func([]byte)) {
			merged(func(_ uint64, m []byte) { fn(m) })
		})
	} else {
		o := newSetObj()
		merged(func(h uint64, m []byte) {
			sm := setMember{h, string(m)}
			o.tree.Load(sm)
			o.bytes += memberCost(sm.m)
		})
		*o.cowGen() = s.keys.gen
		it.val, it.obj = nil, o
	}
	s.putLocked(it)
}

// packedHasLong reports whether a packed set has a member longer than max
// (possible once an intset stops being one, or after CONFIG SET).
func packedHasLong(p []byte, max int64) bool {
	for i, n := 0, setPackedLen(p); i < n; i++ {
		if int64(len(packedAt(p, i))) > max {
			return true
		}
	}
	return false
}

// hashed is a member with its memberHash.
type hashed struct {
	hash uint64
	b    []byte
}

// sortedMembers returns ms with their hashes, in member order, without
// duplicates.
func sortedMembers(ms [][]byte) []hashed {
	out := make([]hashed, len(ms))
	for i, m := range ms {
		out[i] = hashed{memberHash(m), m}
	}
	if len(out) > 1 {
		slices.SortFunc(out, compareHashed)
		out = slices.CompactFunc(out, func(a, b hashed) bool { return a.hash == b.hash && string(a.b) == string(b.b) })
	}
	return out
}

func compareHashed(a, b hashed) int {
	switch {
	case memberLess(a.hash, a.b, b.hash, b.b):
		return -1
	case a.hash == b.hash && string(a.b) == string(b.b):
		return 0
	}
	return 1
}

// removePacked stores it without the members at the ascending indexes
// drop, or deletes it when none is left. The intset flag stays as it is.
func (s *Store) removePacked(it item, drop []int) {
	p := it.val
	n := setPackedLen(p)
	if len(drop) == n {
		s.deleteLocked([]byte(it.key))
		return
	}
	data := len(p) - setPackedHeader - 4*n
	for _, i := range drop {
		data -= len(packedAt(p, i))
	}
	it.val = buildPacked(p[0], n-len(drop), data, func(fn func([]byte)) {
		j := 0
		for i := 0; i < n; i++ {
			if j < len(drop) && drop[j] == i {
				j++
				continue
			}
			fn(packedAt(p, i))
		}
	})
	s.putLocked(it)
}

func applySRem(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	if it.obj != nil {
		before := s.editLocked(&it)
		o := asSetObj(it.obj)
		var removed int64
		for _, m := range c.Args[1:] {
			if o.remove(memberHash(m), m) {
				removed++
			}
		}
		if removed == 0 {
			return replyZero // no write, as in the packed form
		}
		s.endEditLocked(it, before)
		if o.tree.Len() == 0 {
			s.deleteLocked(c.Args[0])
		}
		return IntReply(removed)
	}
	var drop []int
	for _, m := range c.Args[1:] {
		if i, found := setPackedFind(it.val, memberHash(m), m); found && !slices.Contains(drop, i) {
			drop = append(drop, i)
		}
	}
	if len(drop) == 0 {
		return replyZero
	}
	slices.Sort(drop)
	s.removePacked(it, drop)
	return IntReply(int64(len(drop)))
}

// spopMoveFactor is Redis's SPOP_MOVE_STRATEGY_MUL: when at most a fifth
// of the members stay, Redis builds a new set of them, which may change
// its encoding; kvs rebuilds it the same way.
const spopMoveFactor = 5

// applySPop picks members by rank, from a PCG seeded with Int2, each pick
// uniform over the members still left: the same picks on every replica and
// every replay, whichever form each holds the set in.
func applySPop(s *Store, now int64, c *Command) Reply {
	withCount := c.Flags&FlagSetCount != 0
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok && withCount:
		return Reply{Kind: ReplySet, Array: []Reply{}}
	case !ok:
		return replyNil
	case withCount && c.Int == 0:
		return Reply{Kind: ReplySet, Array: []Reply{}}
	}
	v := viewOf(&it)
	size := v.len()
	count := 1
	if withCount && c.Int < int64(size) {
		count = int(c.Int)
	} else if withCount {
		count = size
	}
	if count == size {
		out := make([]Reply, 0, size)
		v.each(func(_ uint64, m []byte) bool {
			out = append(out, BulkReply(m))
			return true
		})
		s.deleteLocked(c.Args[0])
		if !withCount {
			return out[0]
		}
		return Reply{Kind: ReplySet, Array: out}
	}
	rng := rand.New(rand.NewPCG(uint64(c.Int2), 0x5e7))
	out := make([]Reply, 0, count)
	if it.obj != nil {
		before := s.editLocked(&it)
		o := asSetObj(it.obj)
		for range count {
			sm := o.removeAt(rng.IntN(o.tree.Len()))
			out = append(out, BulkReply(stringBytes(sm.m)))
		}
		s.endEditLocked(it, before)
	} else {
		left := make([]int, size)
		for i := range left {
			left[i] = i
		}
		drop := make([]int, 0, count)
		for range count {
			r := rng.IntN(len(left))
			drop = append(drop, left[r])
			out = append(out, BulkReply(packedAt(it.val, left[r])))
			left = slices.Delete(left, r, r+1)
		}
		slices.Sort(drop)
		s.removePacked(it, drop)
	}
	if !withCount {
		return out[0]
	}
	if remaining := size - count; remaining*spopMoveFactor <= count {
		s.rebuildSet(now, c.Args[0])
	}
	return Reply{Kind: ReplySet, Array: out}
}

// rebuildSet gives the set at key the form a new set of its members gets.
func (s *Store) rebuildSet(now int64, key []byte) {
	it, _, _ := s.lookupSet(now, key)
	b := newSetBuilder(&s.limits)
	viewOf(&it).each(func(h uint64, m []byte) bool {
		b.add(h, m)
		return true
	})
	p, o := b.finish()
	before := it.size()
	it.val, it.obj = p, nil
	if o != nil {
		*o.cowGen() = s.keys.gen
		it.obj = o
	}
	s.keys.Set(it)
	s.bytes += it.size() - before
}

func applySMove(s *Store, now int64, c *Command) Reply {
	src, dst, m := c.Args[0], c.Args[1], c.Args[2]
	sit, ok, wrong := s.lookupSet(now, src)
	if !ok && !wrong {
		return replyZero
	}
	dit, dok, dwrong := s.lookupSet(now, dst)
	if wrong || dwrong {
		return replyWrongType
	}
	h := memberHash(m)
	if string(src) == string(dst) {
		return boolReply(viewOf(&sit).contains(h, m))
	}
	if !s.removeMember(sit, h, m) {
		return replyZero
	}
	one := []hashed{{h, m}}
	added := true
	switch {
	case !dok:
		b := newSetBuilder(&s.limits)
		b.add(h, m)
		s.storeSet(dst, b)
	case dit.obj != nil:
		before := s.editLocked(&dit)
		added = asSetObj(dit.obj).add(h, m)
		s.endEditLocked(dit, before)
	default:
		if _, found := setPackedFind(dit.val, h, m); found {
			added = false
		} else {
			s.addPacked(dit, one)
		}
	}
	// Redis counts the removal, and the addition only when the member
	// was not in the destination already.
	if added {
		s.reportDirtyLocked(2)
	} else {
		s.reportDirtyLocked(1)
	}
	return replyOne
}

// removeMember removes m from the set it, deleting the key when it
// empties, and reports whether m was there.
func (s *Store) removeMember(it item, h uint64, m []byte) bool {
	if it.obj != nil {
		before := s.editLocked(&it)
		o := asSetObj(it.obj)
		if !o.remove(h, m) {
			return false
		}
		s.endEditLocked(it, before)
		if o.tree.Len() == 0 {
			s.deleteLocked([]byte(it.key))
		}
		return true
	}
	i, found := setPackedFind(it.val, h, m)
	if found {
		s.removePacked(it, []int{i})
	}
	return found
}

func applySetStore(s *Store, now int64, c *Command) Reply {
	views, wrong := s.lookupSets(now, c.Args[1:])
	if wrong {
		return replyWrongType
	}
	b := newSetBuilder(&s.limits)
	setAlgebra(storeOp(c.Op), views, 0, b.add)
	return IntReply(int64(s.storeSet(c.Args[0], b)))
}

func storeOp(op Op) Op {
	switch op {
	case OpSInterStore:
		return OpSInter
	case OpSUnionStore:
		return OpSUnion
	}
	return OpSDiff
}

// setAlgebra calls fn with the members of the intersection, union or
// difference (op OpSInter, OpSUnion, OpSDiff) of sets, in member order;
// an intersection stops after limit members when limit > 0.
func setAlgebra(op Op, sets []setView, limit int, fn func(h uint64, m []byte)) {
	switch op {
	case OpSInter:
		// Walk the smallest set, as Redis does, testing the others.
		for _, v := range sets {
			if v.len() == 0 {
				return
			}
		}
		order := slices.Clone(sets)
		slices.SortStableFunc(order, func(a, b setView) int { return a.len() - b.len() })
		n := 0
		order[0].each(func(h uint64, m []byte) bool {
			for _, v := range order[1:] {
				if !v.contains(h, m) {
					return true
				}
			}
			fn(h, m)
			n++
			return limit <= 0 || n < limit
		})
	case OpSUnion:
		mergeSets(sets, fn)
	case OpSDiff:
		sets[0].each(func(h uint64, m []byte) bool {
			for _, v := range sets[1:] {
				if v.contains(h, m) {
					return true
				}
			}
			fn(h, m)
			return true
		})
	}
}

// mergeSets calls fn with each member of any of sets once, in member
// order: a k-way merge of the sets' own orders.
func mergeSets(sets []setView, fn func(h uint64, m []byte)) {
	var hs cursorHeap
	for _, v := range sets {
		if v.len() > 0 {
			hs = append(hs, &setCursor{v: v, n: v.len()})
		}
	}
	if len(hs) == 1 {
		hs[0].v.each(func(h uint64, m []byte) bool { fn(h, m); return true })
		return
	}
	for _, sc := range hs {
		if sc.v.o != nil {
			sc.it = sc.v.o.tree.Iter()
			defer sc.it.Release()
			sc.it.First()
		}
		sc.load()
	}
	heap.Init(&hs)
	var lastH uint64
	var last []byte
	first := true
	for len(hs) > 0 {
		sc := hs[0]
		if first || sc.h != lastH || string(sc.m) != string(last) {
			fn(sc.h, sc.m)
			lastH, last, first = sc.h, sc.m, false
		}
		sc.i++
		if sc.i == sc.n {
			heap.Pop(&hs)
		} else {
			if sc.v.o != nil {
				sc.it.Next()
			}
			sc.load()
			heap.Fix(&hs, 0)
		}
	}
}

// setCursor walks one set in member order: a large one with a tree
// iterator, a packed one by index.
type setCursor struct {
	v    setView
	it   btree.IterG[setMember]
	i, n int
	h    uint64
	m    []byte
}

func (sc *setCursor) load() {
	if sc.v.o != nil {
		sm := sc.it.Item()
		sc.h, sc.m = sm.hash, stringBytes(sm.m)
		return
	}
	sc.m = packedAt(sc.v.p, sc.i)
	sc.h = memberHash(sc.m)
}

type cursorHeap []*setCursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return memberLess(h[i].h, h[i].m, h[j].h, h[j].m) }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*setCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func readSCard(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	return IntReply(int64(viewOf(&it).len()))
}

func readSIsMember(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return replyZero
	}
	return boolReply(viewOf(&it).contains(memberHash(c.Args[1]), c.Args[1]))
}

func readSMIsMember(s *Store, now int64, c *Command) Reply {
	it, _, wrong := s.lookupSet(now, c.Args[0])
	if wrong {
		return replyWrongType
	}
	v := viewOf(&it)
	out := make([]Reply, len(c.Args)-1)
	for i, m := range c.Args[1:] {
		out[i] = boolReply(v.contains(memberHash(m), m))
	}
	return Reply{Kind: ReplyArray, Array: out}
}

// readSetAlgebra answers SMEMBERS (the intersection of one set), SINTER,
// SUNION and SDIFF.
func readSetAlgebra(s *Store, now int64, c *Command) Reply {
	views, wrong := s.lookupSets(now, c.Args)
	if wrong {
		return replyWrongType
	}
	op := c.Op
	if op == OpSMembers {
		op = OpSInter
	}
	// A bound on the answer's size: the first set's for SDIFF, the
	// smallest's for SINTER, the sum for SUNION.
	size := views[0].len()
	for _, v := range views[1:] {
		switch op {
		case OpSUnion:
			size += v.len()
		case OpSInter:
			size = min(size, v.len())
		}
	}
	out := make([]Reply, 0, size)
	setAlgebra(op, views, 0, func(_ uint64, m []byte) { out = append(out, BulkReply(m)) })
	return Reply{Kind: ReplySet, Array: out}
}

func readSInterCard(s *Store, now int64, c *Command) Reply {
	views, wrong := s.lookupSets(now, c.Args)
	if wrong {
		return replyWrongType
	}
	var n int64
	setAlgebra(OpSInter, views, int(min(c.Int, int64(^uint(0)>>1))), func(uint64, []byte) { n++ })
	return IntReply(n)
}

// readSRandMember follows Redis's srandmemberWithCountCommand: a negative
// count picks with repeats, a positive one distinct members (all of them
// when it is at least the size). A read may use any randomness.
func readSRandMember(s *Store, now int64, c *Command) Reply {
	withCount := c.Flags&FlagSetCount != 0
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok && withCount:
		return Reply{Kind: ReplyArray, Array: []Reply{}}
	case !ok:
		return replyNil
	}
	v := viewOf(&it)
	size := v.len()
	if !withCount {
		return BulkReply(v.at(rand.IntN(size)))
	}
	switch count := c.Int; {
	case count == 0:
		return Reply{Kind: ReplyArray, Array: []Reply{}}
	case count < -SetMaxRandCount:
		return ErrorReply(ErrSetRandCount)
	case count < 0 || count == 1:
		n := int(max(-count, 1))
		out := make([]Reply, n)
		for i := range out {
			out[i] = BulkReply(v.at(rand.IntN(size)))
		}
		return Reply{Kind: ReplyArray, Array: out}
	case count >= int64(size):
		out := make([]Reply, 0, size)
		v.each(func(_ uint64, m []byte) bool {
			out = append(out, BulkReply(m))
			return true
		})
		return Reply{Kind: ReplyArray, Array: out}
	default:
		// Floyd's sampling: count distinct ranks in O(count).
		picked := make(map[int]struct{}, count)
		out := make([]Reply, 0, count)
		for j := size - int(count); j < size; j++ {
			r := rand.IntN(j + 1)
			if _, dup := picked[r]; dup {
				r = j
			}
			picked[r] = struct{}{}
			out = append(out, BulkReply(v.at(r)))
		}
		return Reply{Kind: ReplyArray, Array: out}
	}
}

// readSScan follows Redis's SSCAN: a packed set is returned whole with
// cursor 0, as Redis returns an intset; a large one from the cursor (the
// memberHash of the next member) on, about count members a page, never
// ending a page inside a run of equal hashes.
func readSScan(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupSet(now, c.Args[0])
	switch {
	case wrong:
		return replyWrongType
	case !ok:
		return scanPage(0, []Reply{})
	case c.Flags&FlagSetScanSyntax != 0:
		return ErrorReply(errSetScanSyntax)
	case c.Flags&FlagSetScanNotInt != 0:
		return ErrorReply(ErrNotInteger)
	}
	pattern := string(c.Args[1])
	usePattern := (pattern != "" || c.Flags&FlagScanMatch != 0) && pattern != "*"
	out := []Reply{}
	keep := func(m []byte) {
		if !usePattern || matchGlob(pattern, unsafeString(m)) {
			out = append(out, BulkReply(m))
		}
	}
	if it.obj == nil {
		viewOf(&it).each(func(_ uint64, m []byte) bool { keep(m); return true })
		return scanPage(0, out)
	}
	cursor := uint64(c.Int)
	if cursor >= 1<<63 {
		return scanPage(0, out)
	}
	var visited int64
	var last, next uint64
	asSetObj(it.obj).tree.Ascend(setMember{hash: cursor}, func(sm setMember) bool {
		if visited >= c.Int2 && sm.hash != last {
			next = sm.hash
			return false
		}
		visited++
		last = sm.hash
		keep(stringBytes(sm.m))
		return true
	})
	return scanPage(next, out)
}

// errSetScanSyntax is Redis's syntax error, which SSCAN reports from the
// store (see OpSScan).
const errSetScanSyntax = "ERR syntax error"

func scanPage(cursor uint64, members []Reply) Reply {
	return Reply{Kind: ReplyArray, Array: []Reply{
		BulkReply(strconv.AppendUint(nil, cursor, 10)), {Kind: ReplyArray, Array: members}}}
}
