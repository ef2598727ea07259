package fsm

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"strings"
)

// keyspace is the set of items in (hash, key) order, split by the top bits
// of the hash into independent trees. Splitting keeps each tree shallow
// (about a thousand keys per tree at a million keys: a root and one level
// of leaves), while the order across shards is still the hash order SCAN
// relies on.
//
// Each shard is a B+tree made for items (the kt types below): items are held by
// value in the leaves, searched by comparing their hashes inline (the key
// only on equal hashes), and every inner node knows, for each child, how
// many items it holds (for ranks: RANDOMKEY, CLUSTER COUNTKEYSINSLOT) and
// the earliest deadline among them. The deadlines make the tree the TTL
// index too: the keys due first are found by descending only into subtrees
// whose earliest deadline has passed, and giving a key a deadline costs no
// second structure. A segment tree over the shards' earliest deadlines
// answers "is any key due?" in O(1), which every write asks (lazy expiry).
//
// Copy is lazy: it copies the array of roots and starts a new generation; a
// node of an older generation may be shared with a snapshot and is copied
// before it is written, so a snapshot costs a few microseconds under the
// lock whatever the number of keys, and then as many node copies as there
// are nodes written while it is held.
type keyspace struct {
	shards [keyShards]ktRoot
	// gen counts Copy calls; a node whose gen is older may be shared
	// with a snapshot and must be copied before it is written.
	gen  uint64
	n    int // items
	ttls int // items with a deadline
	// due is a segment tree of the shards' earliest deadlines: due[1] is
	// the earliest of all, due[keyShards+i] that of shard i (noExp when
	// none). A read-only view (Copy) has none (nil) and reads a shard's
	// earliest deadline from its root instead.
	due []int64
	// vers is the write counter Set stamps items with, and what WATCH
	// needs to know of deleted keys (multi.go).
	vers versions
	// acc records key accesses for LRU and LFU eviction (access.go); nil
	// while no such policy is in force, and in a read-only view.
	acc *accessTable
	// writes counts the items stored and deleted (Set, Delete, written):
	// applyLocked's measure of the keys a write changed (dirty.go).
	writes int64
	// track is told of every item stored or deleted while slots are
	// moving out (move.go); nil otherwise, and in a read-only view.
	track *slotTable
	// mods records the keys written for client-side caching
	// (tracking.go); nil in a read-only view.
	mods *modified
}

const (
	keyShardBits = 10
	keyShards    = 1 << keyShardBits
)

// noExp is the earliest deadline of a subtree holding no deadline.
const noExp = math.MaxInt64

// shardOf maps a hash (below 2^63, see keyHash) to its shard, preserving
// order: a lower shard holds only lower hashes.
func shardOf(hash uint64) int { return int(hash >> (63 - keyShardBits)) }

func newKeys() *keyspace {
	ks := &keyspace{due: make([]int64, 2*keyShards)}
	for i := range ks.due {
		ks.due[i] = noExp
	}
	return ks
}

func (ks *keyspace) Len() int { return ks.n }

// TTLs is the number of items with a deadline, expired or not.
func (ks *keyspace) TTLs() int { return ks.ttls }

// find returns the item with key (whose keyHash is h), or nil. The pointer
// is into the tree and valid until the next write; the item must not be
// changed through it.
func (ks *keyspace) find(h uint64, key string) *item {
	p := ks.peek(h, key)
	if p != nil && ks.acc != nil {
		ks.acc.touch(h)
	}
	return p
}

// peek is find for a lookup that is no access of the key: its access
// record stays as it was (Redis's LOOKUP_NOTOUCH).
func (ks *keyspace) peek(h uint64, key string) *item {
	s := shardOf(h)
	r := &ks.shards[s]
	x, l := r.inner, r.leaf
	lo, hi := shardBounds(s)
	for x != nil {
		i := x.childNear(h, key, lo, hi)
		lo, hi = x.bounds(i, lo, hi)
		x, l = x.e[i].inner, x.e[i].leaf
	}
	if l == nil {
		return nil
	}
	if i, ok := l.searchNear(h, key, lo, hi); ok {
		return &l.it[i]
	}
	return nil
}

// shardBounds is the range of hashes of shard s, [lo, hi).
func shardBounds(s int) (lo, hi uint64) {
	return uint64(s) << (63 - keyShardBits), uint64(s+1) << (63 - keyShardBits)
}

// bounds narrows [lo, hi), the range of x's hashes, to child j's.
func (x *ktInner) bounds(j int, lo, hi uint64) (uint64, uint64) {
	if j > 0 {
		lo = x.e[j].hash
	}
	if j+1 < x.n {
		hi = x.e[j+1].hash
	}
	return lo, hi
}

// near guesses where h falls among n hashes spread evenly over [lo, hi):
// keyHash's bits below the slot are xxhash's, so a node's hashes are, and
// the guess is usually within a slot or two of the place, one cache line
// where a binary search reads three or four.
func near(h, lo, hi uint64, n int) int {
	if hi <= lo || h <= lo || n == 0 {
		return 0
	}
	g := int(float64(h-lo) / float64(hi-lo) * float64(n))
	return min(g, n-1)
}

// searchNear is search for a leaf whose hashes are within [lo, hi),
// starting from near's guess: the same answer.
func (l *ktLeaf) searchNear(h uint64, key string, lo, hi uint64) (int, bool) {
	i := near(h, lo, hi, l.n)
	for i > 0 && l.hash[i-1] >= h {
		i--
	}
	for i < l.n && l.hash[i] < h {
		i++
	}
	for ; i < l.n && l.hash[i] == h; i++ {
		if k := l.it[i].key; k == key {
			return i, true
		} else if k > key {
			return i, false
		}
	}
	return i, false
}

// childNear is child for a node whose hashes are within [lo, hi),
// starting from near's guess: the same answer.
func (x *ktInner) childNear(h uint64, key string, lo, hi uint64) int {
	i := near(h, lo, hi, x.n)
	for i > 0 && x.e[i].hash > h {
		i--
	}
	for i+1 < x.n && x.e[i+1].hash <= h {
		i++
	}
	for i > 0 && x.e[i].hash == h && x.sepKey[i] > key {
		i--
	}
	return i
}

// findForWrite is find for a change in place: the nodes on the way to the
// item are made this generation's (copied, if a snapshot may share them),
// so the item can be changed through the pointer, which is valid until the
// next write. The caller may change the item's value (val, obj, kind, enc)
// but not its key, hash or deadline, which the tree is ordered and indexed
// by, and must then call written (a change of form alone, which no reader
// can tell from the contents, is no write and skips it: see
// unpackZSetLocked). A miss copies nothing.
func (ks *keyspace) findForWrite(h uint64, key string) *item {
	s := shardOf(h)
	r := &ks.shards[s]
	x, l := r.inner, r.leaf
	lo, hi := shardBounds(s)
	fresh := true
	for x != nil {
		fresh = fresh && x.gen == ks.gen
		i := x.childNear(h, key, lo, hi)
		lo, hi = x.bounds(i, lo, hi)
		x, l = x.e[i].inner, x.e[i].leaf
	}
	if l == nil {
		return nil
	}
	i, ok := l.searchNear(h, key, lo, hi)
	if ok && ks.acc != nil {
		ks.acc.touch(h)
	}
	switch {
	case !ok:
		return nil
	case fresh && l.gen == ks.gen:
		return &l.it[i]
	}
	// A snapshot may share the path: copy it, top down.
	if r.inner == nil {
		return &ks.mutLeaf(&r.leaf).it[i]
	}
	x = ks.mutInner(&r.inner)
	for {
		j := x.child(h, key)
		if x.leafKids {
			return &ks.mutLeaf(&x.e[j].leaf).it[i]
		}
		x = ks.mutInner(&x.e[j].inner)
	}
}

// written stamps an item changed in place through findForWrite with the
// write's version, as Set does.
func (ks *keyspace) written(it *item) {
	ks.writes++
	ks.vers.storedLocked(it, ks.gen)
	if ks.track != nil {
		ks.track.noteWrite(it.hash, it.key)
	}
	if ks.mods != nil {
		ks.mods.note(it.key)
	}
}

// Get returns a copy of the item with pivot's hash and key.
func (ks *keyspace) Get(pivot item) (item, bool) {
	if p := ks.find(pivot.hash, pivot.key); p != nil {
		return *p, true
	}
	return item{}, false
}

// Set inserts or replaces it and returns the item it replaced.
func (ks *keyspace) Set(it item) (item, bool) {
	ks.writes++
	ks.vers.storedLocked(&it, ks.gen)
	if ks.track != nil {
		ks.track.noteWrite(it.hash, it.key)
	}
	if ks.mods != nil {
		ks.mods.note(it.key)
	}
	return ks.set(it)
}

// Load is Set for a restore: it keeps the items' versions.
func (ks *keyspace) Load(it item) { ks.set(it) }

func (ks *keyspace) set(it item) (prev item, replaced bool) {
	s := shardOf(it.hash)
	r := &ks.shards[s]
	lo, hi := shardBounds(s)
	switch {
	case r.inner != nil:
		x := ks.mutInner(&r.inner)
		var sp ktSplit
		prev, replaced, sp = ks.innerSet(x, it, true, lo, hi)
		if sp.inner != nil {
			r.inner = ks.newRootInner(x, nil, sp)
		}
	default:
		if r.leaf == nil {
			r.leaf = &ktLeaf{gen: ks.gen}
		}
		l := ks.mutLeaf(&r.leaf)
		var sp ktSplit
		prev, replaced, sp = ks.leafSet(l, it, true, lo, hi)
		if sp.leaf != nil {
			r.inner, r.leaf = ks.newRootInner(nil, l, sp), nil
		}
	}
	var old int64
	if replaced {
		old = prev.exp // the write's lookup recorded the access
	} else {
		r.n++
		ks.n++
		if ks.acc != nil {
			ks.acc.created(it.hash)
		}
	}
	ks.countTTL(old, it.exp)
	ks.fixDue(s, old, it.exp)
	return prev, replaced
}

// Delete removes the item with pivot's hash and key.
func (ks *keyspace) Delete(pivot item) (item, bool) { return ks.delete(pivot, true) }

// purge is Delete for a key nothing can see (slots.go): no write of the
// keyspace, so WATCH's records are left as they were.
func (ks *keyspace) purge(pivot item) (item, bool) { return ks.delete(pivot, false) }

func (ks *keyspace) delete(pivot item, write bool) (item, bool) {
	if ks.peek(pivot.hash, pivot.key) == nil {
		return item{}, false // nothing copied for a miss
	}
	s := shardOf(pivot.hash)
	r := &ks.shards[s]
	var prev item
	if r.inner != nil {
		x := ks.mutInner(&r.inner)
		prev, _ = ks.innerDelete(x, pivot.hash, pivot.key)
		if x.n == 1 { // the root's only child becomes the root
			r.inner, r.leaf = x.e[0].inner, x.e[0].leaf
		}
	} else {
		l := ks.mutLeaf(&r.leaf)
		i, _ := l.search(pivot.hash, pivot.key)
		prev = l.removeAt(i)
		if l.n == 0 {
			r.leaf = nil
		}
	}
	r.n--
	ks.n--
	ks.countTTL(prev.exp, 0)
	ks.fixDue(s, prev.exp, 0)
	if write {
		ks.writes++
		ks.vers.deletedLocked(&prev, ks.gen)
		if ks.track != nil {
			ks.track.noteWrite(prev.hash, prev.key)
		}
		if ks.mods != nil {
			ks.mods.note(prev.key)
		}
	}
	return prev, true
}

func (ks *keyspace) countTTL(old, new int64) {
	if old != 0 {
		ks.ttls--
	}
	if new != 0 {
		ks.ttls++
	}
}

// fixDue updates shard s's earliest deadline after one item's deadline
// went from old to new (0: none), and the segment tree above it.
func (ks *keyspace) fixDue(s int, old, new int64) {
	j := keyShards + s
	m, ok := deltaMin(ks.due[j], old, new)
	if !ok {
		m = ks.shards[s].min()
	}
	if m == ks.due[j] {
		return
	}
	ks.due[j] = m
	for j /= 2; j >= 1; j /= 2 {
		v := min(ks.due[2*j], ks.due[2*j+1])
		if ks.due[j] == v {
			return
		}
		ks.due[j] = v
	}
}

// deltaMin returns the earliest deadline of a set whose earliest was m,
// after one member's deadline went from old to new (0: none; an insert has
// old 0 and a delete new 0), or false when it must be recomputed (the old
// deadline was the earliest and has gone).
func deltaMin(m, old, new int64) (int64, bool) {
	if new != 0 && new < m {
		return new, true
	}
	if old != 0 && old == m && new != old {
		return 0, false
	}
	return m, true
}

// shardDue is the earliest deadline in shard s.
func (ks *keyspace) shardDue(s int) int64 {
	if ks.due == nil {
		return ks.shards[s].min()
	}
	return ks.due[keyShards+s]
}

// nextDue returns the earliest deadline of any item (noExp when none).
func (ks *keyspace) nextDue() int64 {
	if ks.due == nil {
		return 0
	}
	return ks.due[1]
}

// Ascend calls fn for each item not less than pivot, in order, until fn
// returns false.
func (ks *keyspace) Ascend(pivot item, fn func(item) bool) {
	for s := shardOf(pivot.hash); s < keyShards; s++ {
		r := &ks.shards[s]
		more := true
		if r.inner != nil {
			more = r.inner.ascend(&pivot, fn)
		} else if r.leaf != nil {
			more = r.leaf.ascend(&pivot, fn)
		}
		if !more {
			return
		}
		pivot = item{} // the shards after the first are visited whole
	}
}

// Scan calls fn for every item, in order, until fn returns false.
func (ks *keyspace) Scan(fn func(item) bool) {
	ks.Ascend(item{}, fn)
}

// GetAt returns the item of rank i in the keyspace order.
func (ks *keyspace) GetAt(i int) (item, bool) {
	if i < 0 || i >= ks.n {
		return item{}, false
	}
	for s := range ks.shards {
		r := &ks.shards[s]
		if i >= r.n {
			i -= r.n
			continue
		}
		x, l := r.inner, r.leaf
		for x != nil {
			j := 0
			for ; i >= x.cnt[j]; j++ {
				i -= x.cnt[j]
			}
			x, l = x.e[j].inner, x.e[j].leaf
		}
		return l.it[i], true
	}
	return item{}, false
}

// randomWithDeadline returns an item with a deadline that ok accepts,
// found by a random descent through the subtrees holding a deadline: a
// random shard among those with one, a random such child at each level,
// and the first acceptable item from a random place in the leaf. Not
// uniform, but every such item can be drawn. false when none is accepted.
func (ks *keyspace) randomWithDeadline(ok func(*item) bool) (item, bool) {
	start := rand.IntN(keyShards)
	for k := range keyShards {
		s := (start + k) % keyShards
		if ks.shardDue(s) == noExp {
			continue
		}
		r := &ks.shards[s]
		if it, found := randomDeadlineIn(r.inner, r.leaf, ok); found {
			return it, true
		}
	}
	return item{}, false
}

// randomDeadlineIn is randomWithDeadline within one subtree: its children
// holding a deadline are tried from a random one on, so an item ok
// refuses does not end the search while another is left.
func randomDeadlineIn(x *ktInner, l *ktLeaf, ok func(*item) bool) (item, bool) {
	if x == nil {
		if l == nil || l.n == 0 {
			return item{}, false
		}
		i0 := rand.IntN(l.n)
		for d := range l.n {
			if it := &l.it[(i0+d)%l.n]; it.exp != 0 && ok(it) {
				return *it, true
			}
		}
		return item{}, false
	}
	j0 := rand.IntN(x.n)
	for d := range x.n {
		j := (j0 + d) % x.n
		if x.minExp[j] == noExp {
			continue
		}
		if it, found := randomDeadlineIn(x.e[j].inner, x.e[j].leaf, ok); found {
			return it, true
		}
	}
	return item{}, false
}

// shardLen is the number of items in shard s.
func (ks *keyspace) shardLen(s int) int { return ks.shards[s].n }

// countRange is the number of items whose hash is in [lo, hi), hi 0
// meaning no upper bound, without visiting the items: a rank in the
// shards at either end, the counts of those between.
func (ks *keyspace) countRange(lo, hi uint64) int {
	first, last := shardOf(lo), keyShards-1
	if hi != 0 {
		last = shardOf(hi)
	}
	n := -ks.rankInShard(first, lo)
	for s := first; s < last; s++ {
		n += ks.shards[s].n
	}
	if hi != 0 {
		return n + ks.rankInShard(last, hi)
	}
	return n + ks.shards[last].n
}

// rankInShard is the number of items of shard s with a hash below h.
func (ks *keyspace) rankInShard(s int, h uint64) int {
	r := &ks.shards[s]
	rank := 0
	x, l := r.inner, r.leaf
	for x != nil {
		j := x.child(h, "")
		for k := range j {
			rank += x.cnt[k]
		}
		x, l = x.e[j].inner, x.e[j].leaf
	}
	if l != nil {
		i, _ := l.search(h, "")
		rank += i
	}
	return rank
}

// scanExpired calls fn for every item whose deadline is not after now, in
// no particular order, until fn returns false. It visits only subtrees
// holding such an item.
func (ks *keyspace) scanExpired(now int64, fn func(*item) bool) {
	for s := range ks.shards {
		if ks.shardDue(s) > now {
			continue
		}
		r := &ks.shards[s]
		more := true
		if r.inner != nil {
			more = r.inner.scanExpired(now, fn)
		} else if r.leaf != nil {
			more = r.leaf.scanExpired(now, fn)
		}
		if !more {
			return
		}
	}
}

// countExpired is the number of items expired at now.
func (ks *keyspace) countExpired(now int64) int {
	if ks.nextDue() > now {
		return 0
	}
	n := 0
	ks.scanExpired(now, func(*item) bool { n++; return true })
	return n
}

// earliest calls fn for the items whose deadline is not after now, the one
// due first first, until fn returns false: a best-first search over the
// subtrees by their earliest deadline.
func (ks *keyspace) earliest(now int64, fn func(*item) bool) {
	if ks.nextDue() > now {
		return
	}
	var h dueHeap
	for s := range ks.shards {
		r := &ks.shards[s]
		if m := ks.shardDue(s); m <= now {
			h = append(h, dueEntry{at: m, inner: r.inner, leaf: r.leaf})
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		e := heap.Pop(&h).(dueEntry)
		switch {
		case e.it != nil:
			if !fn(e.it) {
				return
			}
		case e.inner != nil:
			x := e.inner
			for j := range x.n {
				if x.minExp[j] <= now {
					heap.Push(&h, dueEntry{at: x.minExp[j], inner: x.e[j].inner, leaf: x.e[j].leaf})
				}
			}
		default:
			l := e.leaf
			for j := range l.n {
				if it := &l.it[j]; it.expired(now) {
					heap.Push(&h, dueEntry{at: it.exp, it: it})
				}
			}
		}
	}
}

// dueEntry is a subtree or an item in earliest's search.
type dueEntry struct {
	at    int64
	inner *ktInner
	leaf  *ktLeaf
	it    *item
}

type dueHeap []dueEntry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	// Subtrees before items of the same deadline, so that every item
	// of that deadline is in the heap before the first is given, and
	// items of one deadline by key: the order is the same on every run.
	if (h[i].it == nil) != (h[j].it == nil) {
		return h[i].it == nil
	}
	return h[i].it != nil && h[i].it.key < h[j].it.key
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Copy returns a read-only point-in-time view sharing everything with ks;
// ks copies the nodes it writes from now on. It needs the store's
// exclusive lock. The view must never be written.
func (ks *keyspace) Copy() *keyspace {
	view := &keyspace{shards: ks.shards, gen: ks.gen, n: ks.n, ttls: ks.ttls, vers: ks.vers}
	ks.gen++
	return view
}

// emptied returns an empty keyspace that goes on from ks's versions: what
// FLUSHALL leaves.
func (ks *keyspace) emptied() *keyspace {
	e := newKeys()
	e.gen = ks.gen + 1
	e.vers = ks.vers.flushedLocked()
	e.acc = ks.acc
	e.mods = ks.mods
	return e
}

// The tree of one shard.
//
// A leaf holds up to ktLeafMax items in order; an inner node up to
// ktInnerMax children, all leaves or all inner nodes. Child j of an inner
// node holds the items from its separator (sepHash[j], sepKey[j]) up to the
// next child's, child 0 everything below child 1's. A separator is a lower
// bound, not necessarily an item: after deletes it may be below its child's
// first item. sepKey is empty unless the two items either side of the
// boundary had the same hash when it was drawn (a collision of keyHash,
// which keys of one slot can have): then it is a copy of the right one's
// key, never an alias, so a separator does not keep a deleted value alive.
//
// Nodes are copied on write: one whose gen is not the keyspace's may be
// shared with a snapshot, and mutLeaf/mutInner replace it in its parent by
// a copy before it is changed.

const (
	ktLeafMax  = 32
	ktLeafMin  = ktLeafMax / 4
	ktInnerMax = 64
	ktInnerMin = ktInnerMax / 4
)

type ktRoot struct {
	inner *ktInner // the root, if it is an inner node
	leaf  *ktLeaf  // the root, if it is a leaf (nil with inner)
	n     int      // items
}

// min is the earliest deadline in the shard.
func (r *ktRoot) min() int64 {
	switch {
	case r.inner != nil:
		return r.inner.min()
	case r.leaf != nil:
		return r.leaf.min()
	}
	return noExp
}

type ktLeaf struct {
	gen uint64
	n   int
	// hash[i] is it[i].hash: searched on its own, the hashes of a leaf
	// are 4 cache lines where the items they are in are 40.
	hash [ktLeafMax + 1]uint64
	it   [ktLeafMax + 1]item // one more than fits, for the moment before a split
}

type ktInner struct {
	gen      uint64
	n        int
	leafKids bool
	// e holds each child and its separator's hash side by side: a
	// search's guess and the child it leads to are one cache line.
	e      [ktInnerMax + 1]ktEdge
	sepKey [ktInnerMax + 1]string
	cnt    [ktInnerMax + 1]int   // items under each child
	minExp [ktInnerMax + 1]int64 // each child's earliest deadline
}

// ktEdge is child j of an inner node: the node (one of inner, leaf,
// as the parent's leafKids says), and the hash side of its separator.
type ktEdge struct {
	hash  uint64
	inner *ktInner
	leaf  *ktLeaf
}

// ktSplit is a node split off to the right of another, and its separator.
type ktSplit struct {
	inner *ktInner
	leaf  *ktLeaf
	hash  uint64
	key   string
}

// search returns the index of the first item not less than (h, key), and
// whether it is that key.
func (l *ktLeaf) search(h uint64, key string) (int, bool) {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.hash[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for ; lo < l.n && l.hash[lo] == h; lo++ {
		// Equal first: the usual case, a hash that matches its key,
		// then costs a length check and one memequal.
		if k := l.it[lo].key; k == key {
			return lo, true
		} else if k > key {
			return lo, false
		}
	}
	return lo, false
}

// child returns the index of the child whose range holds (h, key).
func (x *ktInner) child(h uint64, key string) int {
	lo, hi := 1, x.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.e[m].hash <= h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo - 1
	for i > 0 && x.e[i].hash == h && x.sepKey[i] > key {
		i--
	}
	return i
}

func (l *ktLeaf) min() int64 {
	m := int64(noExp)
	for i := range l.n {
		if e := l.it[i].exp; e != 0 && e < m {
			m = e
		}
	}
	return m
}

func (x *ktInner) min() int64 {
	m := int64(noExp)
	for _, e := range x.minExp[:x.n] {
		m = min(m, e)
	}
	return m
}

func (ks *keyspace) mutLeaf(p **ktLeaf) *ktLeaf {
	l := *p
	if l.gen != ks.gen {
		c := new(ktLeaf)
		*c = *l
		c.gen = ks.gen
		*p, l = c, c
	}
	return l
}

func (ks *keyspace) mutInner(p **ktInner) *ktInner {
	x := *p
	if x.gen != ks.gen {
		c := new(ktInner)
		*c = *x
		c.gen = ks.gen
		*p, x = c, c
	}
	return x
}

// separator returns the bound between two neighbouring items a < b.
func separator(a, b *item) (uint64, string) {
	if a.hash != b.hash {
		return b.hash, ""
	}
	return b.hash, strings.Clone(b.key)
}

func (l *ktLeaf) insertAt(i int, it item) {
	copy(l.it[i+1:l.n+1], l.it[i:l.n])
	copy(l.hash[i+1:l.n+1], l.hash[i:l.n])
	l.it[i], l.hash[i] = it, it.hash
	l.n++
}

// take copies src's items [from, to) over l's from index at on (src may
// be l), and returns how many; l.n is the caller's to set.
func (l *ktLeaf) take(at int, src *ktLeaf, from, to int) int {
	copy(l.hash[at:], src.hash[from:to])
	return copy(l.it[at:], src.it[from:to])
}

// clearFrom empties the slots from index i on, which become unused.
func (l *ktLeaf) clearFrom(i int) {
	clear(l.it[i:l.n])
	clear(l.hash[i:l.n])
	l.n = i
}

func (l *ktLeaf) removeAt(i int) item {
	prev := l.it[i]
	copy(l.it[i:l.n-1], l.it[i+1:l.n])
	copy(l.hash[i:l.n-1], l.hash[i+1:l.n])
	l.n--
	l.it[l.n], l.hash[l.n] = item{}, 0 // let go of what it points to
	return prev
}

// leafSet inserts or replaces it in l (this generation's); a leaf that
// overflows is split, and the new right half returned. last says l is the
// shard's last leaf: an item appended there (a restore, which comes in
// order) splits off alone, so leaves loaded in order end full, not half
// full. Its hashes are within [lo, hi).
func (ks *keyspace) leafSet(l *ktLeaf, it item, last bool, lo, hi uint64) (item, bool, ktSplit) {
	i, found := l.searchNear(it.hash, it.key, lo, hi)
	if found {
		prev := l.it[i]
		l.it[i] = it
		return prev, true, ktSplit{}
	}
	l.insertAt(i, it)
	if l.n <= ktLeafMax {
		return item{}, false, ktSplit{}
	}
	r := &ktLeaf{gen: ks.gen}
	half := l.n / 2
	if last && i == l.n-1 {
		half = l.n - 1
	}
	r.n = r.take(0, l, half, l.n)
	l.clearFrom(half)
	h, k := separator(&l.it[half-1], &r.it[0])
	return item{}, false, ktSplit{leaf: r, hash: h, key: k}
}

// innerSet inserts or replaces it under x (this generation's); a node that
// overflows is split, and the new right half returned.
// last says x is the last node of its level, as for leafSet; its hashes
// are within [lo, hi).
func (ks *keyspace) innerSet(x *ktInner, it item, last bool, lo, hi uint64) (prev item, replaced bool, sp ktSplit) {
	j := x.childNear(it.hash, it.key, lo, hi)
	last = last && j == x.n-1
	lo, hi = x.bounds(j, lo, hi)
	var child ktSplit
	if x.leafKids {
		c := ks.mutLeaf(&x.e[j].leaf)
		prev, replaced, child = ks.leafSet(c, it, last, lo, hi)
	} else {
		c := ks.mutInner(&x.e[j].inner)
		prev, replaced, child = ks.innerSet(c, it, last, lo, hi)
	}
	if !replaced {
		x.cnt[j]++
	}
	if child.leaf != nil || child.inner != nil {
		x.insertChild(j+1, child)
		x.recount(j)
		x.recount(j + 1)
	} else {
		var old int64
		if replaced {
			old = prev.exp
		}
		if m, ok := deltaMin(x.minExp[j], old, it.exp); ok {
			x.minExp[j] = m
		} else {
			x.minExp[j] = x.childMin(j)
		}
	}
	if x.n <= ktInnerMax {
		return prev, replaced, ktSplit{}
	}
	r := &ktInner{gen: ks.gen, leafKids: x.leafKids}
	half := x.n / 2
	if last && j+1 == x.n-1 { // the new child is the last: see leafSet
		half = x.n - 1
	}
	sp = ktSplit{inner: r, hash: x.e[half].hash, key: x.sepKey[half]}
	r.n = x.n - half
	copy(r.e[:], x.e[half:x.n])
	copy(r.sepKey[:], x.sepKey[half:x.n])
	copy(r.cnt[:], x.cnt[half:x.n])
	copy(r.minExp[:], x.minExp[half:x.n])
	r.e[0].hash, r.sepKey[0] = 0, ""
	x.clearFrom(half)
	return prev, replaced, sp
}

// newRootInner is the root above a root that split: left (an inner node or
// a leaf) and the split-off right half.
func (ks *keyspace) newRootInner(left *ktInner, leftLeaf *ktLeaf, sp ktSplit) *ktInner {
	x := &ktInner{gen: ks.gen, n: 2, leafKids: leftLeaf != nil}
	x.e[0].inner, x.e[0].leaf = left, leftLeaf
	x.e[1].inner, x.e[1].leaf = sp.inner, sp.leaf
	x.e[1].hash, x.sepKey[1] = sp.hash, sp.key
	x.recount(0)
	x.recount(1)
	return x
}

// insertChild puts a split-off child at index j.
func (x *ktInner) insertChild(j int, sp ktSplit) {
	n := x.n
	copy(x.e[j+1:n+1], x.e[j:n])
	copy(x.sepKey[j+1:n+1], x.sepKey[j:n])
	copy(x.cnt[j+1:n+1], x.cnt[j:n])
	copy(x.minExp[j+1:n+1], x.minExp[j:n])
	x.e[j].hash, x.sepKey[j] = sp.hash, sp.key
	x.e[j].inner, x.e[j].leaf = sp.inner, sp.leaf
	x.n++
}

// removeChild drops the child at index j (j > 0: its range joins j-1's).
func (x *ktInner) removeChild(j int) {
	n := x.n
	copy(x.e[j:n-1], x.e[j+1:n])
	copy(x.sepKey[j:n-1], x.sepKey[j+1:n])
	copy(x.cnt[j:n-1], x.cnt[j+1:n])
	copy(x.minExp[j:n-1], x.minExp[j+1:n])
	x.clearFrom(n - 1)
}

// clearFrom empties the entries from index i on, which become unused.
func (x *ktInner) clearFrom(i int) {
	clear(x.e[i:x.n])
	clear(x.sepKey[i:x.n])
	clear(x.cnt[i:x.n])
	clear(x.minExp[i:x.n])
	x.n = i
}

// recount sets child j's count and earliest deadline from the child.
func (x *ktInner) recount(j int) {
	if x.leafKids {
		x.cnt[j] = x.e[j].leaf.n
	} else {
		c := x.e[j].inner
		x.cnt[j] = 0
		for _, n := range c.cnt[:c.n] {
			x.cnt[j] += n
		}
	}
	x.minExp[j] = x.childMin(j)
}

func (x *ktInner) childMin(j int) int64 {
	if x.leafKids {
		return x.e[j].leaf.min()
	}
	return x.e[j].inner.min()
}

func (x *ktInner) childLen(j int) int {
	if x.leafKids {
		return x.e[j].leaf.n
	}
	return x.e[j].inner.n
}

// innerDelete removes the item (h, key), which is under x (this
// generation's), and rebalances the child it left too small.
func (ks *keyspace) innerDelete(x *ktInner, h uint64, key string) (item, bool) {
	j := x.child(h, key)
	var prev item
	if x.leafKids {
		c := ks.mutLeaf(&x.e[j].leaf)
		i, ok := c.search(h, key)
		if !ok {
			return item{}, false
		}
		prev = c.removeAt(i)
	} else {
		c := ks.mutInner(&x.e[j].inner)
		var ok bool
		if prev, ok = ks.innerDelete(c, h, key); !ok {
			return item{}, false
		}
	}
	x.cnt[j]--
	if m, ok := deltaMin(x.minExp[j], prev.exp, 0); ok {
		x.minExp[j] = m
	} else {
		x.minExp[j] = x.childMin(j)
	}
	minLen := ktLeafMin
	if !x.leafKids {
		minLen = ktInnerMin
	}
	if x.childLen(j) < minLen && x.n > 1 {
		ks.rebalance(x, j)
	}
	return prev, true
}

// rebalance mends child j of x, left too small by a delete: merged with a
// neighbour when both fit in one node, else given some of its entries.
func (ks *keyspace) rebalance(x *ktInner, j int) {
	a := j // the left one of the pair
	if j+1 >= x.n {
		a = j - 1
	}
	b := a + 1
	if x.leafKids {
		la, lb := ks.mutLeaf(&x.e[a].leaf), ks.mutLeaf(&x.e[b].leaf)
		total := la.n + lb.n
		if total <= ktLeafMax {
			la.take(la.n, lb, 0, lb.n)
			la.n = total
			x.removeChild(b)
			x.recount(a)
			return
		}
		want := total / 2
		if la.n < want { // move lb's first ones to la's end
			k := want - la.n
			la.take(la.n, lb, 0, k)
			la.n = want
			lb.take(0, lb, k, lb.n)
			lb.clearFrom(lb.n - k)
		} else { // move la's last ones to lb's front
			k := la.n - want
			lb.take(k, lb, 0, lb.n)
			lb.take(0, la, want, la.n)
			la.clearFrom(want)
			lb.n += k
		}
		x.e[b].hash, x.sepKey[b] = separator(&la.it[la.n-1], &lb.it[0])
		x.recount(a)
		x.recount(b)
		return
	}
	xa, xb := ks.mutInner(&x.e[a].inner), ks.mutInner(&x.e[b].inner)
	total := xa.n + xb.n
	if total <= ktInnerMax {
		// xb's first child's range begins at x's separator for xb.
		xb.e[0].hash, xb.sepKey[0] = x.e[b].hash, x.sepKey[b]
		xa.appendFrom(xb, 0, xb.n)
		x.removeChild(b)
		x.recount(a)
		return
	}
	want := total / 2
	if xa.n < want {
		k := want - xa.n
		xb.e[0].hash, xb.sepKey[0] = x.e[b].hash, x.sepKey[b]
		xa.appendFrom(xb, 0, k)
		x.e[b].hash, x.sepKey[b] = xb.e[k].hash, xb.sepKey[k]
		xb.dropFront(k)
	} else {
		xb.e[0].hash, xb.sepKey[0] = x.e[b].hash, x.sepKey[b]
		xb.prependFrom(xa, want, xa.n)
		x.e[b].hash, x.sepKey[b] = xa.e[want].hash, xa.sepKey[want]
		xb.e[0].hash, xb.sepKey[0] = 0, ""
		xa.clearFrom(want)
	}
	x.recount(a)
	x.recount(b)
}

// appendFrom appends y's children [from, to) to x, separators included.
func (x *ktInner) appendFrom(y *ktInner, from, to int) {
	n := x.n
	copy(x.e[n:], y.e[from:to])
	copy(x.sepKey[n:], y.sepKey[from:to])
	copy(x.cnt[n:], y.cnt[from:to])
	copy(x.minExp[n:], y.minExp[from:to])
	x.n += to - from
}

// prependFrom puts y's children [from, to) before x's.
func (x *ktInner) prependFrom(y *ktInner, from, to int) {
	k, n := to-from, x.n
	copy(x.e[k:], x.e[:n])
	copy(x.sepKey[k:], x.sepKey[:n])
	copy(x.cnt[k:], x.cnt[:n])
	copy(x.minExp[k:], x.minExp[:n])
	copy(x.e[:k], y.e[from:to])
	copy(x.sepKey[:k], y.sepKey[from:to])
	copy(x.cnt[:k], y.cnt[from:to])
	copy(x.minExp[:k], y.minExp[from:to])
	x.n += k
}

// dropFront removes x's first k children; child k becomes the first.
func (x *ktInner) dropFront(k int) {
	n := x.n
	copy(x.e[:], x.e[k:n])
	copy(x.sepKey[:], x.sepKey[k:n])
	copy(x.cnt[:], x.cnt[k:n])
	copy(x.minExp[:], x.minExp[k:n])
	x.n = n // clearFrom clears [n-k, n) and sets n
	x.clearFrom(n - k)
	x.e[0].hash, x.sepKey[0] = 0, ""
}

func (l *ktLeaf) ascend(pivot *item, fn func(item) bool) bool {
	i := 0
	if pivot != nil {
		i, _ = l.search(pivot.hash, pivot.key)
	}
	for ; i < l.n; i++ {
		if !fn(l.it[i]) {
			return false
		}
	}
	return true
}

func (x *ktInner) ascend(pivot *item, fn func(item) bool) bool {
	j := 0
	if pivot != nil {
		j = x.child(pivot.hash, pivot.key)
	}
	for ; j < x.n; j++ {
		var more bool
		if x.leafKids {
			more = x.e[j].leaf.ascend(pivot, fn)
		} else {
			more = x.e[j].inner.ascend(pivot, fn)
		}
		if !more {
			return false
		}
		pivot = nil
	}
	return true
}

func (l *ktLeaf) scanExpired(now int64, fn func(*item) bool) bool {
	for i := range l.n {
		if it := &l.it[i]; it.expired(now) && !fn(it) {
			return false
		}
	}
	return true
}

func (x *ktInner) scanExpired(now int64, fn func(*item) bool) bool {
	for j := range x.n {
		if x.minExp[j] > now {
			continue
		}
		var more bool
		if x.leafKids {
			more = x.e[j].leaf.scanExpired(now, fn)
		} else {
			more = x.e[j].inner.scanExpired(now, fn)
		}
		if !more {
			return false
		}
	}
	return true
}
