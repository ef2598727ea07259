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
	registerOp(OpEvict, opSpec{name: "EVICT", write: true, args: argsAny, apply: applyEvict, keys: keysAll})
}

func applyEvict(s *Store, now int64, c *Command) Reply {
	var n int64
	for _, k := range c.Args {
		if _, ok := s.deleteLocked(k); ok {
			n++
			s.notifyLocked(NotifyEvicted, "evicted", k)
		}
	}
	return IntReply(n)
}

// EvictPolicy is the maxmemory-policy that picks the keys to evict; only
// the policies that need no record of key accesses are here.
type EvictPolicy uint8

const (
	EvictNone           EvictPolicy = iota // noeviction: writes are refused instead
	EvictAllKeysRandom                     // allkeys-random
	EvictVolatileRandom                    // volatile-random: keys with a TTL
	EvictVolatileTTL                       // volatile-ttl: the keys due soonest
)

// DataBytes is the store's estimate of what its keys and values hold
// (Stats().Bytes), without counting expired keys.
func (s *Store) DataBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bytes
}

// Evictable reports whether policy has a key it may evict.
func (s *Store) Evictable(policy EvictPolicy) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch policy {
	case EvictAllKeysRandom:
		return s.keys.Len() > 0
	case EvictVolatileRandom, EvictVolatileTTL:
		return s.keys.TTLs() > 0
	}
	return false
}

// EvictionCandidates returns keys (copies) to evict under policy until
// about free bytes are freed, at most limit of them, and the bytes they hold.
// The random policies pick keys at random, samples tries for each key (the
// volatile one keeps the first with a TTL, as Redis samples its expires
// dictionary); volatile-ttl takes the keys due soonest, exactly rather
// than the best of a sample.
func (s *Store) EvictionCandidates(policy EvictPolicy, samples, limit int, free int64) ([][]byte, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var keys [][]byte
	var freed int64
	take := func(it *item) bool {
		keys = append(keys, []byte(it.key))
		freed += it.size()
		return len(keys) < limit && freed < free
	}
	n := s.keys.Len()
	if n == 0 {
		return nil, 0
	}
	switch policy {
	case EvictAllKeysRandom:
		seen := map[string]bool{}
		for range limit * 4 {
			it, _ := s.keys.GetAt(rand.IntN(n))
			if seen[it.key] {
				continue
			}
			seen[it.key] = true
			if !take(&it) {
				break
			}
		}
	case EvictVolatileRandom:
		if s.keys.TTLs() == 0 {
			return nil, 0
		}
		seen := map[string]bool{}
		for range limit * 4 {
			var it item
			found := false
			for range max(samples, 1) * 16 {
				if it, _ = s.keys.GetAt(rand.IntN(n)); it.exp != 0 && !seen[it.key] {
					found = true
					break
				}
			}
			if !found {
				break // TTL keys are too rare to find at random: the soonest go
			}
			seen[it.key] = true
			if !take(&it) {
				return keys, freed
			}
		}
		if len(keys) == 0 {
			s.keys.earliest(math.MaxInt64-1, take)
		}
	case EvictVolatileTTL:
		s.keys.earliest(math.MaxInt64-1, take)
	}
	return keys, freed
}
