package fsm

import "github.com/tidwall/btree"

// keyspace is the set of items in (hash, key) order, split by the top bits
// of the hash into independent B-trees. Splitting keeps each tree shallow
// (about a thousand keys per tree at a million keys), which saves a level
// or two of cache misses per lookup compared with one deep tree, while the
// order across shards is still the hash order SCAN relies on.
//
// Copy is lazy: it copies the array of tree pointers and starts a new
// generation; a shard is cloned (tidwall/btree's O(1) Copy) only when it is
// first written in the new generation, so a snapshot costs a few
// microseconds under the lock whatever the number of keys.
type keyspace struct {
	shards [keyShards]*btree.BTreeG[item] // nil until a key lands there
	// gen counts Copy calls; a shard whose shardGen is older may be shared
	// with a snapshot and must be cloned before it is written.
	gen      uint64
	shardGen [keyShards]uint64
	n        int
	// vers is the write counter Set stamps items with, and what WATCH
	// needs to know of deleted keys (multi.go).
	vers versions
}

const (
	keyShardBits = 10
	keyShards    = 1 << keyShardBits
)

var treeOptions = btree.Options{NoLocks: true} // Store.mu does the locking

// shardOf maps a hash (below 2^63, see keyHash) to its shard, preserving
// order: a lower shard holds only lower hashes.
func shardOf(hash uint64) int { return int(hash >> (63 - keyShardBits)) }

func (ks *keyspace) Len() int { return ks.n }

func (ks *keyspace) Get(pivot item) (item, bool) {
	if t := ks.shards[shardOf(pivot.hash)]; t != nil {
		return t.Get(pivot)
	}
	return item{}, false
}

// shardForWrite returns the tree for hash, ready to be modified: created if
// missing, cloned if a snapshot may still share it.
func (ks *keyspace) shardForWrite(hash uint64) *btree.BTreeG[item] {
	i := shardOf(hash)
	switch {
	case ks.shards[i] == nil:
		ks.shards[i] = btree.NewBTreeGOptions(itemLess, treeOptions)
	case ks.shardGen[i] != ks.gen:
		// The snapshot keeps the old tree object; Copy gives both
		// new isolation ids, so each copies shared nodes before
		// changing them. Copy writes only the old tree's isoid,
		// which the snapshot's read-only scans never read.
		ks.shards[i] = ks.shards[i].Copy()
	}
	ks.shardGen[i] = ks.gen
	return ks.shards[i]
}

// Set inserts or replaces it and returns the item it replaced.
func (ks *keyspace) Set(it item) (item, bool) {
	ks.vers.storedLocked(&it, ks.gen)
	prev, replaced := ks.shardForWrite(it.hash).Set(it)
	if !replaced {
		ks.n++
	}
	return prev, replaced
}

// Load is Set for items arriving in ascending order (a restore), which the
// trees append without searching. It keeps the items' versions.
func (ks *keyspace) Load(it item) {
	if _, replaced := ks.shardForWrite(it.hash).Load(it); !replaced {
		ks.n++
	}
}

func (ks *keyspace) Delete(pivot item) (item, bool) {
	if ks.shards[shardOf(pivot.hash)] == nil {
		return item{}, false
	}
	prev, ok := ks.shardForWrite(pivot.hash).Delete(pivot)
	if ok {
		ks.n--
		ks.vers.deletedLocked(&prev, ks.gen)
	}
	return prev, ok
}

// Ascend calls fn for each item not less than pivot, in order, until fn
// returns false.
func (ks *keyspace) Ascend(pivot item, fn func(item) bool) {
	more := true
	wrap := func(it item) bool { more = fn(it); return more }
	for i := shardOf(pivot.hash); i < keyShards && more; i++ {
		if t := ks.shards[i]; t != nil {
			t.Ascend(pivot, wrap)
		}
	}
}

// Scan calls fn for every item, in order, until fn returns false.
func (ks *keyspace) Scan(fn func(item) bool) {
	ks.Ascend(item{}, fn)
}

// GetAt returns the item of rank i in the keyspace order.
func (ks *keyspace) GetAt(i int) (item, bool) {
	for _, t := range ks.shards {
		if t == nil {
			continue
		}
		if i < t.Len() {
			return t.GetAt(i)
		}
		i -= t.Len()
	}
	return item{}, false
}

// Copy returns a read-only point-in-time view sharing everything with ks;
// ks clones what it writes from now on (see shardForWrite). It needs the
// store's exclusive lock. The view must never be written.
func (ks *keyspace) Copy() *keyspace {
	ks.gen++
	return &keyspace{shards: ks.shards, n: ks.n, vers: ks.vers}
}

// emptied returns an empty keyspace that goes on from ks's versions: what
// FLUSHALL leaves.
func (ks *keyspace) emptied() *keyspace {
	return &keyspace{vers: ks.vers.flushedLocked()}
}
