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
	hook    func(keys []string, flushed bool)
}

// SetModifiedHook sets the function told of the keys each applied batch
// changed; nil removes it. It runs after the batch, outside the store's
// lock, and must not block.
func (s *Store) SetModifiedHook(fn func(keys []string, flushed bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.mods = &s.mods
	s.mods.hook = fn
}

// SetTracking says whether changed keys are recorded for the hook: while
// some client of the node tracks keys.
func (s *Store) SetTracking(on bool) { s.mods.on.Store(on) }

// noteModified records key as changed, when a client tracks.
func (m *modified) note(key string) {
	if m.on.Load() {
		m.keys = append(m.keys, key)
	}
}

// flushedLocked records that the whole keyspace was replaced.
func (s *Store) flushedLocked() {
	if s.mods.on.Load() {
		s.mods.flushed = true
		s.mods.keys = s.mods.keys[:0]
	}
}

// takeModifiedLocked returns the keys changed since the last call, whether
// the keyspace was flushed, and the hook to give them to.
func (s *Store) takeModifiedLocked() ([]string, bool, func([]string, bool)) {
	if len(s.mods.keys) == 0 && !s.mods.flushed {
		return nil, false, nil
	}
	keys, flushed := s.mods.keys, s.mods.flushed
	s.mods.keys, s.mods.flushed = nil, false
	return keys, flushed, s.mods.hook
}
