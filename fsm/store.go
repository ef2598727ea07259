package fsm

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/btree"
)

// kind is the type tag of a stored value. Its numeric values appear in
// snapshots: never renumber, only append. Each kind's name, snapshot
// encoding and decoding are its row in the kind table (kinds.go).
type kind uint8

const (
	kindString kind = 1
	kindHash   kind = 2
	kindList   kind = 3
	kindSet    kind = 4
	kindZSet   kind = 5
)

// typeName is what TYPE answers and what SCAN's TYPE filter compares with.
func (k kind) typeName() string {
	if int(k) < len(kindTable) && kindTable[k].name != "" {
		return kindTable[k].name
	}
	return "none"
}

// item is one key in the keyspace. Items are stored by value in
// copy-on-write B-trees ordered by (hash, key), where the hash begins with
// the key's Redis Cluster slot: the order gives SCAN a cursor that is stable
// under inserts and deletes and keeps each slot's keys together, and
// by-value storage lets a snapshot share the tree's nodes (the tree copies a
// node before changing it).
//
// The bytes of val are immutable up to len(val): readers get aliases of them
// and snapshots write them without the lock. A write builds a new slice,
// except APPEND, which may write into the spare capacity past len(val), which
// no alias can see.
//
// A collection (hash, list, set, sorted set) is held in one of two forms,
// chosen by its type's file: packed into val as one flat buffer while small
// (Redis's listpack and intset; immutable like a string's bytes, so a write
// builds a new buffer and snapshots share the old one for free), or as obj,
// a structure of its own, once large. obj is shared with snapshots taken
// since it was last written: editLocked clones it (in O(1) for the B-trees
// it is made of) before a write changes it.
type item struct {
	hash uint64
	key  string
	val  []byte // kindString: the string; a collection: its packed form, or nil
	obj  object // a collection's large form, or nil
	exp  int64  // absolute Unix ms; 0: no TTL
	kind kind
	// enc is what OBJECT ENCODING remembers of how a string was last
	// written, where Redis's answer depends on it and not only on the
	// bytes (see stringEncoding). It costs no memory (the struct's
	// padding) and is not kept in snapshots, as Redis forgets it on
	// reload.
	enc stringEnc
	// verHi and verLo are the item's version (multi.go): the low 48 bits
	// of the store's write counter when it was last written, which WATCH
	// compares. They fill the struct's padding, so a version costs no
	// memory; keyspace.Set stamps them.
	verHi uint16
	verLo uint32
}

// stringEnc is item.enc.
type stringEnc uint8

const (
	encByContent stringEnc = iota // int, embstr or raw by the bytes (SET and most writes)
	encRaw                        // written in place (APPEND, SETRANGE, SETBIT, BITFIELD, BITOP): raw
	encNoInt                      // a formatted number (INCRBYFLOAT): embstr or raw, never int
	encUnshared                   // by content, but a copy (COPY): never one of Redis's shared integers
)

// object is a collection's large form.
type object interface {
	// clone returns a copy that can be changed while the receiver, which
	// a snapshot may hold, stays as it is. It must be cheap: tidwall/btree's
	// Copy is O(1) and copies nodes lazily as either side writes them.
	clone() object
	// size estimates the memory the object holds, in bytes. It is kept up
	// to date as the object changes (O(1)), since every write reads it.
	size() int64
	// cowGen is the keyspace generation the object was last cloned or
	// created in (see editLocked).
	cowGen() *uint64
	// freeEffort is what Redis's lazyfreeGetFreeEffort says freeing it
	// takes: its elements (a list's chunks), for lazyfreed_objects.
	freeEffort() int
}

// expired reports whether it is logically gone at now. Every lookup goes
// through it, so an expired key behaves as absent for reads and writes alike.
func (it *item) expired(now int64) bool { return it.exp != 0 && it.exp <= now }

// size estimates the memory an item holds: its slot in the tree (with the
// slack of part-full nodes) and the key and value allocations. A deadline
// costs nothing more: it is in the slot, and the tree is the TTL index.
func (it *item) size() int64 {
	n := itemSlotBytes + int64(roundAlloc(len(it.key)+cap(it.val)))
	if it.obj != nil {
		n += it.obj.size()
	}
	return n
}

const itemSlotBytes = int64(unsafe.Sizeof(item{})) * 3 / 2

// roundAlloc rounds n up to a multiple of 16, roughly Go's smallest size
// classes, so MEMORY USAGE and Stats.Bytes stay honest for small values.
func roundAlloc(n int) int { return (n + 15) &^ 15 }

// keyHash orders the keyspace: the key's Redis Cluster slot (14 bits), then
// 49 bits of its xxhash64 with the lowest bit set. It is never 0 (cursor 0
// means "start" and "done" in SCAN) and fits in 63 bits so the cursor is a
// non-negative int64. The keys of one slot are one range of the order, from
// slotHash(slot) up to slotHash(slot+1). It must never change: snapshots
// since version 3 are validated against this order.
func keyHash(key string) uint64 {
	return slotHash(KeySlot(key)) | xxhash.Sum64String(key)>>(64-slotHashShift) | 1
}

// slotHashShift is where the slot sits in a keyHash.
const slotHashShift = 49

// SlotCursor is the SCAN cursor at which slot's keys begin: the keyspace
// is ordered by slot first (keyHash), so a scan of a range of slots starts
// there, and a cursor below it has not reached the slot yet.
func SlotCursor(slot int) uint64 { return slotHash(slot) }

// CursorSlot is the slot whose keys a SCAN cursor lies among.
func CursorSlot(cursor uint64) int { return int(cursor >> slotHashShift) }

// slotHash is the smallest hash of a key in slot.
func slotHash(slot int) uint64 { return uint64(slot) << slotHashShift }

// memberHash orders the members of a hash (its fields) and of a set, in
// both their packed and large forms: the order is then the same on every
// replica whatever encoding each chose, and HSCAN and SSCAN get SCAN's
// integer cursor, the hash of the next member to visit. Like keyHash it is
// never 0 and below 2^63. It must never change: snapshots hold members in
// this order.
func memberHash(m []byte) uint64 { return xxhash.Sum64(m)>>1 | 1 }

// memberHashString is memberHash of a string, without converting it.
func memberHashString(m string) uint64 { return xxhash.Sum64String(m)>>1 | 1 }

// legacyKeyHash is the order of snapshots before version 3 (xxhash64
// shifted to 63 bits with the low bit set), kept to validate them.
func legacyKeyHash(key string) uint64 { return xxhash.Sum64String(key)>>1 | 1 }

func itemLess(a, b item) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.key < b.key
}

// treeOptions are those of the collections' B-trees (hashes, sets):
// Store.mu does the locking.
var treeOptions = btree.Options{NoLocks: true}

// Store is the keyspace. All methods are safe for concurrent use.
type Store struct {
	// mu guards every field below. Apply and Restore hold it exclusively
	// for a whole batch; Read and Stats hold it shared; Snapshot holds it
	// exclusively only to copy the tree's root.
	mu sync.RWMutex
	// keys is the current database's keyspace, and its TTL index
	// (keyspace.go); cur is its number, and dbs the other databases
	// (db.go). At rest cur is 0.
	keys      *keyspace
	cur       uint16
	excl      bool // the lock is held exclusively (set and read by its holder)
	dbs       []dbKeys
	bytes     int64                  // sum of item.size() over keys
	bytesPub  atomic.Int64           // bytes as of the last apply, for readers without the lock
	applied   uint64                 // index of the last applied entry
	limits    Limits                 // encoding thresholds (limits.go)
	limitsPub atomic.Pointer[Limits] // limits, for readers without the lock
	// lfu is lfu-log-factor and lfu-decay-time (access.go), which the
	// access records of an LFU policy read without the lock.
	lfu *lfuParams
	// ready holds the keys signalled for blocked clients during the
	// current Apply; readyHook receives them after it (limits.go).
	ready     []string
	readyHook func(keys []string)
	// notify holds keyspace notifications (notify.go).
	notify notifier
	// mods holds the keys changed for client-side caching (tracking.go).
	mods modified
	// expired holds the keys reads found expired (expire.go).
	expired expiredSink
	// meta is the replicated cluster metadata (OpMetaSet). The map is
	// never modified once stored here: a write replaces it with a changed
	// copy, so Snapshot can share it. nil when empty.
	meta    map[string]string
	metaPub atomic.Pointer[map[string]string] // meta, for readers without the lock
	// metaChanged says meta was replaced since metaHook was last told
	// (SetMetaHook).
	metaChanged bool
	metaHook    func()
	// acl is the replicated ACL table (OpACLSet, acl.go), replaced, never
	// modified, like meta; aclWritten says an OpACLSet was ever applied
	// (ACLSeed's condition). aclGen changes with either; it is atomic so
	// the server can compare it before every command without the lock.
	acl        map[string]string
	aclWritten bool
	aclGen     atomic.Uint64
	aclPub     atomic.Pointer[aclTable] // acl and its generation, for readers without the lock
	// parser parses the commands scripts call (SetCommandParser); vms
	// are the Lua interpreters scripts run in (lua.go).
	parser CommandParser
	vms    vmPool
	// callLevel is the level of the commands scripts may call now, and
	// gatedCalls says the entries set it (calllevel.go).
	callLevel  int
	gatedCalls bool
	// lazyFreed counts what Redis would have freed in the background
	// (LazyFreed): a node's statistic, outside the replicated state.
	lazyFreed atomic.Int64
	// dirty is Redis's count of changes (Dirty, dirty.go);
	// dirtyReported says the op being applied counted its own.
	dirty         int64
	dirtyReported bool
	dirtyPub      atomic.Int64 // dirty as of the last apply, for readers without the lock

	// slots is which hash slots the store serves, and the moves of
	// slots in flight (slots.go, move.go); nil: it owns every slot and
	// moves none, as a store does until told otherwise.
	slots *slotTable

	// entry is the index of the entry being applied (0: memory mode's),
	// and applyServe what the caller of ApplyServing serves while a
	// script of its batch is busy (script_state.go).
	entry      uint64
	applyServe func()

	// busy lists the scripts past the busy threshold (script_state.go),
	// and gate keeps serving callers from waiting behind a script for the
	// lock (serving.go); both have their own synchronisation.
	busy busyScripts
	gate lockGate
}

// NewStore returns an empty store with AppliedIndex 0.
func NewStore() *Store {
	s := &Store{keys: newKeys(), limits: DefaultLimits(), callLevel: ApplyLevel, lfu: newLFUParams()}
	s.keys.mods = &s.mods
	return s
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
	return s.statsLocked(now)
}

func (s *Store) statsLocked(now int64) Stats {
	dead := s.countExpiredLocked(now)
	st := Stats{
		Keys:    s.keys.Len() - dead,
		Expires: s.keys.TTLs() - dead,
		Bytes:   s.totalBytesLocked(),
	}
	if s.slots != nil {
		// Keys of slots not served are not keys of the store's (their
		// memory is held all the same).
		st.Keys -= s.hiddenLenLocked()
		st.Expires -= s.hiddenTTLsLocked()
	}
	return st
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
	if max <= 0 {
		return nil
	}
	s.keys.earliest(now, func(it *item) bool {
		if s.slots != nil && s.slots.mode[CursorSlot(it.hash)] > slotExporting {
			return true // not the store's to delete now (slots.go)
		}
		out = append(out, []byte(it.key))
		return len(out) < max
	})
	return out
}

// countExpiredLocked is the number of keys expired at now in the slots
// the store serves.
func (s *Store) countExpiredLocked(now int64) int {
	if s.slots == nil {
		return s.keys.countExpired(now)
	}
	if s.keys.nextDue() > now {
		return 0
	}
	n := 0
	s.keys.scanExpired(now, func(it *item) bool {
		if !s.hiddenLocked(it.hash) {
			n++
		}
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

// lookupLocked is the typed lookup every command of a type starts with: the
// live item for key, whether there is one, and wrong when there is one of
// another kind, which the caller answers with replyWrongType.
func (s *Store) lookupLocked(now int64, key []byte, k kind) (it item, ok, wrong bool) {
	it, ok = s.liveLocked(key, now)
	if ok && it.kind != k {
		return item{}, false, true
	}
	return it, ok, false
}

// editLocked prepares it's large form for a change: when a snapshot may
// share it (it was created or last cloned before the latest Snapshot), it
// is cloned first and it.obj replaced. It returns the item's size before the
// change, for endEditLocked.
func (s *Store) editLocked(it *item) (before int64) {
	before = it.size()
	if it.obj != nil && *it.obj.cowGen() != s.keys.gen {
		it.obj = it.obj.clone()
		*it.obj.cowGen() = s.keys.gen
	}
	return before
}

// endEditLocked stores it after a change begun with editLocked, whose
// return value is before, keeping the byte count right even though the
// object changed in place. A collection left empty must be deleted by the
// caller instead (Redis never keeps an empty collection).
func (s *Store) endEditLocked(it item, before int64) {
	s.keys.Set(it)
	s.bytes += it.size() - before
}

// newCollection builds an item for key holding a collection of kind k,
// packed (val) or large (obj, created in the current generation).
func (s *Store) newCollection(key []byte, k kind, val []byte, obj object, exp int64) item {
	ks := string(key)
	if obj != nil {
		*obj.cowGen() = s.keys.gen
	}
	return item{hash: keyHash(ks), key: ks, val: val, obj: obj, exp: exp, kind: k}
}

// peekLocked is liveLocked for the lookups Redis makes without counting
// an access of the key (LOOKUP_NOTOUCH: TTL, TYPE, EXISTS, OBJECT) or
// without a lookup at all (MEMORY USAGE, KEYS): OBJECT IDLETIME is left
// as it was.
func (s *Store) peekLocked(key []byte, now int64) (item, bool) {
	k := unsafeString(key)
	p := s.keys.peek(keyHash(k), k)
	if p == nil || p.expired(now) {
		return item{}, false
	}
	return *p, true
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
	return newItemHash(key, val, exp, 0)
}

// newItemHash is newItem for a key whose keyHash is known already (a
// read-modify-write such as INCR looked the key up first); 0 means unknown.
func newItemHash(key, val []byte, exp int64, hash uint64) item {
	n := len(key) + len(val)
	if n == 0 {
		return item{hash: keyHash(""), val: []byte{}, exp: exp, kind: kindString}
	}
	buf := make([]byte, n)
	copy(buf, key)
	copy(buf[len(key):], val)
	k := unsafe.String(&buf[0], len(key))
	if hash == 0 {
		hash = keyHash(k)
	}
	return item{hash: hash, key: k, val: buf[len(key):], exp: exp, kind: kindString}
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
// byte count in step. A collection whose large form was changed in place
// is stored with endEditLocked instead, which knows its size before the
// change.
func (s *Store) putLocked(it item) {
	if prev, replaced := s.keys.Set(it); replaced {
		s.bytes -= prev.size()
		if prev.kind == kindStream && it.kind != kindStream {
			s.signalReadyLocked([]byte(it.key)) // streamGone
		}
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
		if prev.kind == kindStream {
			// Clients blocked in XREADGROUP on it are answered that it
			// is gone, as Redis does.
			s.signalReadyLocked(key)
		}
	}
	return prev, ok
}

func (s *Store) forgetLocked(prev item) {
	s.bytes -= prev.size()
}
