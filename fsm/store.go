package fsm

import (
	"sync"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/btree"
)

// kind is the type tag of a stored value. Its numeric values appear in
// snapshots: never renumber, only append.
type kind uint8

const (
	kindString kind = 1
)

// typeName is what TYPE answers and what SCAN's TYPE filter compares with.
func (k kind) typeName() string {
	switch k {
	case kindString:
		return "string"
	}
	return "none"
}

// item is one key in the keyspace. Items are stored by value in
// copy-on-write B-trees ordered by (hash, key): the hash order gives SCAN a
// cursor that is stable under inserts and deletes, and by-value storage lets a
// snapshot share the tree's nodes (the tree copies a node before changing it).
//
// The bytes of val are immutable up to len(val): readers get aliases of them
// and snapshots write them without the lock. A write builds a new slice,
// except APPEND, which may write into the spare capacity past len(val), which
// no alias can see.
type item struct {
	hash uint64
	key  string
	val  []byte // kindString: the string
	exp  int64  // absolute Unix ms; 0: no TTL
	kind kind
}

// expired reports whether it is logically gone at now. Every lookup goes
// through it, so an expired key behaves as absent for reads and writes alike.
func (it *item) expired(now int64) bool { return it.exp != 0 && it.exp <= now }

// size estimates the memory an item holds: its slot in the tree (with the
// slack of half-full nodes), the key and value allocations, and its entry in
// the expiry index if it has a TTL.
func (it *item) size() int64 {
	n := itemSlotBytes + int64(roundAlloc(len(it.key)+cap(it.val)))
	if it.exp != 0 {
		n += expirySlotBytes
	}
	return n
}

const (
	itemSlotBytes   = int64(unsafe.Sizeof(item{})) * 3 / 2
	expirySlotBytes = int64(unsafe.Sizeof(expiry{})) * 3 / 2
)

// roundAlloc rounds n up to a multiple of 16, roughly Go's smallest size
// classes, so MEMORY USAGE and Stats.Bytes stay honest for small values.
func roundAlloc(n int) int { return (n + 15) &^ 15 }

// keyHash orders the keyspace. It is never 0 (cursor 0 means "start" and
// "done" in SCAN) and fits in 63 bits so the cursor is a non-negative int64.
// It must never change: snapshots are validated against this order.
func keyHash(key string) uint64 { return xxhash.Sum64String(key)>>1 | 1 }

func itemLess(a, b item) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.key < b.key
}

// expiry is one entry of the TTL index, ordered by deadline so the keys due
// first are found without scanning the keyspace.
type expiry struct {
	at  int64
	key string
}

func expiryLess(a, b expiry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.key < b.key
}

// Store is the keyspace. All methods are safe for concurrent use.
type Store struct {
	// mu guards every field below. Apply and Restore hold it exclusively
	// for a whole batch; Read and Stats hold it shared; Snapshot holds it
	// exclusively only to copy the tree's root.
	mu      sync.RWMutex
	keys    *keyspace
	expires *btree.BTreeG[expiry] // exactly the items with exp != 0
	bytes   int64                 // sum of item.size() over keys
	applied uint64                // index of the last applied entry
	// meta is the replicated cluster metadata (OpMetaSet). The map is
	// never modified once stored here: a write replaces it with a changed
	// copy, so Snapshot can share it. nil when empty.
	meta map[string]string
}

func newKeys() *keyspace { return new(keyspace) }
func newExpires() *btree.BTreeG[expiry] {
	return btree.NewBTreeGOptions(expiryLess, treeOptions)
}

// NewStore returns an empty store with AppliedIndex 0.
func NewStore() *Store {
	return &Store{keys: newKeys(), expires: newExpires()}
}

// Stats describes the keyspace at a moment.
type Stats struct {
	Keys    int   // keys not expired at now
	Expires int   // of those, keys with a TTL
	Bytes   int64 // estimated memory held by all keys, expired or not
}

// Stats returns key counts and an estimate of the memory used.
func (s *Store) Stats(now int64) Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	dead := s.countExpiredLocked(now)
	return Stats{
		Keys:    s.keys.Len() - dead,
		Expires: s.expires.Len() - dead,
		Bytes:   s.bytes,
	}
}

// AppliedIndex returns the index of the last entry applied (or restored).
func (s *Store) AppliedIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// ExpiredKeys returns up to max keys whose deadline is not after now, the
// ones due first first. The active-expiry loop proposes OpDelExpired for them.
// The keys are copies.
func (s *Store) ExpiredKeys(now int64, max int) [][]byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out [][]byte
	s.expires.Scan(func(e expiry) bool {
		if e.at > now || len(out) >= max {
			return false
		}
		out = append(out, []byte(e.key))
		return true
	})
	return out
}

func (s *Store) countExpiredLocked(now int64) int {
	n := 0
	s.expires.Scan(func(e expiry) bool {
		if e.at > now {
			return false
		}
		n++
		return true
	})
	return n
}

// unsafeString views b as a string without copying, for lookups only: the
// result must not be stored.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// getLocked returns the item for key, whether or not it is expired.
func (s *Store) getLocked(key []byte) (item, bool) {
	k := unsafeString(key)
	return s.keys.Get(item{hash: keyHash(k), key: k})
}

// liveLocked returns the item for key if it exists and is not expired at now.
func (s *Store) liveLocked(key []byte, now int64) (item, bool) {
	it, ok := s.getLocked(key)
	if !ok || it.expired(now) {
		return item{}, false
	}
	return it, true
}

// newItem builds a string item owning copies of key and val in one
// allocation: the hot SET path costs one allocation.
func newItem(key, val []byte, exp int64) item {
	n := len(key) + len(val)
	if n == 0 {
		return item{hash: keyHash(""), val: []byte{}, exp: exp, kind: kindString}
	}
	buf := make([]byte, n)
	copy(buf, key)
	copy(buf[len(key):], val)
	k := unsafe.String(&buf[0], len(key))
	return item{hash: keyHash(k), key: k, val: buf[len(key):], exp: exp, kind: kindString}
}

// ownItem builds a string item whose key is buf[:klen] and value the rest,
// taking ownership of buf.
func ownItem(buf []byte, klen int, exp int64) item {
	var k string
	if klen > 0 {
		k = unsafe.String(&buf[0], klen)
	}
	return item{hash: keyHash(k), key: k, val: buf[klen:len(buf):len(buf)], exp: exp, kind: kindString}
}

// putLocked stores it, replacing any item with the same key, and keeps the
// expiry index and byte count in step.
func (s *Store) putLocked(it item) {
	prev, replaced := s.keys.Set(it)
	if replaced {
		s.bytes -= prev.size()
		if prev.exp != 0 && prev.exp != it.exp {
			s.expires.Delete(expiry{prev.exp, prev.key})
		}
	}
	if it.exp != 0 {
		// Also when the deadline is unchanged: the entry must hold the
		// new item's key string, or it would pin the old allocation.
		s.expires.Set(expiry{it.exp, it.key})
	}
	s.bytes += it.size()
}

// deleteLocked removes key; it reports whether there was an item, expired
// or not.
func (s *Store) deleteLocked(key []byte) (item, bool) {
	k := unsafeString(key)
	prev, ok := s.keys.Delete(item{hash: keyHash(k), key: k})
	if ok {
		s.forgetLocked(prev)
	}
	return prev, ok
}

func (s *Store) forgetLocked(prev item) {
	s.bytes -= prev.size()
	if prev.exp != 0 {
		s.expires.Delete(expiry{prev.exp, prev.key})
	}
}
