package fsm

import (
	"math"
	"math/rand/v2"
)

// Eviction for maxmemory: the store picks keys as a maxmemory-policy
// says (EvictionCandidates), and OpEvict deletes them. The choice is made
// outside apply, by the node that decides evictions (the server in memory
// and durable mode, the leader in a cluster), and written into the
// command, so every replica deletes the same keys.

// OpEvict: Args = keys. Deletes each key present, whatever its deadline,
// announcing "evicted" (class e). Reply :number deleted.
const OpEvict Op = opBaseKeys + 50

func init() {
	registerOp(OpEvict, opSpec{name: "EVICT", write: true, args: argsAny, apply: applyEvict, keys: keysAll,
		slotSkips: true})
}

func applyEvict(s *Store, now int64, c *Command) Reply {
	var n int64
	for _, k := range c.Args {
		if !s.slotWritableLocked(k) {
			continue
		}
		if _, ok := s.deleteLocked(k); ok {
			n++
			s.notifyLocked(NotifyEvicted, "evicted", k)
		}
	}
	return IntReply(n)
}

// EvictPolicy is the maxmemory-policy that picks the keys to evict.
type EvictPolicy uint8

const (
	EvictNone           EvictPolicy = iota // noeviction: writes are refused instead
	EvictAllKeysRandom                     // allkeys-random
	EvictVolatileRandom                    // volatile-random: keys with a TTL
	EvictVolatileTTL                       // volatile-ttl: the keys due soonest
	EvictAllKeysLRU                        // allkeys-lru: the least recently used
	EvictVolatileLRU                       // volatile-lru
	EvictAllKeysLFU                        // allkeys-lfu: the least frequently used
	EvictVolatileLFU                       // volatile-lfu
)

// volatile reports whether p evicts only keys with a TTL.
func (p EvictPolicy) volatile() bool {
	return p == EvictVolatileRandom || p == EvictVolatileTTL || p == EvictVolatileLRU || p == EvictVolatileLFU
}

// Tracks reports which key access records p needs (SetAccessTracking):
// frequency for the LFU policies, recency to the millisecond for the LRU
// ones, and to the second under every other, as Redis keeps it for
// OBJECT IDLETIME whatever the policy.
func (p EvictPolicy) Tracks() AccessTracking {
	switch p {
	case EvictAllKeysLFU, EvictVolatileLFU:
		return TrackLFU
	case EvictAllKeysLRU, EvictVolatileLRU:
		return TrackLRU
	}
	return TrackIdle
}

// DataBytes is the store's estimate of what its keys and values hold
// (Stats().Bytes) as of the last entry applied, read without the lock:
// maxmemory's check reads it before commands, which a script holding the
// lock must not hold up.
func (s *Store) DataBytes() int64 { return s.bytesPub.Load() }

// Evictable reports whether policy has a key it may evict.
func (s *Store) Evictable(policy EvictPolicy) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.evictableLocked(policy)
}

func (s *Store) evictableLocked(policy EvictPolicy) bool {
	if policy == EvictNone {
		return false
	}
	has := func(ks *keyspace) bool {
		if policy.volatile() {
			return ks.TTLs() > 0
		}
		return ks.Len() > 0
	}
	if has(s.keys) {
		return true
	}
	found := false
	s.otherDBsLocked(func(_ uint16, d dbKeys) { found = found || has(d.keys) })
	return found
}

// EvictionCandidates returns keys (copies) to evict under policy until
// about free bytes are freed, at most limit of them, and the bytes they
// hold. As in Redis, each key is the best of samples picked at random
// (among the keys with a TTL for the volatile policies): the most idle for
// LRU, the least used for LFU, the first found for the random policies;
// volatile-ttl takes the keys due soonest, exactly rather than the best of
// a sample. A volatile policy that finds no key with a TTL in 16 tries per
// sample takes the keys due soonest.
func (s *Store) EvictionCandidates(policy EvictPolicy, samples, limit int, free int64) ([][]byte, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.evictionCandidatesLocked(policy, samples, limit, free)
}

// EvictionCandidatesInDB is EvictionCandidates among the keys of database
// db (not 0), which OpEvict of that database deletes. Database 0's keys
// are evicted first; the others' when it has none to give.
func (s *Store) EvictionCandidatesInDB(db int, policy EvictPolicy, samples, limit int, free int64) ([][]byte, int64) {
	if db <= 0 || db > MaxDB {
		return nil, 0
	}
	s.lockRaw(true)
	defer s.unlockRaw(true)
	if s.dbLocked(uint16(db)).keys == nil {
		return nil, 0
	}
	s.selectLocked(uint16(db))
	defer s.selectLocked(0)
	return s.evictionCandidatesLocked(policy, samples, limit, free)
}

func (s *Store) evictionCandidatesLocked(policy EvictPolicy, samples, limit int, free int64) ([][]byte, int64) {
	var keys [][]byte
	var freed int64
	take := func(it *item) bool {
		if !s.evictableSlotLocked(it.hash) {
			return true // not the store's to delete now (slots.go)
		}
		keys = append(keys, []byte(it.key))
		freed += it.size()
		return len(keys) < limit && freed < free
	}
	n := s.keys.Len()
	if n == 0 || policy == EvictNone || (policy.volatile() && s.keys.TTLs() == 0) {
		return nil, 0
	}
	if policy == EvictVolatileTTL {
		s.keys.earliest(math.MaxInt64-1, take)
		return keys, freed
	}
	samples = max(samples, 1)
	if policy == EvictAllKeysRandom || policy == EvictVolatileRandom {
		samples = 1
	}
	acc := s.keys.acc
	seen := map[string]bool{}
	for {
		var best item
		bestScore, found := int64(-1), false
		for range samples {
			it, ok := s.pickLocked(n, policy.volatile(), seen)
			if !ok {
				break
			}
			score := int64(0)
			if acc != nil {
				score = acc.evictScore(it.hash)
			}
			if score > bestScore {
				best, bestScore, found = it, score, true
			}
		}
		if !found {
			// Only once every key was taken: a volatile pick finds a key
			// with a deadline while one is left (pickLocked).
			return keys, freed
		}
		seen[best.key] = true
		if !take(&best) {
			return keys, freed
		}
	}
}

// evictableSlotLocked reports whether the keys of hash's slot may be
// evicted: those of slots the store may write (slots.go).
func (s *Store) evictableSlotLocked(hash uint64) bool {
	return s.slots == nil || s.slots.mode[CursorSlot(hash)] <= slotExporting
}

// pickLocked picks a key at random that is not in seen, with a TTL if
// volatile. A volatile pick that 16 probes of the whole keyspace miss
// (few keys have a TTL) descends at random through the subtrees holding
// one instead, as Redis samples its expires dict. ok is false when no
// such key is left.
func (s *Store) pickLocked(n int, volatile bool, seen map[string]bool) (item, bool) {
	for range 16 {
		it, _ := s.keys.GetAt(rand.IntN(n))
		if !seen[it.key] && (!volatile || it.exp != 0) && s.evictableSlotLocked(it.hash) {
			return it, true
		}
	}
	if volatile {
		return s.keys.randomWithDeadline(func(it *item) bool { return !seen[it.key] && s.evictableSlotLocked(it.hash) })
	}
	return item{}, false
}
