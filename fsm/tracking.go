package fsm

import "sync/atomic"

// Client-side caching. Redis invalidates a key its clients cache on every
// change of the key (signalModifiedKey, and the deletions of expiry and
// eviction); in kvs every such change is one of the keyspace's three
// writes (keyspace.Set, written, Delete), whoever proposed the entry: a
// local client, another node, the expiry or the eviction loop. While the
// server says a client tracks (SetTracking), those writes record their
// keys, and once the entry is applied and the lock released the hook set
// by SetModifiedHook receives them, with whether the entry flushed the
// keyspace (FLUSHALL, FLUSHDB, a snapshot installed in place of the
// store), on every replica alike, so each node invalidates for its own
// clients. While no client tracks, a write pays one atomic load.

// modified is the store's record of the keys an apply changed.
type modified struct {
	on      atomic.Bool
	keys    []string // guarded by Store.mu
	flushed bool     // guarded by Store.mu
	// expiry says the op being applied deletes for the expiry or the
	// eviction (OpDelExpired, OpEvict), whose keys go to deleted: no
	// client's own change, which NOLOOP leaves out.
	expiry  bool
	deleted []string
	hook    ModifiedHook
}

// ModifiedHook receives the keys an applied batch changed by commands,
// those the expiry and the eviction deleted, and whether the keyspace was
// flushed (FLUSHALL, FLUSHDB, a snapshot installed).
type ModifiedHook func(keys, deleted []string, flushed bool)

// SetModifiedHook sets the function told of the keys each applied batch
// changed; nil removes it. It runs after the batch, outside the store's
// lock, and must not block.
func (s *Store) SetModifiedHook(fn ModifiedHook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setModsLocked(&s.mods)
	s.mods.hook = fn
}

// setModsLocked has every database's keyspace record its changed keys in
// m: client-side caching knows keys by name, whatever their database, as
// Redis's tracking table does.
func (s *Store) setModsLocked(m *modified) {
	s.keys.mods = m
	s.otherDBsLocked(func(_ uint16, d dbKeys) { d.keys.mods = m })
}

// SetTracking says whether changed keys are recorded for the hook: while
// some client of the node tracks keys.
func (s *Store) SetTracking(on bool) { s.mods.on.Store(on) }

// noteModified records key as changed, when a client tracks.
func (m *modified) note(key string) {
	if m.on.Load() {
		if m.expiry {
			m.deleted = append(m.deleted, key)
		} else {
			m.keys = append(m.keys, key)
		}
	}
}

// flushedLocked records that the whole keyspace was replaced, whether or
// not a client tracks now: the server forgets the keys it tracked.
func (s *Store) flushedLocked() {
	if s.mods.hook != nil {
		s.mods.flushed = true
		s.mods.keys, s.mods.deleted = s.mods.keys[:0], s.mods.deleted[:0]
	}
}

// takeModifiedLocked returns the keys changed since the last call, whether
// the keyspace was flushed, and the hook to give them to.
func (s *Store) takeModifiedLocked() (modifiedBatch, ModifiedHook) {
	m := &s.mods
	if len(m.keys) == 0 && len(m.deleted) == 0 && !m.flushed {
		return modifiedBatch{}, nil
	}
	b := modifiedBatch{m.keys, m.deleted, m.flushed}
	m.keys, m.deleted, m.flushed = nil, nil, false
	return b, m.hook
}

// modifiedBatch is what takeModifiedLocked hands the hook.
type modifiedBatch struct {
	keys, deleted []string
	flushed       bool
}

// give hands b to hook.
func (b modifiedBatch) give(hook ModifiedHook) { hook(b.keys, b.deleted, b.flushed) }
