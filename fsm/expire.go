package fsm

import "bytes"

// Passive expiry: Redis deletes a key its lookup finds expired
// (expireIfNeeded) on the spot. A read here cannot: it holds the lock
// shared, it is not in the log, and on a cluster follower it may not
// delete at all. So a read reports the expired keys its lookups met to the
// hook set by SetExpiredHook, once it has released the lock, and the
// server proposes their deletion (OpDelExpired, which leaves a key
// rewritten meanwhile alone) when its node may: the single node of memory
// and durable mode, a cluster's leader, and none while clients are paused.
//
// Which lookups report are Redis's that may delete: a read's lookups of
// its keys (the keymiss lookups, readLookups, and OBJECT's), the keys SCAN
// visits that pass its pattern, the keys RANDOMKEY samples, and the reads
// of transactions and scripts, at the clock they read with (the entry's,
// the script's start). KEYS, DBSIZE, MEMORY USAGE and the slot commands
// look nothing up that Redis would delete. Writes delete the expired keys
// they meet in apply (expireMetLocked) and report nothing.
//
// Cost: a read collects only while some key of the store is due
// (keyspace.nextDue, one load under the lock it holds), and GET only when
// the item it found is expired; otherwise nothing is allocated, locked or
// walked again.

// expiredSink is the Store's passive-expiry state.
type expiredSink struct {
	hook func(keys [][]byte) // guarded by Store.mu
	// met holds the keys that reads inside the entries being applied
	// (EXEC, scripts) found expired, guarded by Store.mu held
	// exclusively.
	met [][]byte
}

// SetExpiredHook sets the function that receives the keys reads found
// expired; nil (the default) stops the collection. It is called after the
// read or the applied batch, outside the store's lock, from the reading
// or applying goroutine, and may propose writes to the store; the keys are
// its to keep.
//
// A key of a database other than 0 is named by DBKey (SplitDBKey).
func (s *Store) SetExpiredHook(fn func(keys [][]byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired.hook = fn
}

// takeExpiredLocked returns the keys reads inside the applied entries
// found expired, and the hook to give them to.
func (s *Store) takeExpiredLocked() ([][]byte, func([][]byte)) {
	if len(s.expired.met) == 0 {
		return nil, nil
	}
	met := s.expired.met
	s.expired.met = nil
	return met, s.expired.hook
}

// collectsLocked reports whether reads at now may meet expired keys that
// someone wants to hear of.
func (s *Store) collectsLocked(now int64) bool {
	return s.expired.hook != nil && s.keys.nextDue() <= now
}

// readMetLocked answers the read c (op row sp) at now and appends to *met
// copies of the keys its lookups found expired.
func (s *Store) readMetLocked(now int64, c *Command, sp *opSpec, met *[][]byte) Reply {
	if sp.readMet != nil {
		return sp.readMet(s, now, c, met)
	}
	r := sp.read(s, now, c)
	if s.collectsLocked(now) {
		*met = s.expiredLookupsLocked(now, c, *met)
	}
	return r
}

// expireLookups are the keys of the read c that Redis's lookups delete
// when expired: those it looks up for reading (readLookups), and OBJECT's,
// which it looks up without announcing a miss.
func expireLookups(c *Command) (keyRange, bool) {
	if c.Op == OpObject {
		return keyRange{0, 0, 0}, true
	}
	return readLookups(c)
}

// expiredLookupsLocked appends to met copies of the keys the read c looks
// up and finds expired at now, in order, stopping where its lookups stop
// (missStops). It peeks, so a live key's access record is left alone.
func (s *Store) expiredLookupsLocked(now int64, c *Command, met [][]byte) [][]byte {
	k, ok := expireLookups(c)
	if !ok {
		return met
	}
	done := false
	k.each(c, func(_ int, key []byte) {
		if done {
			return
		}
		ks := unsafeString(key)
		switch p := s.keys.peek(keyHash(ks), ks); {
		case p == nil:
		case p.expired(now):
			met = append(met, bytes.Clone(key))
		case missStops(c, p):
			done = true
		}
	})
	return met
}
